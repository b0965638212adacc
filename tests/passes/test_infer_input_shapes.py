"""InferEyeLikeInputShapesPass: static shapes learned through chains, and only when needed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import onnx.reference
import onnx_ir as ir
import pytest

import eyefold
from eyefold.passes import InferEyeLikeInputShapesPass
from eyefold.testing import assert_same_outputs, check_model_safely, count_ops


@pytest.fixture
def inference_calls(monkeypatch) -> list[onnx.ModelProto]:
    """Records every model handed to onnx's shape inference (which still runs)."""
    calls: list[onnx.ModelProto] = []
    real = onnx.shape_inference.infer_shapes

    def recording(model, *args, **kwargs):
        calls.append(model)
        return real(model, *args, **kwargs)

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", recording)
    return calls


CHAINS = {
    "torch-eye-chain": """
        s = Shape(x)
        i = Constant<value=int64 {1}>()
        d = Gather<axis=0>(s, i)
        a = Constant<value=int64[1] {0}>()
        u = Unsqueeze(d, a)
        c = Concat<axis=0>(u, u)
        z = ConstantOfShape(c)
        eye = EyeLike(z)
    """,
    "matmul": """
        m = MatMul(x, w)
        eye = EyeLike(m)
    """,
    "reshape": """
        t = Constant<value=int64[2] {2, 12}>()
        r = Reshape(x, t)
        eye = EyeLike(r)
    """,
    "transpose": """
        p = Transpose<perm=[1, 0]>(x)
        eye = EyeLike(p)
    """,
}


@pytest.mark.parametrize("body", list(CHAINS.values()), ids=list(CHAINS))
def test_chain_gets_a_static_shape_and_folds(body: str, inference_calls):
    text = f"""<ir_version: 10, opset_import: ["" : 22]>
    g (float[4,6] x, float[6,6] w) => (float[eye_rows, eye_cols] eye) {{ {body} }}"""
    original = ir.from_onnx_text(text)
    model = ir.from_onnx_text(text)
    result = eyefold.optimize_with_report(model)
    assert len(inference_calls) == 1
    assert [n.action for n in result.report.nodes] == ["folded"]
    assert count_ops(model, "EyeLike") == 0
    assert len(model.graph) == 0  # the chain fed only the EyeLike
    check_model_safely(model)
    feeds = {
        "x": np.arange(24, dtype=np.float32).reshape(4, 6),
        "w": np.ones((6, 6), np.float32),
    }
    assert assert_same_outputs(original, model, feeds) == ["reference", "onnxruntime"]


def test_static_inputs_skip_inference_entirely(inference_calls):
    model = ir.from_onnx_text("""<ir_version: 10, opset_import: ["" : 22]>
    g (float[4,6] x) => (float[4,6] y) {
        eye = EyeLike(x)
        y = Add(x, eye)
    }""")
    result = InferEyeLikeInputShapesPass()(model)
    assert not result.modified
    assert inference_calls == []


def test_dynamic_chain_stays_dynamic_with_its_symbol():
    model = ir.from_onnx_text("""<ir_version: 10, opset_import: ["" : 22]>
    g (float[N,6] x, float[6,6] w) => (float[N,6] y) {
        m = MatMul(x, w)
        eye = EyeLike(m)
        y = Add(m, eye)
    }""")
    result = eyefold.optimize_with_report(model)
    assert [n.action for n in result.report.nodes] == ["inferred"]
    eye = next(node for node in model.graph if node.op_type == "EyeLike")
    assert [str(d) for d in eye.outputs[0].shape.dims] == ["N", "6"]


def test_only_the_backward_slice_is_serialized_and_weights_stay_behind(inference_calls):
    weight = ir.Value(
        name="w", shape=ir.Shape([256, 256]), type=ir.TensorType(ir.DataType.FLOAT)
    )
    weight.const_value = ir.tensor(np.ones((256, 256), np.float32), name="w")
    model = ir.from_onnx_text("""<ir_version: 10, opset_import: ["" : 22]>
    g (float[4,256] x, float[4,4] unrelated) => (float[4,4] y, float[4,4] other) {
        other = Relu(unrelated)
        m = MatMul(x, w)
        t = Transpose<perm=[1, 0]>(m)
        s = MatMul(m, t)
        eye = EyeLike(s)
        y = Add(s, eye)
    }""")
    model.graph.register_initializer(weight)
    for node in model.graph:
        if node.op_type == "MatMul" and node.inputs[1].name == "w":
            node.replace_input_with(1, weight)
    InferEyeLikeInputShapesPass()(model)
    (sliced,) = inference_calls
    assert sorted(n.op_type for n in sliced.graph.node) == ["MatMul", "MatMul", "Transpose"]
    assert [i.name for i in sliced.graph.initializer] == []
    assert "w" in [i.name for i in sliced.graph.input]
    eye = next(node for node in model.graph if node.op_type == "EyeLike")
    assert eye.inputs[0].shape == ir.Shape([4, 4])


def test_eyelike_in_if_branch_learns_from_outer_chain():
    text = """<ir_version: 10, opset_import: ["" : 22]>
    g (bool c, float[3,5] x) => (float[5,5] y) {
        t = Transpose<perm=[1, 0]>(x)
        m = MatMul(t, x)
        y = If(c) <
            then_branch = a () => (float[5,5] o1) { e = EyeLike(m)
                                                    o1 = Add(m, e) },
            else_branch = b () => (float[5,5] o2) { o2 = Identity(m) }
        >
    }"""
    original, model = ir.from_onnx_text(text), ir.from_onnx_text(text)
    result = eyefold.optimize_with_report(model)
    assert [n.action for n in result.report.nodes] == ["folded"]
    for cond in (True, False):
        feeds = {"c": np.array(cond), "x": np.arange(15, dtype=np.float32).reshape(3, 5)}
        assert_same_outputs(original, model, feeds)


