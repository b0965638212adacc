"""Running both models for ``--check``: onnxruntime, else ``onnx.reference``, else lowered.

With a target runtime (``--target-runtime R``), the optimized model runs on R when R is
installed, since that is where it will run (:func:`run_for_target`); the original runs
by the routes below.

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

from eyefold.check.isolated import run_isolated
from eyefold.check.lowered import lower_unrunnable
from eyefold.errors import CheckFailedError, EyefoldError, error_text
from eyefold.model_files import external_data_files, save_model, tensor_bytes
from eyefold.model_files.save import INLINE_LIMIT_BYTES
from eyefold.runtime.runners import RUNNERS, RunError, missing_reason

__all__ = [
    "ORT",
    "REFERENCE",
    "Run",
    "Source",
    "prepare_source",
    "run_both",
    "run_for_target",
    "run_on",
    "target_missing",
]

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
        backend: what ran the original: :data:`ORT` or :data:`REFERENCE`.
        reason: why the original was not run on onnxruntime as it is (None: it was).
        original: how the original ran when not as given (the lowered route), else None.
        optimized: how the optimized model ran when not as written, else None.
        output_backend: what ran the optimized model, when not ``backend`` (the target
            runtime).
        target_note: why the optimized model did not run on the target runtime, when it
            did not (not installed; refused, as the original is).
    """

    want: dict[str, Any]
    got: dict[str, Any]
    backend: str
    reason: str | None = None
    original: str | None = None
    optimized: str | None = None
    output_backend: str | None = None
    target_note: str | None = None

    @property
    def ran_output_on(self) -> str:
        """The backend that ran the optimized model."""
        return self.output_backend or self.backend


def _lowered_original(original: Source, feeds: dict[str, np.ndarray]) -> tuple[Any, Any]:
    """The original's outputs on onnxruntime with its unrunnable EyeLike nodes lowered.

    Returns:
        The outputs and the description of what was lowered, or (None, None) when this
        route does not run the original either.
    """
    lowered = lower_unrunnable(original)
    if lowered is None:
        return None, None
    try:
        session = _ort_session(ir.serde.serialize_model(lowered.model))
        return _run_ort(session, feeds), lowered.describe()
    except Exception:  # onnxruntime's own types: this route does not work either
        return None, None


def _run_lowered(
    original: Source, optimized: Source, feeds: dict[str, np.ndarray], reason: str
) -> Run | None:
    """Both models on onnxruntime, the EyeLike nodes it cannot run lowered (None: no go).

    The original gets its unrunnable EyeLike nodes lowered; the optimized model is run as
    written when onnxruntime loads it, else lowered the same way.

    Raises:
        CheckFailedError: the optimized model fails where the lowered original runs.
    """
    want, original_note = _lowered_original(original, feeds)
    if want is None:
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
    return Run(want, got, ORT, reason, original_note, optimized_note)


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


def _run_original(original: Source, feeds: dict[str, np.ndarray]) -> Run:
    """The original's outputs by the first route that runs it (``got`` left empty).

    onnxruntime as it is, else onnx's reference evaluator, else onnxruntime with its
    unrunnable EyeLike nodes lowered: the same routes :func:`run_both` takes.

    Raises:
        EyefoldError: the original does not run by any of these routes.
    """
    if not _has_ort():
        reason = "onnxruntime is not installed"
    else:
        try:
            return Run(_run_ort(_ort_session(original), feeds), {}, ORT)
        except Exception as error:  # onnxruntime raises its own exception types
            reason = f"onnxruntime cannot run the original: {error_text(error)}"
    try:
        return Run(_run_reference(original, feeds), {}, REFERENCE, reason)
    except Exception as error:
        reason = f"{reason}; onnx.reference: {error_text(error)}"
    want, note = _lowered_original(original, feeds) if _has_ort() else (None, None)
    if want is None:
        raise EyefoldError(f"--check cannot run the original model ({reason})")
    return Run(want, {}, ORT, reason, note)


def target_missing(runtime: str) -> str | None:
    """Why ``--check`` cannot run a model on ``runtime`` here, None when it can."""
    if runtime not in RUNNERS or runtime == "reference":
        return f"{runtime} has no runner in eyefold's check"
    return missing_reason(runtime)


def _file_of(source: Source, scratch: str, stem: str) -> str:
    """A path to ``source``, written into ``scratch`` when it is in memory."""
    if isinstance(source, str):
        return source
    path = os.path.join(scratch, f"{stem}.onnx")
    with open(path, "wb") as file:
        file.write(source if isinstance(source, bytes) else source.SerializeToString())
    return path


def run_on(
    runtime: str, source: Source, feeds: dict[str, np.ndarray], scratch: str, stem: str
) -> dict[str, Any]:
    """``source``'s outputs on ``runtime``, by name.

    Raises:
        RunError: the runtime refused or failed the model.
    """
    if runtime == ORT:  # sessions from memory; sequence outputs come back as lists
        try:
            session = _ort_session(source)
        except Exception as error:
            raise RunError("load", error) from None
        try:
            return _run_ort(session, feeds)
        except Exception as error:
            raise RunError("run", error) from None
    path = _file_of(source, scratch, stem)
    outputs = run_isolated(runtime, path, feeds, scratch)
    names = [o.name for o in onnx.load(path, load_external_data=False).graph.output]
    if len(names) != len(outputs):
        raise RunError("fetch", ValueError(f"{len(outputs)} outputs for {len(names)} names"))
    return dict(zip(names, outputs, strict=True))


def run_for_target(
    original: Source,
    optimized: Source,
    feeds: dict[str, np.ndarray],
    target: str,
    scratch: str,
) -> Run:
    """The optimized model run on ``target`` (what the user deploys), the original as usual.

    The original runs as :func:`run_both` would run it (onnxruntime, else the reference
    evaluator, else lowered). When ``target`` is not installed, or refuses the optimized
    model as it refuses the original, both run as :func:`run_both` runs them and
    ``target_note`` says why.

    Raises:
        CheckFailedError: ``target`` runs the original but not the optimized model, or
            the optimized model fails where the original runs.
        EyefoldError: the original does not run by any route.
    """
    missing = target_missing(target)
    if missing is not None:
        return dataclasses.replace(run_both(original, optimized, feeds), target_note=missing)
    try:
        got = run_on(target, optimized, feeds, scratch, "output")
    except RunError as error:
        try:
            run_on(target, original, feeds, scratch, "original")
        except RunError:
            note = f"{target} cannot run the output ({error}), nor the original"
            return dataclasses.replace(run_both(original, optimized, feeds), target_note=note)
        raise CheckFailedError(
            f"{target} runs the original model but not the optimized one: {error}"
        ) from None
    run = _run_original(original, feeds)
    return dataclasses.replace(run, got=got, output_backend=target)
