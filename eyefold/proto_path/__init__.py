"""The file path: optimize a ModelProto by deserializing only the EyeLike neighbourhood.

An onnx-ir round trip of a whole model costs about ten times its protobuf load and save,
even when eyefold changes ten nodes of a hundred thousand. On a ModelProto (the library
given one, the command line) eyefold therefore scans the proto once (:mod:`.scan`),
extracts the nodes the passes may read or change into a small onnx_ir model
(:mod:`.extract`), runs the very same pipeline steps on it, and writes the result back
into the proto (:mod:`.splice`). Nodes nobody touches are never deserialized.

The whole-model path (deserialize everything, run the steps, serialize) is taken instead,
and the report's steps say why, when the neighbourhood cannot stand for the model: an
EyeLike or identity-shaped constant in a subgraph or function, a node holding subgraphs
inside the neighbourhood, an unsorted or malformed graph, pinned input shapes, or a result
that cannot be spliced in order.

An opset upgrade converts every node, so it runs on the proto first (:mod:`.upgrade`, the
same conversion as the pipeline's upgrade step, on weightless copies of the bodies); the
pipeline's own upgrade step then has nothing left to do. What that upgrade cannot do the
original proto takes to the whole-model path, which gives the result or the precise error.
"""

from __future__ import annotations

import time

import onnx
import onnx_ir as ir

from eyefold.core.domains import default_opset
from eyefold.options import PipelineOptions
from eyefold.passes.pipeline import pipeline_steps, run_steps
from eyefold.proto_path.extract import build_neighbourhood, choose_nodes
from eyefold.proto_path.scan import scan_model
from eyefold.proto_path.splice import SpliceError, splice
from eyefold.proto_path.upgrade import upgrade_proto
from eyefold.report import Report, StepTiming
from eyefold.rule_registry import select_rules

__all__ = [
    "NEIGHBOURHOOD_STEP",
    "UPGRADE_STEP",
    "WHOLE_MODEL_STEP",
    "optimize_proto",
    "whole_model_reason",
]

NEIGHBOURHOOD_STEP = "neighbourhood"
WHOLE_MODEL_STEP = "whole-model"
# The pipeline's name for its upgrade step (eyefold.passes.pipeline.pipeline_steps).
UPGRADE_STEP = "upgrade"


def _identity_dtypes(options: PipelineOptions) -> frozenset[int]:
    specs = select_rules(options.rules, relaxed=options.relaxed)
    return frozenset(int(d) for spec in specs for d in spec.constant_dtypes)


# Readers of an EyeLike output whose patterns reach past the neighbourhood.
_MASK_READERS = frozenset({"Mul"})


def whole_model_reason(model: onnx.ModelProto, options: PipelineOptions) -> str | None:
    """Why ``options`` need the whole model whatever its graph, or None."""
    if options.input_shapes:
        return "input shapes are pinned on the whole model"
    return None


def _upgrade(model: onnx.ModelProto, options: PipelineOptions) -> StepTiming | str | None:
    """Upgrades ``model`` in place: the report's upgrade step, why not, or None (no upgrade).

    The pipeline's upgrade step then finds the target opset: the returned timing stands in
    for its record, so the report reads as the whole-model path's.
    """
    if not options.upgrade:
        return None
    opset = default_opset({o.domain: o.version for o in model.opset_import})
    if opset is None or opset >= options.target_opset:
        return None
    start = time.perf_counter()
    reason = upgrade_proto(model, options.target_opset)
    if reason is not None:
        return f"the opset {opset} -> {options.target_opset} upgrade: {reason}"
    return StepTiming(UPGRADE_STEP, time.perf_counter() - start, True)


def _as_upgraded(
    report: Report, opset_before: int | None, upgrade: StepTiming | None
) -> Report:
    """The report of a run on the upgraded proto, as if the upgrade had been its step."""
    if upgrade is None:
        return report
    report.opset_before = opset_before
    report.steps = [upgrade if s.name == UPGRADE_STEP else s for s in report.steps]
    return report


def _neighbourhood(
    model: onnx.ModelProto, options: PipelineOptions, base_dir: str
) -> Report | str:
    start = time.perf_counter()
    index = scan_model(model, _identity_dtypes(options))
    if index.obstacle is not None:
        return index.obstacle
    chosen = choose_nodes(index)
    if index.holders.intersection(chosen):
        return "a node holding subgraphs is in an EyeLike's neighbourhood"
    if any(model.graph.node[p].op_type in _MASK_READERS for p in chosen):
        # The diagonal rules match Mul(data, mask) -> ReduceSum and read the data side's
        # shape chain: more than the neighbourhood holds.
        return "an EyeLike is used as a mask (Mul), which the diagonal rules look around"
    hood = build_neighbourhood(model, index, chosen, base_dir)
    seconds = time.perf_counter() - start
    result = run_steps(hood.model, pipeline_steps(options))
    start = time.perf_counter()
    try:
        splice(model, index, hood)
    except SpliceError as error:
        return f"the result cannot be spliced back ({error})"
    seconds += time.perf_counter() - start
    report = result.report
    report.steps.insert(0, StepTiming(NEIGHBOURHOOD_STEP, seconds, False))
    report.extra["neighbourhood"] = {"nodes": len(chosen), "of": len(model.graph.node)}
    return report


def optimize_proto(
    model: onnx.ModelProto, options: PipelineOptions, *, base_dir: str = ""
) -> tuple[onnx.ModelProto, Report]:
    """Optimizes ``model`` in place where it can, else on a whole-model copy.

    Args:
        model: the model; changed in place on the neighbourhood path, and by an opset
            upgrade done on the proto (the whole-model path may then follow). Otherwise a
            new proto is returned and ``model`` is left as it was.
        options: the run's options.
        base_dir: folder the model's external data is read from (lazily).

    Returns:
        The optimized proto (``model`` itself, or the whole-model result) and the report.
    """
    opset_before = default_opset({o.domain: o.version for o in model.opset_import})
    reason = whole_model_reason(model, options)
    upgrade = None
    if reason is None:
        outcome = _upgrade(model, options)
        if isinstance(outcome, str):
            reason = outcome
        else:
            upgrade = outcome
    if reason is None:
        outcome = _neighbourhood(model, options, base_dir)
        if isinstance(outcome, Report):
            return model, _as_upgraded(outcome, opset_before, upgrade)
        reason = outcome
    # After a proto upgrade, the whole-model path's own upgrade has nothing left to do.
    working = ir.serde.deserialize_model(model)
    report = run_steps(working, pipeline_steps(options)).report
    report.steps.insert(0, StepTiming(f"{WHOLE_MODEL_STEP}: {reason}", 0.0, False))
    report.extra["whole_model"] = reason
    return ir.serde.serialize_model(working), _as_upgraded(report, opset_before, upgrade)