CUSTOM_OP_MODEL = """<ir_version: 10, opset_import: ["" : 22, "custom" : 1]>
g (float[3,4] x) => (y) {
    t = custom.Foo(x)
    y = EyeLike<dtype=1>(t)
}"""


@pytest.mark.slow
def test_eyelike_with_dtype_on_untyped_input_does_not_crash():
    """onnx's own inference kills the process on this model; eyefold must not."""
    script = textwrap.dedent("""
        import sys, onnx_ir as ir, eyefold
        result = eyefold.optimize_with_report(ir.from_onnx_text(sys.argv[1]))
        node = result.report.nodes[0]
        print(node.action, node.dtype)
    """)
    done = subprocess.run(
        [sys.executable, "-c", script, CUSTOM_OP_MODEL],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["inferred", "FLOAT"]


def test_onnx_really_crashes_on_that_model():
    """The hazard the workaround exists for; if onnx fixes it, this test says so."""
    script = textwrap.dedent("""
        import sys, onnx, onnx_ir as ir
        proto = ir.to_proto(ir.from_onnx_text(sys.argv[1]))
        onnx.shape_inference.infer_shapes(proto, data_prop=True)
    """)
    done = subprocess.run(
        [sys.executable, "-c", script, CUSTOM_OP_MODEL], capture_output=True, timeout=120
    )
    assert done.returncode < 0, "onnx no longer crashes; the workaround may be dropped"


def _rotary_mask_model(rows_source: str) -> onnx.ModelProto:
    """A MossFormer block's mask: a 1 MiB rotary table [8192, 32] (a Constant, as the
    exporter writes it) sized by the input, then ``torch.eye(n, dtype=bool)`` from its shape.

    ``rows_source``: "slice" cuts the table to the sequence length before the Shape;
    "table" reads the table's own dim 1.
    """
    helper = onnx.helper
    table = onnx.numpy_helper.from_array(
        np.arange(8192 * 32, dtype=np.float32).reshape(8192, 32), "table"
    )

    def const(name: str, value: object) -> onnx.NodeProto:
        tensor = onnx.numpy_helper.from_array(np.array(value, np.int64), name)
        return helper.make_node("Constant", [], [name], value=tensor)

    if rows_source == "slice":
        chain = [
            helper.make_node("Shape", ["x"], ["x_shape"]),
            const("one", 1),
            helper.make_node("Gather", ["x_shape", "one"], ["seq"]),
            const("axes", [0]),
            helper.make_node("Unsqueeze", ["seq", "axes"], ["seq1"]),
            helper.make_node("Slice", ["rotary", "axes", "seq1", "axes"], ["part"]),
            helper.make_node("Shape", ["part"], ["part_shape"]),
            const("at", [0]),
        ]
    else:
        chain = [helper.make_node("Shape", ["rotary"], ["part_shape"]), const("at", [1])]
    nodes = [
        helper.make_node(
            "Constant", [], ["rotary"], value=table, name="/intra_mossformer/Constant_27"
        ),
        *chain,
        helper.make_node("Gather", ["part_shape", "at"], ["rows"]),
        helper.make_node("Concat", ["rows", "rows"], ["dims"], axis=0),
        helper.make_node("ConstantOfShape", ["dims"], ["zeros"]),
        helper.make_node(
            "EyeLike", ["zeros"], ["eye"], name="eye", dtype=onnx.TensorProto.BOOL
        ),
        helper.make_node("Not", ["eye"], ["mask"]),
    ]
    graph = helper.make_graph(
        nodes,
        "rotary_mask",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 100, 64])],
        [helper.make_tensor_value_info("mask", onnx.TensorProto.BOOL, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize(("rows_source", "size"), [("slice", 100), ("table", 32)])
def test_a_large_constant_keeps_its_shape_on_the_file_path(
    tmp_path, rows_source: str, size: int
):
    from eyefold.cli.main import main

    source, output, report = tmp_path / "m.onnx", tmp_path / "o.onnx", tmp_path / "r.json"
    onnx.save(_rotary_mask_model(rows_source), source)
    args = ["optimize", str(source), str(output), "-q", "--report", str(report)]
    assert main(args) == 0
    node = json.loads(report.read_text())["nodes"][0]
    assert node["action"] == "folded", node
    assert count_ops(onnx.load(output), "EyeLike") == 0
    feeds = {"x": np.zeros((1, 100, 64), np.float32)}
    assert_same_outputs(onnx.load(source), onnx.load(output), feeds)
    mask = onnx.reference.ReferenceEvaluator(onnx.load(output)).run(None, feeds)[0]
    assert mask.shape == (size, size)


@pytest.mark.parametrize("rows_source", ["slice", "table"])
def test_a_large_constant_keeps_its_shape_in_the_library(rows_source: str):
    model = ir.serde.deserialize_model(_rotary_mask_model(rows_source))
    result = eyefold.optimize_with_report(model)
    assert [n.action for n in result.report.nodes] == ["folded"]
    assert count_ops(model, "EyeLike") == 0
