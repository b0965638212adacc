"""cast_to_dtype: Cast(EyeLike(x, k, dtype?), to=t) -> EyeLike(x, k, dtype=t)."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from eyefold.core.eyelike_types import EYELIKE_TYPES_OPSET_22
from eyefold.testing import assert_same_outputs, check_model_safely, count_ops, random_inputs

RULE = ["cast_to_dtype"]
TYPES = sorted(EYELIKE_TYPES_OPSET_22, key=lambda t: t.value)


def _text(to: ir.DataType, *, opset: int = 22, k: int = 1, dtype: str = "") -> str:
    attributes = f"k={k}" + (f", dtype={dtype}" if dtype else "")
    return f"""<ir_version: 10, opset_import: ["" : {opset}]>
    agraph (float[3,4] x) => ({to.name.lower()}[3,4] y) {{
        e = EyeLike<{attributes}>(x)
        y = Cast<to={to.value}>(e)
    }}"""


@pytest.mark.parametrize("to", TYPES, ids=[t.name for t in TYPES])
def test_cast_becomes_the_dtype(apply_eyelike_rules, with_ieee_specials, to):
    before, after, rules = apply_eyelike_rules(_text(to), rules=RULE)
    assert rules.hits == {"cast_to_dtype": 1}
    assert (count_ops(before, "Cast"), count_ops(after, "Cast")) == (1, 0)
    (eye,) = list(after.graph)
    assert eye.op_type == "EyeLike"
    assert (eye.attributes.get_int("dtype"), eye.attributes.get_int("k")) == (to.value, 1)
    check_model_safely(after)
    assert_same_outputs(before, after, with_ieee_specials(random_inputs(before)))


def test_existing_dtype_is_replaced(apply_eyelike_rules, with_ieee_specials):
    text = _text(ir.DataType.INT32, k=-1, dtype=str(ir.DataType.DOUBLE.value))
    before, after, rules = apply_eyelike_rules(text, rules=RULE)
    assert rules.hits["cast_to_dtype"] == 1
    assert count_ops(after, "EyeLike") == 1 and count_ops(after, "Cast") == 0
    assert_same_outputs(before, after, with_ieee_specials(random_inputs(before)))


def test_bfloat16_target_needs_opset_22(apply_eyelike_rules):
    at_21 = _text(ir.DataType.BFLOAT16, opset=21)
    _, after, rules = apply_eyelike_rules(at_21, rules=RULE)
    assert rules.hits["cast_to_dtype"] == 0
    assert count_ops(after, "Cast") == 1
    _, after_22, rules_22 = apply_eyelike_rules(_text(ir.DataType.BFLOAT16), rules=RULE)
    assert rules_22.hits["cast_to_dtype"] == 1 and count_ops(after_22, "Cast") == 0


@pytest.mark.parametrize(
    "to",
    [ir.DataType.STRING, ir.DataType.FLOAT8E4M3FN, ir.DataType.COMPLEX64, ir.DataType.INT4],
    ids=lambda t: t.name,
)
def test_non_eyelike_target_type_does_not_fire(apply_eyelike_rules, to):
    text = f"""<ir_version: 10, opset_import: ["" : 22]>
    agraph (float[3,3] x) => (y) {{
        e = EyeLike(x)
        y = Cast<to={to.value}>(e)
    }}"""
    _, after, rules = apply_eyelike_rules(text, rules=RULE)
    assert rules.hits["cast_to_dtype"] == 0
    assert [n.op_type for n in after.graph] == ["EyeLike", "Cast"]


@pytest.mark.parametrize(
    ("graph", "why"),
    [
        (
            """(float[3,3] x) => (double[3,3] y, float[3,3] z) {
                e = EyeLike(x)
                y = Cast<to=11>(e)
                z = Add(x, e)
            }""",
            "other user",
        ),
        (
            """(float[3,3] x) => (double[3,3] y, float[3,3] e) {
                e = EyeLike(x)
                y = Cast<to=11>(e)
            }""",
            "graph output",
        ),
    ],
    ids=["other-user", "graph-output"],
)
def test_shared_eyelike_output_does_not_fire(apply_eyelike_rules, graph, why):
    text = f'<ir_version: 10, opset_import: ["" : 22]> agraph {graph}'
    _, after, rules = apply_eyelike_rules(text, rules=RULE)
    assert rules.hits["cast_to_dtype"] == 0, why
    assert count_ops(after, "Cast") == 1


def test_fires_inside_if_branches_and_functions(apply_eyelike_rules):
    text = """<ir_version: 10, opset_import: ["" : 22, "pkg" : 1]>
    agraph (bool c, float[2,2] x) => (int64[2,2] y, int64[2,2] z) {
        y = If(c) <
            then_branch = t () => (int64[2,2] a) { e = EyeLike(x)  a = Cast<to=7>(e) },
            else_branch = f () => (int64[2,2] b) { b = Cast<to=7>(x) }
        >
        z = pkg.F(x)
    }
    <domain: "pkg", opset_import: ["" : 22]>
    F (v) => (w) { e2 = EyeLike<k=1>(v)  w = Cast<to=7>(e2) }"""
    before, after, rules = apply_eyelike_rules(text, rules=RULE)
    assert rules.hits["cast_to_dtype"] == 2
    assert count_ops(after, "EyeLike") == 2 and count_ops(after, "Cast") == 1
    feeds = random_inputs(before)
    for cond in (True, False):
        assert_same_outputs(before, after, {**feeds, "c": np.array(cond)})
