"""eyefold.optimize end to end: API contract, sample models, determinism, idempotence."""

from __future__ import annotations

import copy
import pathlib

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import eyefold
from eyefold.errors import EyefoldError
from eyefold.options import PipelineOptions
from eyefold.passes import FoldResult, RulesResult, default_pipeline, pipeline_steps, report_of
from eyefold.testing import assert_same_outputs, check_model_safely, count_ops, random_inputs

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "sample_models"
SAMPLE_FILES = sorted(SAMPLES.glob("*.onnx"))

# What each sample's EyeLike nodes must become, from the models' construction (see
# sample_models/README.md): static inputs fold, a symbolic dim or an untyped function
# input does not.
EXPECTED_ACTIONS = {
    "bool_mask.onnx": ["folded"],
    "dynamic_batch.onnx": ["inferred"],
    "dynamo_diagonal.onnx": ["inferred"],
    "function_eye.onnx": ["kept"],
    "if_branch.onnx": ["folded"],
    "paddle_zeros.onnx": ["folded"],
    "static_matmul.onnx": ["folded", "folded"],
    "torch_eye_chain.onnx": ["folded"],
}


def test_every_sample_has_an_expectation():
    assert sorted(p.name for p in SAMPLE_FILES) == sorted(EXPECTED_ACTIONS)


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=[p.stem for p in SAMPLE_FILES])
def test_sample_model_optimizes_and_keeps_its_meaning(path: pathlib.Path):
    original = onnx.load(path)
    result = eyefold.optimize_with_report(original)
    assert [n.action for n in result.report.nodes] == EXPECTED_ACTIONS[path.name]
    folded = EXPECTED_ACTIONS[path.name].count("folded")
    assert count_ops(result.model, "EyeLike") == count_ops(original, "EyeLike") - folded
    check_model_safely(result.model)
    feeds = random_inputs(original, seed=1)
    if "cond" in feeds:
        for cond in (True, False):
            assert_same_outputs(original, result.model, {**feeds, "cond": np.array(cond)})
    else:
        assert_same_outputs(original, result.model, feeds)


def test_dynamic_batch_sample_keeps_a_shaped_eyelike():
    model = eyefold.optimize(ir.load(SAMPLES / "dynamic_batch.onnx"))
    (eye,) = [n for n in model.graph if n.op_type == "EyeLike"]
    assert eye.outputs[0].dtype == ir.DataType.FLOAT
    assert [str(d) for d in eye.outputs[0].shape.dims] == ["batch", "6"]


def test_model_proto_argument_is_never_mutated():
    original = onnx.load(SAMPLES / "static_matmul.onnx")
    snapshot = original.SerializeToString()
    result = eyefold.optimize(original)
    assert isinstance(result, onnx.ModelProto)
    assert result is not original
    assert original.SerializeToString() == snapshot
    assert count_ops(result, "EyeLike") == 0


def test_ir_model_is_changed_in_place_and_returned():
    model = ir.load(SAMPLES / "static_matmul.onnx")
    assert eyefold.optimize(model) is model
    assert count_ops(model, "EyeLike") == 0


def test_no_fold_infers_only():
    model = onnx.load(SAMPLES / "static_matmul.onnx")
    result = eyefold.optimize_with_report(model, fold=False)
    assert result.report.counts() == {
        "total": 2,
        "folded": 0,
        "inferred": 2,
        "kept": 0,
        "removed": 0,
    }
    assert count_ops(result.model, "EyeLike") == 2
    assert {n.reason for n in result.report.nodes} == {"folding disabled"}


def test_report_dict_follows_the_contract():
    result = eyefold.optimize_with_report(onnx.load(SAMPLES / "torch_eye_chain.onnx"))
    report = result.report.to_dict()
    assert set(report["opset"]) == {"before", "after"}
    assert report["eyelike"] == {"total": 1, "folded": 1, "inferred": 0, "kept": 0, "removed": 0}  # noqa: E501
    (node,) = report["nodes"]
    assert node["name"] == "eye"
    assert node["graph"] == "main"
    assert node["shape"] == [16, 16]
    assert node["dtype"] == "FLOAT"
    assert node["bytes"] == 16 * 16 * 4
    assert node["from_inputs"] == ["x"]


