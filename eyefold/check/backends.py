"""Running both models for ``--check``: under onnxruntime, else under ``onnx.reference``.

Both models run under onnxruntime when it is installed and can load both; else both run
under ``onnx.reference.ReferenceEvaluator``, and the caller is told why. An optimized model
that onnxruntime loads but fails to run where the original ran fails the check. The
comparison rules depend only on which backend ran, so this module hands back the outputs
and the backend's name and leaves judging them to :mod:`eyefold.check.equivalence`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx
import onnx.reference
import onnx_ir as ir

from eyefold.errors import CheckFailedError, EyefoldError, error_text
from eyefold.model_files import external_data_files, save_model, tensor_bytes
from eyefold.model_files.save import INLINE_LIMIT_BYTES

__all__ = ["ORT", "REFERENCE", "Source", "prepare_source", "run_both"]

ORT = "onnxruntime"
REFERENCE = "onnx.reference"

Source = str | bytes | onnx.ModelProto


def _ort_session(source: Source) -> Any:
    import onnxruntime  # optional: the reference evaluator is the fallback

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    if isinstance(source, onnx.ModelProto):
        source = source.SerializeToString()
    return onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def _run_ort(session: Any, feeds: Mapping[str, np.ndarray]) -> dict[str, Any]:
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, dict(feeds)), strict=True))


def _to_proto(source: Source) -> onnx.ModelProto:
    if isinstance(source, onnx.ModelProto):
        return source
    if isinstance(source, bytes):
        return onnx.load_from_string(source)
    return onnx.load(source)


def _run_reference(source: Source, feeds: Mapping[str, np.ndarray]) -> dict[str, Any]:
    proto = _to_proto(source)
    evaluator = onnx.reference.ReferenceEvaluator(proto)
    names = [o.name for o in proto.graph.output]
    return dict(zip(names, evaluator.run(None, dict(feeds)), strict=True))


def prepare_source(
    model: ir.Model | onnx.ModelProto | str | os.PathLike[str], scratch: str, stem: str
) -> Source:
    """A source both backends can load: bytes, a proto or a path (large models).

    Args:
        model: the model, or its file path (passed on as it is, nothing is copied).
        scratch: folder for a copy of a model too large to pass in memory.
        stem: file name of that copy, without ``.onnx``.
    """
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model)
    if isinstance(model, onnx.ModelProto):
        return model
    if external_data_files(model) or tensor_bytes(model) > INLINE_LIMIT_BYTES:
        path = os.path.join(scratch, f"{stem}.onnx")
        save_model(model, path, external_data=True)
        return path
    return ir.serde.serialize_model(model).SerializeToString()


def _pick_backend(original: Source, optimized: Source) -> tuple[Any, Any, str | None]:
    """Two onnxruntime sessions, or (None, None, why the reference evaluator is used)."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return None, None, "onnxruntime is not installed"
    try:
        original_session = _ort_session(original)
    except Exception as error:  # onnxruntime raises its own exception types
        return None, None, f"onnxruntime cannot load the original: {error_text(error)}"
    try:
        optimized_session = _ort_session(optimized)
    except Exception as error:
        # E.g. an opset newer than this onnxruntime: the reference evaluator still decides.
        return None, None, f"onnxruntime cannot load the optimized model: {error_text(error)}"
    return original_session, optimized_session, None


def run_both(
    original: Source, optimized: Source, feeds: dict[str, np.ndarray]
) -> tuple[dict[str, Any], dict[str, Any], str, str | None]:
    """Runs both models on ``feeds``, under onnxruntime when it can.

    Returns:
        The original's outputs, the optimized model's, the backend (:data:`ORT` or
        :data:`REFERENCE`) and why the reference evaluator was used (None under ORT).

    Raises:
        CheckFailedError: the optimized model fails where the original runs.
        EyefoldError: the original does not run under either backend.
    """
    original_session, optimized_session, reason = _pick_backend(original, optimized)
    if original_session is not None:
        try:
            want = _run_ort(original_session, feeds)
        except Exception as error:
            reason = f"onnxruntime cannot run the original: {error_text(error)}"
        else:
            try:
                got = _run_ort(optimized_session, feeds)
            except Exception as error:
                raise CheckFailedError(
                    "onnxruntime runs the original model but not the optimized one:"
                    f" {error_text(error)}"
                ) from None
            return want, got, ORT, None
    try:
        want = _run_reference(original, feeds)
    except Exception as error:
        raise EyefoldError(
            f"--check cannot run the original model ({reason}; onnx.reference:"
            f" {error_text(error)})"
        ) from None
    try:
        got = _run_reference(optimized, feeds)
    except Exception as error:
        raise CheckFailedError(
            "onnx.reference runs the original model but not the optimized one:"
            f" {error_text(error)}"
        ) from None
    return want, got, REFERENCE, reason
