"""drop_input_producer: EyeLike(u(x), k) -> EyeLike(x, k, dtype=type of u(x))."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from eyefold.testing import assert_same_outputs, check_model_safely, count_ops, random_inputs

RULE = ["drop_input_producer"]

# The producers see NaN and inf inputs on purpose (their values must not matter).
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")

# (producer line(s) making `u` from `x`, x's type, EyeLike output type)
PRODUCERS = {
    "Cast": ("u = Cast<to=6>(x)", "float", "int32"),
    "CastLike": ("u = CastLike(x, like)", "float", "double"),
    "Identity": ("u = Identity(x)", "int64", "int64"),
    "Neg": ("u = Neg(x)", "float", "float"),
    "Sigmoid": ("u = Sigmoid(x)", "double", "double"),
    "IsNaN": ("u = IsNaN(x)", "float", "bool"),
    "Softmax": ("u = Softmax<axis=0>(x)", "float16", "float16"),
    "Clip": ("lo = Constant<value_float=-1.0>()\n u = Clip(x, lo)", "float", "float"),
    "CumSum": ("ax = Constant<value_int=1>()\n u = CumSum(x, ax)", "int32", "int32"),
    "EyeLike": ("u = EyeLike<k=2, dtype=10>(x)", "float", "float16"),
}


def _text(producer: str, x_type: str, out_type: str, *, opset: int = 22, k: int = 1) -> str:
    return f"""<ir_version: 10, opset_import: ["" : {opset}]>
    agraph ({x_type}[3,4] x, double[1] like) => ({out_type}[3,4] y) {{
        {producer}
        y = EyeLike<k={k}>(u)
    }}"""


@pytest.mark.parametrize("op", PRODUCERS, ids=list(PRODUCERS))
def test_shape_preserving_producer_is_dropped(apply_eyelike_rules, with_ieee_specials, op):
    before, after, rules = apply_eyelike_rules(_text(*PRODUCERS[op]), rules=RULE)
    assert rules.hits == {"drop_input_producer": 1}
    (eye,) = [n for n in after.graph if n.op_type == "EyeLike"]
    assert eye.inputs[0] is after.graph.inputs[0]
    assert count_ops(after, op) == (1 if op == "EyeLike" else 0)
    assert len(after.graph) == 1  # Clip's and CumSum's Constant inputs went too
    assert eye.outputs[0].name == "y"
    check_model_safely(after)
    assert_same_outputs(before, after, with_ieee_specials(random_inputs(before)))


def test_output_type_comes_from_the_eyelike_dtype_when_set(apply_eyelike_rules):
    text = """<ir_version: 10, opset_import: ["" : 22]>
    agraph (float[2,2] x) => (int8[2,2] y) { u = Cast<to=11>(x)  y = EyeLike<dtype=3>(u) }"""
    before, after, rules = apply_eyelike_rules(text, rules=RULE)
    assert rules.hits["drop_input_producer"] == 1
    (eye,) = list(after.graph)
    assert eye.attributes.get_int("dtype") == ir.DataType.INT8.value
    assert_same_outputs(before, after)


@pytest.mark.parametrize(
    "producer",
    ["u = Transpose(x)", "s = Constant<value_ints=[4, 3]>()\n u = Reshape(x, s)"],
    ids=["Transpose", "Reshape"],
)
def test_shape_changing_producer_stays(apply_eyelike_rules, producer):
    _, after, rules = apply_eyelike_rules(_text(producer, "float", "float"), rules=RULE)
    assert rules.hits["drop_input_producer"] == 0
    assert count_ops(after, "EyeLike") == 1 and len(after.graph) >= 2


@pytest.mark.parametrize(
    ("graph", "why"),
    [
        ("(float[3,3] x) => (float[3,3] y, float[3,3] z) { u = Neg(x)  y = EyeLike(u)"
         "  z = Add(u, x) }", "other user"),
        ("(float[3,3] x) => (float[3,3] y, float[3,3] u) { u = Neg(x)  y = EyeLike(u) }",
         "graph output"),
        ("(string[3,3] x) => (float[3,3] y) { u = Cast<to=1>(x)  y = EyeLike(u) }",
         "string input is no EyeLike type"),
        ("(float[3,3] x) => (float[3,3] y) { u = pkg.Neg(x)  y = EyeLike(u) }",
         "custom domain"),
        ("(float[3,4] x) => (float[4,3] y) <float[4,3] u> { u = Neg(x)  y = EyeLike(u) }",
         "declared shapes disagree"),
    ],
    ids=["other-user", "graph-output", "string-input", "custom-domain", "shape-conflict"],
)  # fmt: skip
def test_condition_fails_does_not_fire(apply_eyelike_rules, graph, why):
    text = f'<ir_version: 10, opset_import: ["" : 22, "pkg" : 1]> agraph {graph}'
    _, after, rules = apply_eyelike_rules(text, rules=RULE)
    assert rules.hits["drop_input_producer"] == 0, why
    assert len(after.graph) >= 2


@pytest.mark.parametrize(("opset", "fires"), [(21, False), (22, True)])
def test_bfloat16_input_needs_opset_22(apply_eyelike_rules, opset, fires):
    text = f"""<ir_version: 10, opset_import: ["" : {opset}]>
    agraph (bfloat16[3,3] x) => (float[3,3] y) {{ u = Cast<to=1>(x)  y = EyeLike(u) }}"""
    _, after, rules = apply_eyelike_rules(text, rules=RULE)
    assert rules.hits["drop_input_producer"] == int(fires)
    assert count_ops(after, "Cast") == int(not fires)


def test_untyped_function_input_does_not_fire(apply_eyelike_rules):
    text = """<ir_version: 10, opset_import: ["" : 22, "pkg" : 1]>
    agraph (float[2,2] x) => (float[2,2] y) { y = pkg.F(x) }
    <domain: "pkg", opset_import: ["" : 22]>
    F (v) => (w) { u = Neg(v)  w = EyeLike(u) }"""
    _, after, rules = apply_eyelike_rules(text, rules=RULE)
    assert rules.hits["drop_input_producer"] == 0
    assert count_ops(after, "Neg") == 1


def test_shape_known_only_for_the_dropped_value_still_folds(optimize_onnx_text):
    # Only the EyeLike input (the Cast) gets its shape from inference; once the Cast is
    # dropped, the Reshape output (declared with a type, no shape) inherits it, so the
    # EyeLike still folds.
    text = """<ir_version: 10, opset_import: ["" : 22]>
    agraph (float[2,6] x) => (float[3,4] y) <float[?,?] r> {
        s = Constant<value_ints=[3, 4]>()
        r = Reshape(x, s)
        u = Cast<to=1>(r)
        y = EyeLike(u)
    }"""
    original, model, report = optimize_onnx_text(text)
    assert report.extra["rules"]["drop_input_producer"] == 1
    assert [n.action for n in report.nodes] == ["folded"]
    assert count_ops(model, "EyeLike") == 0
    assert_same_outputs(original, model, {"x": np.ones((2, 6), np.float32)})


def test_a_chain_with_untyped_intermediate_values_is_dropped_whole(apply_eyelike_rules):
    # Shape inference types only EyeLike inputs; the values inside the chain stay untyped.
    text = """<ir_version: 10, opset_import: ["" : 22]>
    agraph (float[N,M] x) => (float[N,M] y) {
        a = Relu(x)
        b = Neg(a)
        y = EyeLike<k=1>(b)
    }"""
    before, after, rules = apply_eyelike_rules(text, rules=["drop_input_producer"])
    assert rules.hits["drop_input_producer"] == 1
    assert [n.op_type for n in after.graph] == ["EyeLike"]
    feeds = {"x": np.zeros((3, 4), np.float32)}
    assert_same_outputs(before, ir.to_proto(after), feeds)
