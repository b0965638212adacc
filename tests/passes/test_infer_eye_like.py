"""InferEyeLikeOutputsPass: exact output types and shapes for the EyeLike nodes that stay."""

from __future__ import annotations

import onnx_ir as ir
import pytest

import eyefold
from eyefold.errors import InvalidModelError
from eyefold.passes import InferEyeLikeOutputsPass, InferOutputsResult
from eyefold.testing import check_model_safely


def _infer(text: str) -> tuple[ir.Model, InferOutputsResult]:
    model = ir.from_onnx_text(text)
    result = InferEyeLikeOutputsPass()(model)
    assert (
        result.modified == any(f.action != "kept" for f in result.facts) or not result.modified
    )
    return model, result


def _eye_output(model: ir.Model) -> ir.Value:
    return next(n for n in model.graph if n.op_type == "EyeLike").outputs[0]


def test_symbolic_dims_are_kept_and_dtype_attribute_wins():
    model, infer = _infer("""<ir_version: 10, opset_import: ["" : 22]>
    g (float[N,M] x) => (float[N,M] y) {
        eye = EyeLike<dtype=7>(x)
        y = Cast<to=1>(eye)
    }""")
    output = _eye_output(model)
    assert output.dtype == ir.DataType.INT64
    assert [str(d) for d in output.shape.dims] == ["N", "M"]
    assert [f.action for f in infer.facts] == ["inferred"]
    check_model_safely(model)


def test_unknown_input_shape_still_gives_rank_two():
    model = eyefold.optimize(
        ir.from_onnx_text("""<ir_version: 10, opset_import: ["" : 22]>
    g (float[N] n) => (y) {
        s = Shape(n)
        c = Concat<axis=0>(s, s)
        z = ConstantOfShape(c)
        eye = EyeLike(z)
        y = Identity(eye)
    }""")
    )
    output = _eye_output(model)
    assert output.dtype == ir.DataType.FLOAT
    assert output.shape is not None and len(output.shape) == 2


def test_untyped_input_without_dtype_is_kept_without_a_guess():
    model, infer = _infer("""<ir_version: 10, opset_import: ["" : 22, "custom" : 1]>
    g (float[2,2] x) => (y) {
        t = custom.Foo(x)
        eye = EyeLike(t)
        y = Identity(eye)
    }""")
    assert _eye_output(model).type is None  # never invents dtype=FLOAT
    assert [f.action for f in infer.facts] == ["kept"]


def test_declared_output_type_that_contradicts_is_an_error():
    expected = r"declared int32\[2,2\], but EyeLike .* produces float"
    with pytest.raises(InvalidModelError, match=expected):
        _infer("""<ir_version: 10, opset_import: ["" : 22]>
        g (float[2,2] x) => (int32[2,2] eye) {
            eye = EyeLike(x)
        }""")


def test_declared_output_rank_three_is_an_error():
    with pytest.raises(InvalidModelError, match="rank 3"):
        _infer("""<ir_version: 10, opset_import: ["" : 22]>
        g (float[2,2] x) => (float[2,2,1] eye) {
            eye = EyeLike(x)
        }""")


def test_declared_dims_are_refined_not_replaced():
    model, _ = _infer("""<ir_version: 10, opset_import: ["" : 22]>
    g (float[N,3] x) => (float[B,3] eye) {
        eye = EyeLike(x)
    }""")
    assert [str(d) for d in _eye_output(model).shape.dims] == ["B", "3"]
