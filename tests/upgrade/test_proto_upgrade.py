"""The opset upgrade on a ModelProto gives UpgradeOpsetPass's model, or leaves the proto alone.

``eyefold.upgrade.on_proto.upgrade_proto`` runs the conversion of ``UpgradeOpsetPass``
on weightless copies of the proto's bodies and writes the result back onto the proto.
Each upgraded model is compared with the onnx-ir upgrade's (canonically, functions byte
for byte); each failure must leave the proto byte-identical, and ``optimize_proto`` must
then raise the onnx-ir path's very error.
"""

from __future__ import annotations

import copy

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import helper, numpy_helper

from eyefold.core.domains import default_opset
from eyefold.errors import EyefoldError, WholeModelNeeded
from eyefold.options import PipelineOptions
from eyefold.passes.upgrade_opset import UpgradeOpsetPass
from eyefold.pipeline import pipeline_steps, run_steps
from eyefold.proto_path import NEIGHBOURHOOD_STEP, UPGRADE_STEP, optimize_proto
from eyefold.report import build_report
from eyefold.testing import canonical
from eyefold.upgrade import conversion as version_conversion
from eyefold.upgrade import on_proto as proto_upgrade
from eyefold.upgrade.on_proto import ConverterTypes, upgrade_proto


def _upgrade_to_22(model: onnx.ModelProto) -> ConverterTypes:
    """``upgrade_proto`` from the model's own opset, as the file path calls it."""
    return upgrade_proto(
        model, default_opset({o.domain: o.version for o in model.opset_import}), 22
    )


def _ir_upgrade(model: onnx.ModelProto, target: int = 22) -> onnx.ModelProto:
    working = ir.serde.deserialize_model(model)
    UpgradeOpsetPass(target)(working)
    return ir.serde.serialize_model(working)


def _assert_upgrades_as_onnx_ir(model: onnx.ModelProto) -> onnx.ModelProto:
    expected = _ir_upgrade(model)
    upgraded = copy.deepcopy(model)
    _upgrade_to_22(upgraded)
    assert canonical(upgraded) == canonical(expected)
    onnx.checker.check_model(upgraded, full_check=True)
    return upgraded


def _error(run, model: onnx.ModelProto) -> tuple[str, str]:
    with pytest.raises(EyefoldError) as caught:
        run(copy.deepcopy(model), PipelineOptions())
    return type(caught.value).__name__, str(caught.value)


def _whole_model(model: onnx.ModelProto, options: PipelineOptions):
    working = ir.serde.deserialize_model(model)
    return run_steps(working, pipeline_steps(options)).report


def _eyelike_at_opset_8() -> onnx.ModelProto:
    return onnx.parser.parse_model(
        """<ir_version: 4, opset_import: ["" : 8]>
        g (float[3, 3] x) => (float[3, 3] y) { y = EyeLike (x) }"""
    )


def _function_reference(upgrade_models) -> onnx.ModelProto:
    return upgrade_models.function_with_reference("Cast", "to", 19, grid_sample=True)


_FAILURES = {
    "invalid-at-source": lambda m: m.unsqueeze_with_axes_attribute_at_13(),
    "reference-on-changed-op": _function_reference,
    "eyelike-before-opset-9": lambda m: _eyelike_at_opset_8(),
    "nearest-resize-mixed-scales": lambda m: m.resize_model(
        10, [1.0, 1.0, 2.0, 0.5], "nearest", ([1, 1, 4, 4], [1, 1, 8, 2])
    ),
}


@pytest.mark.parametrize("case", sorted(_FAILURES))
def test_failure_leaves_the_proto_unchanged_and_gives_the_onnx_ir_error(
    case: str, upgrade_models
) -> None:
    model = _FAILURES[case](upgrade_models)
    before = model.SerializeToString()
    with pytest.raises(WholeModelNeeded):
        _upgrade_to_22(model)
    assert model.SerializeToString() == before
    assert _error(optimize_proto, model) == _error(
        lambda m, o: run_steps(ir.serde.deserialize_model(m), pipeline_steps(o)), model
    )


@pytest.mark.parametrize("opset", [9, 10, 11, 13, 18, 21])
def test_functions_and_if_branches_are_upgraded(opset: int, upgrade_models) -> None:
    upgraded = _assert_upgrades_as_onnx_ir(upgrade_models.corpus_model(opset))
    (function,) = upgraded.functions
    assert {o.domain: o.version for o in function.opset_import}[""] == 22
    unsqueeze = next(n for n in function.node if n.op_type == "Unsqueeze")
    assert len(unsqueeze.input) == 2  # axes became an input at 13
    (branch,) = [n for n in upgraded.graph.node if n.op_type == "If"]
    then = next(a.g for a in branch.attribute if a.name == "then_branch")
    assert all(len(n.input) == 2 for n in then.node if n.op_type in ("Squeeze", "Unsqueeze"))


