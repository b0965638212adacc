"""matmul_int_identity: MatMul(A, I) -> A and MatMul(I, A) -> A for integer identities."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from eyefold import kernel
from eyefold.testing import (
    assert_same_outputs,
    check_model_safely,
    count_ops,
    random_inputs,
)

RULE = ["matmul_int_identity"]
INT_TYPES = [ir.DataType.INT32, ir.DataType.INT64, ir.DataType.UINT32, ir.DataType.UINT64]


def _name(dtype: ir.DataType) -> str:
    return dtype.name.lower()


def _extremes(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Integer inputs that start with the type's minimum and maximum."""
    out = {}
    for name, array in feeds.items():
        array = np.array(array)
        if array.dtype.kind in "iu":
            info = np.iinfo(array.dtype)
            array.reshape(-1)[:2] = [info.min, info.max]
        out[name] = array
    return out


@pytest.mark.parametrize("dtype", INT_TYPES, ids=[t.name for t in INT_TYPES])
@pytest.mark.parametrize(
    ("a_shape", "y_shape", "product"),
    [("2,3", "2,3", "MatMul(a, i)"), ("3,2", "3,2", "MatMul(i, a)"),
     ("3", "3", "MatMul(a, i)"), ("3", "3", "MatMul(i, a)"),
     ("2,5,3", "2,5,3", "MatMul(a, i)"), ("4,3,2", "4,3,2", "MatMul(i, a)")],
    ids=["right", "left", "vector-right", "vector-left", "batched-right", "batched-left"],
)  # fmt: skip
def test_eyelike_identity_is_dropped(apply_eyelike_rules, dtype, a_shape, y_shape, product):
    text = f"""<ir_version: 10, opset_import: ["" : 22]>
    agraph (float[3,3] s, {_name(dtype)}[{a_shape}] a) => ({_name(dtype)}[{y_shape}] y) {{
        i = EyeLike<dtype={dtype.value}>(s)
        y = {product}
    }}"""
    before, after, rules = apply_eyelike_rules(text, rules=RULE)
    assert rules.hits == {"matmul_int_identity": 1}
    # `a` is a graph input, so an Identity keeps the output name; the EyeLike is dead.
    assert [n.op_type for n in after.graph] == ["Identity"]
    assert after.graph.outputs[0].name == "y" and after.graph.inputs[1].name == "a"
    check_model_safely(after)
    assert_same_outputs(before, after, _extremes(random_inputs(before)))


@pytest.mark.parametrize("dtype", INT_TYPES, ids=[t.name for t in INT_TYPES])
def test_identity_initializer_is_dropped(apply_eyelike_rules, dtype):
    eye = kernel.eye(3, 3, 0, dtype).astype(np.int64).reshape(-1).tolist()
    values = ", ".join(str(v) for v in eye)
    text = f"""<ir_version: 10, opset_import: ["" : 22]>
    agraph ({_name(dtype)}[2,3] x) => ({_name(dtype)}[2,3] y)
        <{_name(dtype)}[3,3] eye = {{{values}}}, {_name(dtype)}[2,3] a> {{
        a = Neg(x)
        y = MatMul(a, eye)
    }}"""
    if dtype in (ir.DataType.UINT32, ir.DataType.UINT64):
        text = text.replace("Neg(x)", "Identity(x)")  # Neg is not defined for unsigned
    before, after, rules = apply_eyelike_rules(text, rules=RULE)
    assert rules.hits["matmul_int_identity"] == 1
    # `a` is local: it takes the output's place and name; the initializer goes.
    assert count_ops(after, "MatMul") == 0 and len(after.graph) == 1
    assert not after.graph.initializers
    assert after.graph.outputs[0].name == "y"
    check_model_safely(after)
    assert_same_outputs(before, after, _extremes(random_inputs(before)))


def test_constant_node_identity_in_a_function(apply_eyelike_rules):
    text = """<ir_version: 10, opset_import: ["" : 22, "pkg" : 1]>
    agraph (int64[2,2] x) => (int64[2,2] y) { y = pkg.F(x) }
    <domain: "pkg", opset_import: ["" : 22]>
    F (v) => (w) {
        c = Constant<value = int64[2,2] {1, 0, 0, 1}>()
        d = Constant<value = int64[2,2] {5, -3, 7, 2}>()
        p = MatMul(c, d)
        w = Add(p, v)
    }"""
    before, after, rules = apply_eyelike_rules(text, rules=RULE)
    assert rules.hits["matmul_int_identity"] == 1
    assert count_ops(after, "MatMul") == 0 and count_ops(after, "Constant") == 1
    check_model_safely(after)
    assert_same_outputs(before, after, _extremes(random_inputs(before)))


