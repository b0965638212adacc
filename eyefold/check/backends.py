"""Running both models for ``--check``: onnxruntime, else ``onnx.reference``, else lowered.

Both models run under onnxruntime when it is installed and can load both; else both run
under ``onnx.reference.ReferenceEvaluator``, and the caller is told why; where neither
runs the original (onnxruntime lacks its EyeLike types, the reference evaluator one of its
ops), both run on onnxruntime with the EyeLike nodes it cannot run lowered into primitive
ops, bit-exact (:mod:`eyefold.check.lowered`), and the caller is told that too. An
optimized model that onnxruntime loads but fails to run where the original ran fails the
check. The comparison rules depend only on which backend ran, so this module hands back
the outputs and how they were run, and leaves judging them to
:mod:`eyefold.check.equivalence`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx
import onnx.reference
import onnx_ir as ir

from eyefold.check.lowered import lower_unrunnable
from eyefold.errors import CheckFailedError, EyefoldError, error_text
from eyefold.model_files import external_data_files, save_model, tensor_bytes
from eyefold.model_files.save import INLINE_LIMIT_BYTES

__all__ = ["ORT", "REFERENCE", "Run", "Source", "prepare_source", "run_both"]

ORT = "onnxruntime"
REFERENCE = "onnx.reference"

Source = str | bytes | onnx.ModelProto


def _ort_session(source: Source) -> Any:
    import onnxruntime  # optional: the reference evaluator is the fallback

    options = onnxruntime.SessionOptions()
    # Fatal only: a refusal or a failed run is an outcome the check reports in its own
    # one line; onnxruntime's own log line would be a second one.
    options.log_severity_level = 4
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


@dataclasses.dataclass
class Run:
    """Both models' outputs, and how they were run.

    Attributes:
        want: the original's outputs, by name.
        got: the optimized model's outputs, by name.
        backend: :data:`ORT` or :data:`REFERENCE`.
        reason: why the models were not run on onnxruntime as they are (None: they were).
        original: how the original ran when not as given (the lowered route), else None.
        optimized: how the optimized model ran when not as written, else None.
    """

    want: dict[str, Any]
    got: dict[str, Any]
    backend: str
    reason: str | None = None
    original: str | None = None
    optimized: str | None = None


def _run_lowered(
    original: Source, optimized: Source, feeds: dict[str, np.ndarray], reason: str
) -> Run | None:
    """Both models on onnxruntime, the EyeLike nodes it cannot run lowered (None: no go).

    The original gets its unrunnable EyeLike nodes lowered; the optimized model is run as
    written when onnxruntime loads it, else lowered the same way.

    Raises:
        CheckFailedError: the optimized model fails where the lowered original runs.
    """
    lowered = lower_unrunnable(original)
    if lowered is None:
        return None
    try:
        original_session = _ort_session(ir.serde.serialize_model(lowered.model))
        want = _run_ort(original_session, feeds)
    except Exception:  # onnxruntime's own types: this route does not work either
        return None
    optimized_note = None
    try:
        optimized_session = _ort_session(optimized)
    except Exception:
        again = lower_unrunnable(optimized)
        if again is None:
            raise CheckFailedError(
                "onnxruntime runs the original with its unrunnable EyeLike nodes lowered,"
                " but cannot load the optimized model"
            ) from None
        optimized_session = _ort_session(ir.serde.serialize_model(again.model))
        optimized_note = again.describe()
    try:
        got = _run_ort(optimized_session, feeds)
    except Exception as error:
        raise CheckFailedError(
            "onnxruntime runs the original (its unrunnable EyeLike nodes lowered) but not"
            f" the optimized model: {error_text(error)}"
        ) from None
    return Run(want, got, ORT, reason, lowered.describe(), optimized_note)


def run_both(original: Source, optimized: Source, feeds: dict[str, np.ndarray]) -> Run:
    """Runs both models on ``feeds`` by the first route that runs the original.

    Under onnxruntime when it runs them as they are, else under onnx's reference
    evaluator, else on onnxruntime with the EyeLike nodes it cannot run lowered
    (:mod:`eyefold.check.lowered`).

    Raises:
        CheckFailedError: the optimized model fails where the original runs.
        EyefoldError: the original does not run by any of these routes.
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
            return Run(want, got, ORT)
    try:
        want = _run_reference(original, feeds)
    except Exception as error:
        reason = f"{reason}; onnx.reference: {error_text(error)}"
        routed = _run_lowered(original, optimized, feeds, reason) if _has_ort() else None
        if routed is not None:
            return routed
        raise EyefoldError(f"--check cannot run the original model ({reason})") from None
    try:
        got = _run_reference(optimized, feeds)
    except Exception as error:
        raise CheckFailedError(
            "onnx.reference runs the original model but not the optimized one:"
            f" {error_text(error)}"
        ) from None
    return Run(want, got, REFERENCE, reason)


def _has_ort() -> bool:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True
