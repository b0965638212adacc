"""The file path against the whole-model path on one model: same model, report, outputs.

Each model goes through eyefold's two ways of running the same steps: deserialize it
whole into onnx_ir (what an ``onnx_ir.Model`` argument gets), and
``eyefold.proto_path.optimize_proto`` (what a ModelProto and a file get).
"""

from __future__ import annotations

import copy

import onnx
import onnx_ir as ir

from eyefold.core.model_stats import model_stats
from eyefold.errors import EyefoldError
from eyefold.options import PipelineOptions
from eyefold.pipeline import pipeline_steps, run_steps
from eyefold.proto_path import optimize_proto
from eyefold.report import build_report
from eyefold.testing import assert_same_outputs, canonical, random_inputs


def whole_model_result(model: onnx.ModelProto, options: PipelineOptions):
    """The whole-model path's model and report: ``model`` deserialized whole, the steps run."""
    working = ir.serde.deserialize_model(model)
    report = run_steps(working, pipeline_steps(options)).report
    return ir.serde.serialize_model(working), report


def _proto(model: onnx.ModelProto, options: PipelineOptions):
    """The proto path's model and report; its stats checked against a count of the model."""
    before = model_stats(ir.serde.deserialize_model(model), None)
    result = optimize_proto(model, options, with_stats=True)
    after = model_stats(ir.serde.deserialize_model(result.model), None)
    assert (result.before, result.after) == (before, after)
    return result.model, build_report(result.record)


def _outcome(run, model: onnx.ModelProto, options: PipelineOptions):
    """(model, report) or the error's type and message."""
    try:
        return run(copy.deepcopy(model), options)
    except (EyefoldError, ValueError, RuntimeError) as error:
        return type(error).__name__, str(error)


def compare_paths(model: onnx.ModelProto, options: PipelineOptions, *, run: bool) -> str:
    """Asserts both paths agree on ``model``; returns the step the proto path took.

    The results are compared canonically (nodes, initializer values, value_info, graph
    I/O, opsets), the per-node reports field by field, and, if ``run``, both run on the
    same random inputs bit for bit. Where either path fails, both fail alike.
    """
    whole = _outcome(whole_model_result, model, options)
    proto = _outcome(_proto, model, options)
    if isinstance(whole[0], str) or isinstance(proto[0], str):
        assert proto == whole
        return "error"
    assert canonical(proto[0]) == canonical(whole[0])
    assert proto[1].nodes == whole[1].nodes
    assert proto[1].counts() == whole[1].counts()
    assert proto[1].warnings == whole[1].warnings
    assert (proto[1].opset_before, proto[1].opset_after) == (
        whole[1].opset_before,
        whole[1].opset_after,
    )
    if run:
        assert_same_outputs(whole[0], proto[0], random_inputs(model, seed=3))
    return proto[1].steps[0].name