@pytest.mark.parametrize(
    "options",
    [{"size_limit": -1}, {"size_limit": 1.5}, {"target_opset": 8}, {"target_opset": 10**6}],
    ids=["negative-limit", "float-limit", "opset-8", "opset-huge"],
)
def test_bad_options_are_errors(options):
    with pytest.raises(EyefoldError):
        eyefold.optimize(onnx.load(SAMPLES / "static_matmul.onnx"), **options)


def test_wrong_model_type_is_a_type_error():
    with pytest.raises(TypeError, match="ModelProto"):
        eyefold.optimize("model.onnx")


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=[p.stem for p in SAMPLE_FILES])
def test_deterministic_and_idempotent(path: pathlib.Path):
    original = onnx.load(path)
    once = eyefold.optimize(copy.deepcopy(original))
    again = eyefold.optimize(copy.deepcopy(original))
    assert once.SerializeToString(deterministic=True) == again.SerializeToString(
        deterministic=True
    )
    twice = eyefold.optimize(once)
    assert twice.SerializeToString(deterministic=True) == once.SerializeToString(
        deterministic=True
    )


def test_default_pipeline_inside_a_users_pass_manager_leaves_its_report_on_the_model():
    model = ir.load(SAMPLES / "torch_eye_chain.onnx")
    manager = ir.passes.PassManager(
        [
            default_pipeline(PipelineOptions(size_limit=4096)),
            ir.passes.common.RemoveUnusedNodesPass(),
        ]
    )
    assert manager(model).modified
    report = report_of(model)
    assert report is not None
    assert report.counts() == {"total": 1, "folded": 1, "inferred": 0, "kept": 0, "removed": 0}
    assert [n.op_type for n in model.graph] == ["MatMul"]  # the chain folded away


def test_pipeline_result_carries_each_steps_own_result():
    model = ir.load(SAMPLES / "torch_eye_chain.onnx")
    result = default_pipeline(PipelineOptions(upgrade=False))(model)
    by_step = {record.name: record.result for record in result.steps}
    assert isinstance(by_step["fold"], FoldResult)
    assert [facts.node.name for facts in by_step["fold"].folded] == ["eye"]
    assert isinstance(by_step["rules-before-fold"], RulesResult)
    assert result.report.nodes[0].action == "folded"
    assert [step.name for step in pipeline_steps(PipelineOptions(upgrade=False))] == list(
        by_step
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"size_limit": -1}, "size_limit must be a non-negative int"),
        ({"target_opset": 1}, "target_opset 1 is outside 9.."),
        ({"target_runtime": "tpu"}, "unknown target runtime 'tpu'"),
        ({"rules": ["no_such_rule"]}, "unknown rule no_such_rule"),
        ({"rules": ["matmul_float_identity"]}, "is relaxed"),
        ({"input_shapes": ["x"]}, "expected NAME:D0,D1"),
    ],
    ids=["negative-size", "opset-below-9", "runtime", "rule", "relaxed-rule", "shape-syntax"],
)
def test_options_are_checked_once_for_every_entry_point(options, message):
    with pytest.raises(EyefoldError, match=message):
        PipelineOptions(**options)
    with pytest.raises(EyefoldError, match=message):
        default_pipeline(PipelineOptions(**options))
    with pytest.raises(EyefoldError, match=message):
        eyefold.optimize(onnx.load(SAMPLES / "torch_eye_chain.onnx"), **options)


def test_library_input_shapes_do_what_the_cli_option_does():
    text = """<ir_version: 10, opset_import: ["" : 22]>
    g (float[n,n] x) => (float[n,n] y) { y = EyeLike(x) }"""
    kept = eyefold.optimize_with_report(ir.from_onnx_text(text)).report
    pinned = eyefold.optimize_with_report(ir.from_onnx_text(text), input_shapes={"x": [3, 3]})
    assert kept.counts()["folded"] == 0
    assert pinned.report.counts()["folded"] == 1
    assert pinned.report.steps[0].name == "pin-input-shapes"


