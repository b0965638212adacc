"""--input-shape parsing and application (eyefold.core.input_shapes)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.reference
import onnx_ir as ir
import pytest

from eyefold import optimize_with_report
from eyefold.core.input_shapes import (
    InputShape,
    InputShapeError,
    apply_input_shapes,
    parse_input_shape,
)

DYNAMIC = """
<ir_version: 10, opset_import: ["" : 22]>
g (float[batch, 6] x, int64[n] idx) => (float[batch, 6] y) {
    eye = EyeLike <k = 1> (x)
    y = Mul(x, eye)
}
"""

CHAIN = """
<ir_version: 10, opset_import: ["" : 22]>
g (float[batch, 5] x, float[5, 5] w) => (float[batch, 5] y) {
    h = MatMul(x, w)
    eye = EyeLike(h)
    y = Add(h, eye)
}
"""


@pytest.mark.parametrize(
    ("spec", "name", "dims"),
    [
        ("x:1,3,224,224", "x", (1, 3, 224, 224)),
        ("x:batch,6", "x", ("batch", 6)),
        ("input:0:2,3", "input:0", (2, 3)),
        ("scalar:", "scalar", ()),
        ("x: 4 , 5", "x", (4, 5)),
        ("x:0,7", "x", (0, 7)),
    ],
    ids=["static", "symbolic", "colon-in-name", "scalar", "spaces", "zero-dim"],
)
def test_parse_accepts(spec: str, name: str, dims: tuple[int | str, ...]) -> None:
    parsed = parse_input_shape(spec)
    assert parsed == InputShape(name, dims)


@pytest.mark.parametrize(
    "spec",
    ["x", ":1,2", "x:1,-2", "x:1,,2", "x:1.5", "x:2x3", "x:a-b"],
    ids=["no-colon", "no-name", "negative", "empty-dim", "float", "junk", "bad-symbol"],
)
def test_parse_rejects(spec: str) -> None:
    with pytest.raises(InputShapeError, match="input_shapes"):
        parse_input_shape(spec)


def test_apply_pins_symbolic_dims_and_reports_changes() -> None:
    model = ir.from_onnx_text(DYNAMIC)
    changed = apply_input_shapes(
        model, [parse_input_shape("x:3,6"), parse_input_shape("idx:n")]
    )
    assert changed == ["x"]  # idx already was [n]
    assert model.graph.inputs[0].shape == ir.Shape([3, 6])
    assert model.graph.inputs[1].shape == ir.Shape(["n"])


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        (["y:3,6"], "no graph input 'y'"),
        (["x:3"], "rank 2"),
        (["x:3,6,1"], "rank 2"),
        (["x:3,7"], "dim 1 of input 'x' is 6"),
        (["x:3,6", "x:4,6"], "given twice"),
    ],
    ids=["unknown-name", "rank-too-low", "rank-too-high", "static-conflict", "repeated"],
)
def test_apply_rejects(specs: list[str], message: str) -> None:
    model = ir.from_onnx_text(DYNAMIC)
    before = [str(v.shape) for v in model.graph.inputs]
    with pytest.raises(InputShapeError, match=message):
        apply_input_shapes(model, [parse_input_shape(s) for s in specs])
    # A rejected option leaves the first (valid) pins at most; never a half-set shape.
    assert [len(v.shape) for v in model.graph.inputs] == [len(s.split(",")) for s in before]


def test_apply_rejects_initializer_input() -> None:
    model = ir.from_onnx_text(
        """
        <ir_version: 10, opset_import: ["" : 22]>
        g (float[2, 2] x, float[2, 2] w) => (float[2, 2] y) <float[2, 2] w = {1, 2, 3, 4}> {
            y = Add(x, w)
        }
        """
    )
    with pytest.raises(InputShapeError, match="initializer"):
        apply_input_shapes(model, [parse_input_shape("w:2,2")])


@pytest.mark.parametrize("text", [DYNAMIC, CHAIN], ids=["direct-input", "matmul-chain"])
def test_pinned_shape_folds_dynamic_eyelike(text: str) -> None:
    unpinned = optimize_with_report(ir.from_onnx_text(text)).report
    assert [n.action for n in unpinned.nodes] == ["inferred"]

    model = ir.from_onnx_text(text)
    apply_input_shapes(model, [parse_input_shape("x:3,6" if "6" in text else "x:3,5")])
    report = optimize_with_report(model).report
    assert [n.action for n in report.nodes] == ["folded"]
    assert not any(node.op_type == "EyeLike" for node in model.graph)
    # The pinned model computes what the original computes for inputs of that shape.
    original = onnx.reference.ReferenceEvaluator(ir.to_proto(ir.from_onnx_text(text)))
    pinned = onnx.reference.ReferenceEvaluator(ir.to_proto(model))
    rng = np.random.default_rng(0)
    feeds = {
        v.name: rng.standard_normal([d if isinstance(d, int) else 3 for d in v.shape]).astype(
            np.float32
        )
        if v.dtype == ir.DataType.FLOAT
        else np.zeros([2], np.int64)
        for v in model.graph.inputs
    }
    np.testing.assert_array_equal(pinned.run(None, feeds)[0], original.run(None, feeds)[0])
