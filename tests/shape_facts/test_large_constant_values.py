"""A shape chain that reads a few elements of a large tensor gets their values.

The models are built as TorchScript exports them (symbolic_opset9/13): a tensor the
module holds becomes a Constant node (or, from a parameter or buffer, an initializer),
``table[i]`` a Gather at a Constant index, ``table[a:b]`` a Slice with Constant bounds,
and ``torch.eye(n)`` the Unsqueeze/Concat/ConstantOfShape/EyeLike chain of symbolic_opset9's
``eye``. Each table is over 1 MiB, so the weightless slice onnx's inference is handed
declares it as a typed input: only the elements picked are read.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnx.reference
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper, numpy_helper

import eyefold
from eyefold.cli.main import main
from eyefold.core.limits import WEIGHTLESS_TENSOR_LIMIT_BYTES

ROWS = 131_072  # 131072 x 2 int64: 2 MiB


def _const(name: str, value: object) -> onnx.NodeProto:
    tensor = numpy_helper.from_array(np.array(value, np.int64), name)
    return helper.make_node("Constant", [], [name], value=tensor)


def _table() -> np.ndarray:
    """Small positive sizes, different at every position (a wrong read shows)."""
    return (np.arange(ROWS * 2, dtype=np.int64) % 7 + 2).reshape(ROWS, 2)


def _model(read: str, held: str) -> onnx.ModelProto:
    """``torch.eye`` sized from ``table``, added to ``x``.

    ``read``: ``row`` (``table[1000]``, a Gather of a row: an n x m eye), ``element``
    (``table.flatten()[2001]``, a Gather of one element: n x n), ``slice``
    (``table.flatten()[2001:2003]``, a Slice); ``held``: ``constant`` (a Constant node)
    or ``initializer``.
    """
    table = _table()
    flat = read != "row"
    data = table.reshape(-1) if flat else table
    tensor = numpy_helper.from_array(data, "table")
    assert tensor.ByteSize() > WEIGHTLESS_TENSOR_LIMIT_BYTES
    nodes, initializers = [], []
    if held == "constant":
        nodes.append(helper.make_node("Constant", [], ["table"], value=tensor))
    else:
        initializers.append(tensor)
    if read == "row":
        nodes += [
            _const("index", 1000),
            helper.make_node("Gather", ["table", "index"], ["size"], axis=0),
        ]
    elif read == "element":
        nodes += [
            _const("index", 2001),
            helper.make_node("Gather", ["table", "index"], ["n"], axis=0),
            _const("axes", [0]),
            helper.make_node("Unsqueeze", ["n", "axes"], ["n_1"]),
            helper.make_node("Concat", ["n_1", "n_1"], ["size"], axis=0),
        ]
    else:
        nodes += [
            _const("starts", [2001]),
            _const("ends", [2003]),
            _const("axes", [0]),
            helper.make_node("Slice", ["table", "starts", "ends", "axes"], ["size"]),
        ]
    nodes += [
        helper.make_node("ConstantOfShape", ["size"], ["zeros"]),
        helper.make_node("EyeLike", ["zeros"], ["eye"], name="eye", dtype=TensorProto.FLOAT),
        helper.make_node("Add", ["x", "eye"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "table_eye",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, None])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _expected_shape(read: str) -> list[int]:
    flat = _table().reshape(-1)
    if read == "row":
        return [int(v) for v in _table()[1000]]
    if read == "element":
        return [int(flat[2001])] * 2
    return [int(v) for v in flat[2001:2003]]


CASES = [
    (read, held)
    for read in ("row", "element", "slice")
    for held in ("constant", "initializer")
]


@pytest.mark.parametrize(("read", "held"), CASES)
def test_a_shape_read_from_a_large_tensor_folds_on_the_command_line(tmp_path, read, held):
    source, output, report = tmp_path / "m.onnx", tmp_path / "o.onnx", tmp_path / "r.json"
    onnx.save(_model(read, held), source)
    assert main(["optimize", str(source), str(output), "-q", "--report", str(report)]) == 0
    (node,) = json.loads(report.read_text())["nodes"]
    shape = _expected_shape(read)
    assert shape[0] != shape[1] or read == "element"  # the two reads differ
    assert (node["action"], node["shape"]) == ("folded", shape), node
    assert not any(n.op_type == "EyeLike" for n in onnx.load(output).graph.node)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    (want,) = onnx.reference.ReferenceEvaluator(str(source)).run(None, {"x": x})
    (got,) = onnx.reference.ReferenceEvaluator(str(output)).run(None, {"x": x})
    assert (got.dtype, got.shape, got.tobytes()) == (want.dtype, want.shape, want.tobytes())


@pytest.mark.parametrize(("read", "held"), CASES)
def test_a_shape_read_from_a_large_tensor_folds_in_the_library(read, held):
    model = ir.serde.deserialize_model(_model(read, held))
    result = eyefold.optimize_with_report(model)
    (node,) = result.report.nodes
    assert (node.action, node.shape) == ("folded", _expected_shape(read))


def test_a_shape_read_from_external_data_folds(tmp_path):
    # The table in a data file next to the model: read through a memory map, in place.
    model = _model("slice", "initializer")
    source, output = tmp_path / "m.onnx", tmp_path / "o.onnx"
    onnx.save(model, source, save_as_external_data=True, location="m.data")
    report = tmp_path / "r.json"
    assert main(["optimize", str(source), str(output), "-q", "--report", str(report)]) == 0
    (node,) = json.loads(report.read_text())["nodes"]
    assert (node["action"], node["shape"]) == ("folded", _expected_shape("slice"))
    loaded = ir.load(str(source))
    assert eyefold.optimize_with_report(loaded).report.nodes[0].action == "folded"


def test_an_index_out_of_the_table_stays_unknown(tmp_path):
    # Gather past the end fails at run time: nothing is read, nothing folded.
    model = _model("element", "constant")
    for node in model.graph.node:
        if node.output[0] == "index":
            node.attribute[0].t.CopyFrom(numpy_helper.from_array(np.array(ROWS * 2, np.int64)))
    result = eyefold.optimize_with_report(ir.serde.deserialize_model(model))
    assert result.report.nodes[0].action != "folded"


def test_the_shape_of_a_large_tensor_is_still_its_dims(tmp_path):
    # ``torch.eye(table.shape[0] // 65536)``: onnx's inference does not propagate Div, so
    # eyefold computes the chain, the Shape from the table's dims (no element read).
    nodes = [
        helper.make_node(
            "Constant", [], ["table"], value=numpy_helper.from_array(_table(), "table")
        ),
        helper.make_node("Shape", ["table"], ["dims"]),
        _const("first", 0),
        helper.make_node("Gather", ["dims", "first"], ["rows"], axis=0),
        _const("block", 65536),
        helper.make_node("Div", ["rows", "block"], ["n"]),
        _const("axes", [0]),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n_1"]),
        helper.make_node("Concat", ["n_1", "n_1"], ["size"], axis=0),
        helper.make_node("ConstantOfShape", ["size"], ["zeros"]),
        helper.make_node("EyeLike", ["zeros"], ["eye"], name="eye", dtype=TensorProto.FLOAT),
        helper.make_node("Add", ["x", "eye"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "table_shape_eye",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, None])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    source, output, report = tmp_path / "m.onnx", tmp_path / "o.onnx", tmp_path / "r.json"
    onnx.save(model, source)
    assert main(["optimize", str(source), str(output), "-q", "--report", str(report)]) == 0
    (node,) = json.loads(report.read_text())["nodes"]
    assert (node["action"], node["shape"]) == ("folded", [ROWS // 65536] * 2), node