@pytest.mark.parametrize(
    "shapes",
    [{"x": "34"}, {"x": ["3", 4]}, {"x": ["a b", 4]}, {"x": [True, 4]}, {"x": [3.7, 4]},
     {"x": [-1, 4]}, [("x", [3, 4])], {"": [3, 4]}],
    ids=["string-dims", "digit-string", "space", "bool", "float", "negative", "tuple",
         "empty-name"],
)  # fmt: skip
def test_library_input_shapes_are_checked_like_the_command_line(shapes):
    with pytest.raises(EyefoldError, match="input_shapes"):
        PipelineOptions(input_shapes=shapes)


def _rank3_in_branch_opset17(folder: pathlib.Path) -> ir.Model:
    """An opset-17 model whose If branch holds a rank-3 EyeLike (found after the upgrade),
    with a 16 KiB weight (left out of the snapshot) and a 64-byte one, read with ir.load."""
    from onnx import TensorProto, helper, numpy_helper

    def info(name: str, dims: list[int] | None, elem: int = TensorProto.FLOAT):
        return helper.make_tensor_value_info(name, elem, dims)

    then_branch = helper.make_graph(
        [helper.make_node("EyeLike", ["x"], ["b"], name="eye")], "then", [], [info("b", None)]
    )
    else_branch = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["e"])], "else", [], [info("e", None)]
    )
    nodes = [
        helper.make_node(
            "If",
            ["c"],
            ["y"],
            name="branchy",
            then_branch=then_branch,
            else_branch=else_branch,
        ),
        helper.make_node("Add", ["big", "big"], ["r"], name="add"),
        helper.make_node("Relu", ["small"], ["s"], name="relu"),
    ]
    big = numpy_helper.from_array(np.arange(4096, dtype=np.float32).reshape(64, 64), "big")
    small = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4), "small")
    graph = helper.make_graph(
        nodes,
        "g",
        [info("x", [2, 3, 4]), info("c", [], TensorProto.BOOL)],
        [info("y", None), info("r", [64, 64]), info("s", [4, 4])],
        [big, small],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    onnx.save(proto, folder / "m.onnx")
    return ir.load(folder / "m.onnx")


def test_library_leaves_an_ir_model_as_it_was_when_it_fails(tmp_path: pathlib.Path):
    """All or nothing: the upgrade to opset 22 ran before the EyeLike was refused, yet the
    caller's model serializes to the same bytes, its large tensor the same object."""
    model = _rank3_in_branch_opset17(tmp_path)
    before = ir.serde.serialize_model(model).SerializeToString()
    big = model.graph.initializers["big"].const_value
    with pytest.raises(EyefoldError, match="rank 3"):
        eyefold.optimize(model)
    assert ir.serde.serialize_model(model).SerializeToString() == before
    assert (model.opset_imports[""], model.ir_version) == (17, 8)
    assert model.graph.initializers["big"].const_value is big  # shared, not copied
    model.graph.initializers["small"].const_value.numpy()  # still readable


def test_library_leaves_an_ir_model_as_it_was_when_inference_finds_the_problem():
    """Without an upgrade: the inference step writes the EyeLike input's shape (rank 3)
    and the graph, out of order, is sorted, before the EyeLike is refused."""
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("EyeLike", ["r"], ["y"], name="eye"),
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    model = ir.serde.deserialize_model(proto)
    before = ir.serde.serialize_model(model).SerializeToString()
    with pytest.raises(EyefoldError, match="rank 3"):
        eyefold.optimize(model)
    assert ir.serde.serialize_model(model).SerializeToString() == before


def test_library_leaves_an_ir_model_as_it_was_when_a_fold_cannot_be_allocated():
    """Without an upgrade, a raised size limit: one EyeLike folds, then the next one's
    output (2^40 x 2^40) cannot be allocated; the caller's model is as it was."""
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("EyeLike", ["x"], ["e"], name="small"),
        helper.make_node("Add", ["x", "e"], ["y"], name="add"),
        helper.make_node("EyeLike", ["h"], ["z"], name="huge"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4]),
            helper.make_tensor_value_info("h", TensorProto.FLOAT, [1 << 40, 1 << 40]),
        ],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, [1 << 40, 1 << 40]),
        ],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    model = ir.serde.deserialize_model(proto)
    before = ir.serde.serialize_model(model).SerializeToString()
    with pytest.raises(EyefoldError, match="cannot allocate"):
        eyefold.optimize(model, size_limit=1 << 90)
    assert ir.serde.serialize_model(model).SerializeToString() == before
