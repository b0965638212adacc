"""``eyefold.optimize``: the pipeline on an in-memory model, with a report of what it did."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TypeVar, overload

import onnx
import onnx_ir as ir

from eyefold.errors import InvalidModelError
from eyefold.model_files.load import not_a_model
from eyefold.options import (
    DEFAULT_SIZE_LIMIT_BYTES,
    DEFAULT_TARGET_OPSET,
    InputShapesArg,
    PipelineOptions,
)
from eyefold.pipeline import run_pipeline
from eyefold.proto_path import optimize_proto
from eyefold.report import Report, build_report
from eyefold.undo import undo_point

__all__ = ["OptimizeResult", "optimize", "optimize_with_report"]

ModelT = TypeVar("ModelT", onnx.ModelProto, ir.Model)


@dataclasses.dataclass
class OptimizeResult:
    """The optimized model (same type as the argument) and the run's report."""

    model: onnx.ModelProto | ir.Model
    report: Report


@overload
def optimize_with_report(
    model: onnx.ModelProto, options: PipelineOptions | None = None, /, **keywords: object
) -> OptimizeResult: ...
@overload
def optimize_with_report(
    model: ir.Model, options: PipelineOptions | None = None, /, **keywords: object
) -> OptimizeResult: ...
def optimize_with_report(
    model: onnx.ModelProto | ir.Model,
    options: PipelineOptions | None = None,
    /,
    **keywords: object,
) -> OptimizeResult:
    """Like :func:`optimize`, and also returns the per-node report.

    Takes a :class:`PipelineOptions`, or :func:`optimize`'s keywords (which, given with
    ``options``, override those fields).
    """
    options = (
        PipelineOptions(**keywords)  # type: ignore[arg-type]
        if options is None
        else dataclasses.replace(options, **keywords)  # type: ignore[arg-type]
    )
    if isinstance(model, ir.Model):
        return OptimizeResult(model, _all_or_nothing(model, options))
    if isinstance(model, onnx.ModelProto):
        problem = not_a_model(model)
        if problem is not None:
            raise InvalidModelError(f"the ModelProto is not an ONNX model ({problem})")
        # A copy: the argument is never changed. Only the EyeLike neighbourhood of the
        # copy is deserialized (eyefold.proto_path).
        working = onnx.ModelProto()
        working.CopyFrom(model)
        run = optimize_proto(working, options)
        return OptimizeResult(run.model, build_report(run.record))
    raise TypeError(f"expected onnx.ModelProto or onnx_ir.Model, got {type(model).__name__}")


def _all_or_nothing(model: ir.Model, options: PipelineOptions) -> Report:
    """Runs the pipeline on ``model`` in place; on EyefoldError, ``model`` is as it was given.

    What is saved covers every step that can raise EyefoldError (:mod:`eyefold.undo`);
    other exceptions (an interrupt, a bug) restore what was saved, which may be less.
    """
    undo = undo_point(model, options)
    try:
        return run_pipeline(model, options)
    except BaseException:
        undo()
        raise


def optimize(
    model: ModelT,
    *,
    target_opset: int = DEFAULT_TARGET_OPSET,
    upgrade: bool = True,
    fold: bool = True,
    size_limit: int = DEFAULT_SIZE_LIMIT_BYTES,
    input_shapes: InputShapesArg | None = None,
    target_runtime: str | None = None,
    rules: Sequence[str] | None = None,
    relaxed: bool = False,
    lower_eyelike: bool = False,
) -> ModelT:
    """Folds, infers and upgrades the EyeLike nodes of ``model``.

    Args:
        model: an ``onnx.ModelProto`` (never mutated; a new one is returned) or an
            ``onnx_ir.Model`` (changed in place and returned; left as it was if an
            ``EyefoldError`` is raised).
        target_opset: default-domain opset to upgrade to (raised, never lowered).
        upgrade: whether to upgrade the opset.
        fold: whether to fold static EyeLike nodes into constants.
        size_limit: largest folded output, in bytes.
        input_shapes: graph input shapes to pin first, e.g. ``{"x": [1, 3, "n"]}``, so
            the EyeLike nodes that depend on them fold.
        target_runtime: ``"onnxruntime"``, ``"openvino"``, ``"tract"`` or ``"tvm"``:
            rewrite the EyeLike nodes left that this runtime cannot run into a form it
            runs, without breaking another (None: leave them as they are);
            ``"tensorrt"``: lower every EyeLike left into primitive ops.
        rules: rewrite rules to run, by name (``eyefold rules`` lists them); None runs
            every exact rule (and the relaxed ones with ``relaxed``), an empty sequence
            none.
        relaxed: also allow rules that are exact only up to IEEE special values (inf,
            NaN, -0.0).
        lower_eyelike: lower every EyeLike left after folding into Shape, Gather, Range,
            Add/Sub, Unsqueeze, Equal and Cast, for runtimes that cannot run EyeLike.

    Returns:
        The optimized model, of the type given.

    Raises:
        EyefoldError: the model is invalid (the message names the node) or an option is.
    """
    options = PipelineOptions(
        target_opset=target_opset,
        upgrade=upgrade,
        fold=fold,
        size_limit=size_limit,
        input_shapes=input_shapes,  # type: ignore[arg-type]  # normalized by the options
        target_runtime=target_runtime,
        rules=rules,  # type: ignore[arg-type]
        relaxed=relaxed,
        lower_eyelike=lower_eyelike,
    )
    return optimize_with_report(model, options).model  # type: ignore[return-value]
