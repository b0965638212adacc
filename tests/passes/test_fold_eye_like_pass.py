"""FoldEyeLikePass: what folds, what stays, and that folded models keep their meaning."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

import eyefold
from eyefold.core.eyelike_types import EYELIKE_TYPES_OPSET_22
from eyefold.errors import InvalidModelError, UnsupportedDtypeError
from eyefold.passes import FoldEyeLikePass, FoldResult, InferEyeLikeInputShapesPass
from eyefold.testing import assert_same_outputs, check_model_safely, count_ops


def _model(text: str) -> ir.Model:
    return ir.from_onnx_text(text)


def _fold(model: ir.Model, **options) -> FoldResult:
    """Runs the fold pass after the input-shape inference it relies on in the pipeline."""
    InferEyeLikeInputShapesPass()(model)
    result = FoldEyeLikePass(**options)(model)
    assert result.modified == bool(result.folded)
    return result


def test_static_input_folds_into_initializer_of_the_same_name():
    text = """<ir_version: 10, opset_import: ["" : 22]>
    g (float[3,5] x) => (float[3,5] y) {
        eye = EyeLike<k=1>(x)
        y = Add(x, eye)
    }"""
    original = _model(text)
    model = _model(text)
    result = _fold(model)
    assert len(result.folded) == 1
    assert count_ops(model, "EyeLike") == 0
    initializer = model.graph.initializers["eye"]
    np.testing.assert_array_equal(initializer.const_value.numpy(), np.eye(3, 5, 1, np.float32))
    check_model_safely(model)
    assert assert_same_outputs(original, model) == ["reference", "onnxruntime"]


def test_dynamic_dim_does_not_fold():
    text = """<ir_version: 10, opset_import: ["" : 22]>
    g (float[N,5] x) => (float[N,5] y) {
        eye = EyeLike(x)
        y = Add(x, eye)
    }"""
    model = _model(text)
    result = _fold(model)
    assert result.folded == []
    assert count_ops(model, "EyeLike") == 1
    assert len(model.graph.initializers) == 0


@pytest.mark.parametrize(
    "data_type",
    [pytest.param(t, id=t.name) for t in sorted(EYELIKE_TYPES_OPSET_22, key=int)],
)
def test_every_type_folds_bit_exact(data_type: ir.DataType):
    text = f"""<ir_version: 10, opset_import: ["" : 22]>
    g (float[4,3] x) => ({data_type.name.lower()}[4,3] y) {{
        y = EyeLike<dtype={int(data_type)}, k=-1>(x)
    }}"""
    original = _model(text)
    model = _model(text)
    _fold(model)
    assert count_ops(model, "EyeLike") == 0
    check_model_safely(model)
    assert_same_outputs(original, model)


def test_graph_output_keeps_its_name():
    text = """<ir_version: 10, opset_import: ["" : 22]>
    g (int64[2,2] x) => (int64[2,2] eye) {
        eye = EyeLike(x)
    }"""
    original, model = _model(text), _model(text)
    _fold(model)
    assert [v.name for v in model.graph.outputs] == ["eye"]
    assert model.graph.outputs[0].is_initializer()
    check_model_safely(model)
    assert assert_same_outputs(original, model) == ["reference", "onnxruntime"]


@pytest.mark.parametrize(
    ("limit", "folds"),
    [pytest.param(64, True, id="at-limit"), pytest.param(63, False, id="below")],
)
def test_size_limit_each_side(limit: int, folds: bool):
    text = """<ir_version: 10, opset_import: ["" : 22]>
    g (float[4,4] x) => (float[4,4] y) {
        eye = EyeLike(x)
        y = Mul(x, eye)
    }"""
    model = _model(text)
    result = _fold(model, size_limit_bytes=limit)
    assert bool(result.folded) is folds
    assert count_ops(model, "EyeLike") == (0 if folds else 1)


def test_rank_three_input_is_an_error_naming_the_node():
    model = _model("""<ir_version: 10, opset_import: ["" : 22]>
    g (float[2,3,4] x) => (float[2,3,4] y) {
        y = EyeLike(x)
    }""")
    model.graph.node(0).name = "my_eye"
    with pytest.raises(InvalidModelError, match=r"my_eye.*rank 3"):
        _fold(model)


def test_two_inputs_is_an_error():
    model = _model("""<ir_version: 10, opset_import: ["" : 22]>
    g (float[2,2] x) => (float[2,2] y) {
        y = EyeLike(x, x)
    }""")
    with pytest.raises(InvalidModelError, match="2 inputs"):
        _fold(model)


@pytest.mark.parametrize(
    ("dtype", "opset", "message"),
    [
        pytest.param(8, 22, "STRING", id="string"),
        pytest.param(14, 22, "COMPLEX64", id="complex64"),
        pytest.param(17, 22, "FLOAT8E4M3FN", id="float8"),
        pytest.param(999, 22, "999", id="unknown-code"),
        pytest.param(16, 21, "needs EyeLike-22", id="bfloat16-at-opset-21"),
    ],
)
def test_invalid_dtype_attribute_is_an_error(dtype: int, opset: int, message: str):
    model = _model(f"""<ir_version: 10, opset_import: ["" : {opset}]>
    g (float[2,2] x) => (y) {{
        y = EyeLike<dtype={dtype}>(x)
    }}""")
    with pytest.raises(UnsupportedDtypeError, match=message):
        _fold(model)


def test_bfloat16_at_opset_22_is_valid():
    model = _model("""<ir_version: 10, opset_import: ["" : 22]>
    g (float[2,2] x) => (y) {
        y = EyeLike<dtype=16>(x)
    }""")
    assert len(_fold(model).folded) == 1


def test_constant_of_shape_chain_is_removed_but_graph_inputs_stay():
    text = """<ir_version: 10, opset_import: ["" : 22]>
    g (float[2,3] x) => (float[3,3] y) {
        shape = Constant<value=int64[2] {3, 3}>()
        zeros = ConstantOfShape(shape)
        eye = EyeLike(zeros)
        y = Identity(eye)
    }"""
    original, model = _model(text), _model(text)
    _fold(model)
    assert [n.op_type for n in model.graph] == ["Identity"]
    assert [v.name for v in model.graph.inputs] == ["x"]
    assert assert_same_outputs(original, model)


def test_zeros_initializer_that_only_fed_eyelike_is_dropped():
    zeros = ir.tensor(np.zeros((64, 64), np.float32), name="zeros")
    model = _model("""<ir_version: 10, opset_import: ["" : 22]>
    g (float[64,64] x) => (float[64,64] y) {
        eye = EyeLike(zeros)
        y = Add(x, eye)
    }""")
    value = ir.Value(
        name="zeros", shape=ir.Shape([64, 64]), type=ir.TensorType(ir.DataType.FLOAT)
    )
    value.const_value = zeros
    model.graph.register_initializer(value)
    model.graph.node(0).replace_input_with(0, value)
    _fold(model)
    assert list(model.graph.initializers) == ["eye"]


def test_shared_producer_is_kept_when_it_has_other_users():
    text = """<ir_version: 10, opset_import: ["" : 22]>
    g (float[3,3] x) => (float[3,3] y, float[3,3] r) {
        r = Relu(x)
        eye = EyeLike(r)
        y = Add(r, eye)
    }"""
    original, model = _model(text), _model(text)
    _fold(model)
    assert sorted(n.op_type for n in model.graph) == ["Add", "Relu"]
    assert_same_outputs(original, model)


def test_eyelike_inside_if_branch_folds_into_the_branch():
    text = """<ir_version: 10, opset_import: ["" : 22]>
    g (bool c, float[3,3] x) => (float[3,3] y) {
        y = If(c) <
            then_branch = t () => (float[3,3] out) { e = EyeLike(x)
                                                    out = Add(x, e) },
            else_branch = f () => (float[3,3] out2) { out2 = Identity(x) }
        >
    }"""
    original, model = _model(text), _model(text)
    _fold(model)
    assert count_ops(model, "EyeLike") == 0
    then_branch = model.graph.node(0).attributes["then_branch"].as_graph()
    assert list(then_branch.initializers) == ["e"]
    check_model_safely(model)
    for cond in (True, False):
        feeds = {"c": np.array(cond), "x": np.arange(9, dtype=np.float32).reshape(3, 3)}
        assert assert_same_outputs(original, model, feeds) == ["reference", "onnxruntime"]


def test_eyelike_in_function_with_constant_input_becomes_a_constant_node():
    text = """<ir_version: 10, opset_import: ["" : 22, "local" : 1]>
    g (float[2,2] x) => (float[2,2] y) {
        y = local.AddEye(x)
    }
    <domain: "local", opset_import: ["" : 22]>
    AddEye (X) => (Y) {
        s = Constant<value=int64[2] {2, 2}>()
        z = ConstantOfShape<value=float[1] {0.0}>(s)
        e = EyeLike(z)
        Y = Add(X, e)
    }"""
    original, model = _model(text), _model(text)
    result = _fold(model)
    assert len(result.folded) == 1
    function = next(iter(model.functions.values()))
    assert [n.op_type for n in function] == ["Constant", "Add"]
    check_model_safely(model)
    assert assert_same_outputs(original, model) == ["reference", "onnxruntime"]


def test_eyelike_in_function_with_untyped_input_stays():
    text = """<ir_version: 10, opset_import: ["" : 22, "local" : 1]>
    g (float[2,2] x) => (float[2,2] y) {
        y = local.AddEye(x)
    }
    <domain: "local", opset_import: ["" : 22]>
    AddEye (X) => (Y) {
        e = EyeLike(X)
        Y = Add(X, e)
    }"""
    model = _model(text)
    assert _fold(model).folded == []
    result = eyefold.optimize_with_report(model)
    assert [n.action for n in result.report.nodes] == ["kept"]
    assert "type unknown" in result.report.nodes[0].reason


def test_nested_eyelike_folds_both():
    text = """<ir_version: 10, opset_import: ["" : 22]>
    g (float[2,3] x) => (bool[2,3] y) {
        a = EyeLike<k=1>(x)
        y = EyeLike<dtype=9>(a)
    }"""
    original, model = _model(text), _model(text)
    assert len(_fold(model).folded) == 2
    assert count_ops(model, "EyeLike") == 0
    assert list(model.graph.initializers) == ["y"]
    assert_same_outputs(original, model)