def test_loop_body_is_upgraded(upgrade_models) -> None:
    upgraded = _assert_upgrades_as_onnx_ir(upgrade_models.loop_model())
    (loop,) = [n for n in upgraded.graph.node if n.op_type == "Loop"]
    body = loop.attribute[0].g
    assert len(next(n for n in body.node if n.op_type == "Unsqueeze").input) == 2


def test_unchanged_branch_keeps_its_eyelike_beside_a_converted_one() -> None:
    # The converter changes then_branch (Unsqueeze's axes become an input at 13) and
    # leaves else_branch as it was: the If is patched, and the branch the converter did
    # not change must be the model's own, not the copy holding the EyeLike's placeholder.
    model = onnx.parser.parse_model(
        """<ir_version: 4, opset_import: ["" : 9]>
        g (bool c, float[3] v, float[3, 3] x) => (float[1, 3] y) {
            y = If (c) <
                then_branch = t () => (float[1, 3] a) { a = Unsqueeze <axes = [0]> (v) },
                else_branch = e () => (float[3, 3] b) { b = EyeLike <k = 1> (x) }
            >
        }"""
    )
    upgraded = _assert_upgrades_as_onnx_ir(model)
    (branch,) = upgraded.graph.node
    other = next(a.g for a in branch.attribute if a.name == "else_branch")
    assert [(n.op_type, [a.name for a in n.attribute]) for n in other.node] == [
        ("EyeLike", ["k"])
    ]


@pytest.mark.parametrize(("opset", "grid_sample"), [(11, False), (19, True)])
def test_attribute_reference_on_an_unchanged_op_is_kept(
    opset: int, grid_sample: bool, upgrade_models
) -> None:
    model = upgrade_models.function_with_reference(
        "Shrink", "bias", opset, grid_sample=grid_sample
    )
    upgraded = _assert_upgrades_as_onnx_ir(model)
    shrink = upgraded.functions[0].node[-1]
    assert shrink.op_type == "Shrink" and shrink.attribute[0].ref_attr_name == "bias"


def _large_initializer_model() -> onnx.ModelProto:
    weight = np.linspace(-1, 1, 64 * 64, dtype=np.float32).reshape(64, 64)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("Unsqueeze", ["xw"], ["y"], axes=[0]),
    ]
    graph = helper.make_graph(
        nodes,
        "weights",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 64])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 2, 64])],
        [numpy_helper.from_array(weight, "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])


def test_large_tensors_are_neither_copied_nor_handed_to_the_converter(
    monkeypatch, upgrade_models
) -> None:
    handed: list[onnx.GraphProto] = []
    convert = version_conversion.convert_graph

    def spy(before: onnx.ModelProto, *arguments: object, **keywords: object):
        handed.append(before.graph)
        return convert(before, *arguments, **keywords)  # type: ignore[arg-type]

    monkeypatch.setattr(proto_upgrade, "convert_graph", spy)
    model = _large_initializer_model()
    tensor = model.graph.initializer[0]
    data = tensor.raw_data
    _assert_upgrades_as_onnx_ir(model)
    upgraded = model
    _upgrade_to_22(upgraded)
    assert upgraded.graph.initializer[0] is tensor and tensor.raw_data == data
    weightless = handed[-1]
    assert not weightless.initializer
    assert [i.name for i in weightless.input] == ["x", "w"]

    model = upgrade_models.large_constant_model()
    _assert_upgrades_as_onnx_ir(model)
    constants = {n.output[0]: n for n in model.graph.node if n.op_type == "Constant"}
    bias = {n.output[0]: n for n in model.functions[0].node if n.op_type == "Constant"}
    _upgrade_to_22(model)
    assert next(n for n in model.graph.node if n.output[0] == "w") is constants["w"]
    assert next(n for n in model.functions[0].node if n.output[0] == "b") is bias["b"]
    assert all(n.op_type != "Constant" or n.output[0] != "w" for n in handed[-2].node)


def test_optimize_proto_upgrades_on_the_proto_and_reports_as_the_whole_model_path(
    upgrade_models,
) -> None:
    model = upgrade_models.torch_eye_chain(9)
    expected = _whole_model(model, PipelineOptions())
    report = build_report(optimize_proto(copy.deepcopy(model), PipelineOptions()).record)
    assert report.steps[0].name == NEIGHBOURHOOD_STEP
    assert (report.opset_before, report.opset_after) == (9, 22)
    assert report.nodes == expected.nodes
    upgrade = next(s for s in report.steps if s.name == UPGRADE_STEP)
    assert upgrade.modified and upgrade.seconds > 0
    assert [s.name for s in report.steps[1:]] == [s.name for s in expected.steps]
