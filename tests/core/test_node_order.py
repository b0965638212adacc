"""Graphs out of topological order are sorted first, on both paths; cycles stay invalid."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.reference
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

import eyefold
from eyefold.cli import main
from eyefold.core.node_order import sort_unsorted_graphs
from eyefold.errors import InvalidModelError
from eyefold.proto_path.node_order import graph_is_sorted, sort_model_graphs


def _unsorted_model() -> onnx.ModelProto:
    """``y = EyeLike(x) + Relu(x)`` with the graph input's Cast last, as ORT's fp16
    converter writes it (a node list in which readers come before their producer)."""
    nodes = [
        helper.make_node("EyeLike", ["xc"], ["e"], name="eye"),
        helper.make_node("Relu", ["xc"], ["r"], name="relu"),
        helper.make_node("Add", ["e", "r"], ["y"], name="add"),
        helper.make_node("Cast", ["x"], ["xc"], name="graph_input_cast_0", to=1),
    ]
    graph = helper.make_graph(
        nodes,
        "unsorted",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)


def _outputs(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    return onnx.reference.ReferenceEvaluator(model).run(None, {"x": x})[0]


def test_the_proto_sort_is_stable_and_leaves_sorted_graphs_alone() -> None:
    model = _unsorted_model()
    assert not graph_is_sorted(model.graph)
    assert sort_model_graphs(model) == ["main"]
    assert [n.name for n in model.graph.node] == ["graph_input_cast_0", "eye", "relu", "add"]
    onnx.checker.check_model(model, full_check=True)
    before = model.SerializeToString()
    assert sort_model_graphs(model) == []
    assert model.SerializeToString() == before


def test_a_cycle_is_left_for_the_checker_to_name() -> None:
    nodes = [
        helper.make_node("Relu", ["b"], ["a"], name="first"),
        helper.make_node("Relu", ["a"], ["b"], name="second"),
    ]
    graph = helper.make_graph(
        nodes, "cycle", [], [helper.make_tensor_value_info("b", TensorProto.FLOAT, [2])]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    before = model.SerializeToString()
    assert sort_model_graphs(model) == []
    assert model.SerializeToString() == before


def test_an_unsorted_subgraph_is_sorted_with_its_path() -> None:
    branch = helper.make_graph(
        [
            helper.make_node("Neg", ["t"], ["out"], name="neg"),
            helper.make_node("Relu", ["x"], ["t"], name="relu"),
        ],
        "then",
        [],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [3, 3])],
    )
    other = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["out2"], name="same")],
        "else",
        [],
        [helper.make_tensor_value_info("out2", TensorProto.FLOAT, [3, 3])],
    )
    holder = helper.make_node(
        "If", ["c"], ["y"], name="if", then_branch=branch, else_branch=other
    )
    graph = helper.make_graph(
        [holder],
        "with_if",
        [
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    assert sort_model_graphs(model) == ["main/if.then_branch"]
    onnx.checker.check_model(model, full_check=True)


def test_optimize_sorts_an_unsorted_file_and_says_so(tmp_path, capsys) -> None:
    source = tmp_path / "unsorted.onnx"
    onnx.save(_unsorted_model(), source)
    output = tmp_path / "out.onnx"
    report_path = tmp_path / "report.json"
    assert main(["optimize", str(source), str(output), "--report", str(report_path)]) == 0
    shown = capsys.readouterr().out
    assert "note: graph main was not in topological order" in shown
    written = onnx.load(output)
    onnx.checker.check_model(written, full_check=True)
    assert '"sorted": [\n    "main"\n  ]' in report_path.read_text()
    assert '"folded": 1' in report_path.read_text()
    x = np.arange(9, dtype=np.float32).reshape(3, 3) - 4
    expected = _outputs(sort_model_graphs_copy(_unsorted_model()), x)
    np.testing.assert_array_equal(_outputs(written, x), expected)
    assert main(["inspect", str(source)]) == 0
    assert "note: graph main was not in topological order" in capsys.readouterr().out


def sort_model_graphs_copy(model: onnx.ModelProto) -> onnx.ModelProto:
    sort_model_graphs(model)
    return model


def test_the_library_sorts_an_unsorted_onnx_ir_model() -> None:
    model = ir.serde.deserialize_model(_unsorted_model())
    result = eyefold.optimize_with_report(model)
    assert result.report.extra["sorted"] == ["main"]
    assert result.report.counts()["folded"] == 1
    assert result.report.steps[0].name == "sort"
    assert sort_unsorted_graphs(model) == []


def test_sorted_models_get_no_sort_step() -> None:
    model = sort_model_graphs_copy(_unsorted_model())
    result = eyefold.optimize_with_report(model)
    assert "sorted" not in result.report.extra
    assert all(step.name != "sort" for step in result.report.steps)


def test_the_checkers_message_is_kept_whole_on_one_line(tmp_path, capsys) -> None:
    # Relu has no alpha attribute: onnx's checker names the attribute,
    # then, after a line break, the node. Both are in the one line eyefold prints.
    nodes = [
        helper.make_node("Relu", ["x"], ["u"], name="relu", alpha=0.5),
        helper.make_node("EyeLike", ["x"], ["y"], name="eye"),
    ]
    graph = helper.make_graph(
        nodes,
        "bad_attribute",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [
            helper.make_tensor_value_info("u", TensorProto.FLOAT, [2, 2]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)
    source = tmp_path / "bad.onnx"
    onnx.save(model, source)
    assert main(["optimize", str(source), str(tmp_path / "out.onnx")]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("eyefold: error: ")
    assert "Unrecognized attribute: alpha" in error and "Name: relu" in error
    assert not (tmp_path / "out.onnx").exists()


def _two_orders_model() -> onnx.ModelProto:
    """A graph that two stable sorts order differently: placing the earliest ready node
    first gives Neg, Cast, Relu, Add; placing from the end gives Cast, Relu, Neg, Add."""
    nodes = [
        helper.make_node("Relu", ["xc"], ["a"], name="relu"),
        helper.make_node("Neg", ["x"], ["b"], name="neg"),
        helper.make_node("Cast", ["x"], ["xc"], name="cast", to=1),
        helper.make_node("Add", ["a", "b"], ["y"], name="add"),
    ]
    graph = helper.make_graph(
        nodes,
        "two_orders",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)


def test_the_file_path_and_an_onnx_ir_model_get_the_same_order(tmp_path) -> None:
    source = tmp_path / "unsorted.onnx"
    onnx.save(_two_orders_model(), source)
    output = tmp_path / "out.onnx"
    assert main(["optimize", str(source), str(output), "-q"]) == 0
    from_file = [n.name for n in onnx.load(output).graph.node]
    model = ir.serde.deserialize_model(_two_orders_model())
    result = eyefold.optimize_with_report(model)
    assert result.report.extra["sorted"] == ["main"]
    from_library = [n.name for n in result.model.graph]
    assert from_file == from_library == ["neg", "cast", "relu", "add"]


def _cycle_model() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Relu", ["b"], ["a"], name="first"),
        helper.make_node("Relu", ["a"], ["b"], name="second"),
        helper.make_node("EyeLike", ["x"], ["y"], name="eye"),
    ]
    graph = helper.make_graph(
        nodes,
        "cycle",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2]),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("as_ir", [False, True], ids=["proto", "onnx_ir"])
def test_the_library_calls_a_cycle_an_invalid_model(as_ir: bool) -> None:
    # The sort leaves a cycle alone; the checks that follow refuse the model as invalid
    # (not with the sort's own ValueError).
    model = ir.serde.deserialize_model(_cycle_model()) if as_ir else _cycle_model()
    with pytest.raises(InvalidModelError, match="topologically sorted"):
        eyefold.optimize(model)