def test_pipeline_folds_then_drops_the_matmul(optimize_onnx_text):
    text = """<ir_version: 10, opset_import: ["" : 22]>
    agraph (int64[4,4] x) => (int64[4,4] y) <int64[4,4] a> {
        a = Neg(x)
        i = EyeLike(x)
        y = MatMul(a, i)
    }"""
    original, model, report = optimize_onnx_text(text)
    assert report.extra["rules"]["matmul_int_identity"] == 1
    assert [n.action for n in report.nodes] == ["folded"]
    assert [n.op_type for n in model.graph] == ["Neg"] and not model.graph.initializers
    assert_same_outputs(original, model, _extremes(random_inputs(original)))


@pytest.mark.parametrize(
    ("eye", "a_type", "why"),
    [
        ("i = EyeLike<k=1, dtype=7>(s)", "int64[3,3]", "k != 0"),
        ("i = EyeLike<dtype=7>(r)", "int64[3,4]", "non-square identity"),
        ("i = EyeLike<dtype=7>(s)", "int64[n,3]", "contracted dim not provably 3"),
        ("i = EyeLike<dtype=6>(s)", "int64[3,3]", "type mismatch"),
        ("i = EyeLike(s)", "float[3,3]", "floating type is not exact"),
    ],
    ids=["k1", "non-square", "symbolic-size", "type-mismatch", "float"],
)
def test_condition_fails_does_not_fire(apply_eyelike_rules, eye, a_type, why):
    text = f"""<ir_version: 10, opset_import: ["" : 22]>
    agraph (float[3,3] s, float[4,4] r, {a_type} a) => (y) {{
        {eye}
        y = MatMul(i, a)
    }}"""
    _, after, rules = apply_eyelike_rules(text, rules=RULE)
    assert rules.hits["matmul_int_identity"] == 0, why
    assert count_ops(after, "MatMul") == 1


@pytest.mark.parametrize(
    "values",
    [[1, 0, 0, 1, 1, 0, 0, 0, 1], [1, 0, 0, 0, 2, 0, 0, 0, 1], [1, 0, 0, 0, 0, 0, 0, 0, 1]],
    ids=["off-diagonal-one", "diagonal-two", "diagonal-zero"],
)
def test_near_identity_constant_does_not_fire(apply_eyelike_rules, values):
    listed = ", ".join(map(str, values))
    text = f"""<ir_version: 10, opset_import: ["" : 22]>
    agraph (int64[2,3] a) => (int64[2,3] y) <int64[3,3] m = {{{listed}}}> {{
        y = MatMul(a, m)
    }}"""
    _, after, rules = apply_eyelike_rules(text, rules=RULE)
    assert rules.hits["matmul_int_identity"] == 0
    assert count_ops(after, "MatMul") == 1 and "m" in after.graph.initializers


def test_graph_input_feeding_graph_output_keeps_both_names(apply_eyelike_rules):
    text = """<ir_version: 10, opset_import: ["" : 22]>
    agraph (int32[3,3] a) => (int32[3,3] y, int32[3,3] a_out) {
        i = EyeLike(a)
        y = MatMul(a, i)
        a_out = Identity(a)
    }"""
    before, after, rules = apply_eyelike_rules(text, rules=RULE)
    assert rules.hits["matmul_int_identity"] == 1
    assert [v.name for v in after.graph.outputs] == ["y", "a_out"]
    assert [v.name for v in after.graph.inputs] == ["a"]
    assert_same_outputs(before, after, _extremes(random_inputs(before)))


def test_identity_with_another_user_stays_for_it(apply_eyelike_rules):
    text = """<ir_version: 10, opset_import: ["" : 22]>
    agraph (int64[3,3] x) => (int64[3,3] y, int64[3,3] z) <int64[3,3] a> {
        a = Neg(x)
        i = EyeLike(x)
        y = MatMul(a, i)
        z = Add(x, i)
    }"""
    before, after, rules = apply_eyelike_rules(text, rules=RULE)
    assert rules.hits["matmul_int_identity"] == 1
    assert sorted(n.op_type for n in after.graph) == ["Add", "EyeLike", "Neg"]
    assert_same_outputs(before, after, _extremes(random_inputs(before)))


def test_identity_initializer_that_is_a_graph_input_is_only_a_default(apply_eyelike_rules):
    # The caller may feed another matrix for `m`: the MatMul must stay.
    text = """<ir_version: 10, opset_import: ["" : 22]>
    agraph (int64[2,3] a, int64[3,3] m) => (int64[2,3] y)
        <int64[3,3] m = {1,0,0,0,1,0,0,0,1}> {
        y = MatMul(a, m)
    }"""
    before, after, rules = apply_eyelike_rules(text, rules=RULE)
    assert rules.hits["matmul_int_identity"] == 0
    assert count_ops(after, "MatMul") == 1
    feeds = {"a": np.arange(6).reshape(2, 3), "m": 2 * np.eye(3, dtype=np.int64)}
    assert_same_outputs(before, ir.to_proto(after), feeds)
