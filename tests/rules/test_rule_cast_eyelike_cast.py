"""cast_eyelike_cast: Cast(EyeLike(Cast(x, to=s)), to=t) -> EyeLike(x, dtype=t)."""

from __future__ import annotations

import onnx_ir as ir
import pytest

from eyefold.testing import assert_same_outputs, check_model_safely, count_ops, random_inputs

RULE = ["cast_eyelike_cast"]


def _text(x_type: str = "int64", *, opset: int = 22, to: ir.DataType = ir.DataType.BFLOAT16):
    """The opset-9 bfloat16 workaround: a float EyeLike between two Casts."""
    return f"""<ir_version: 10, opset_import: ["" : {opset}]>
    agraph ({x_type}[3,5] x) => ({to.name.lower()}[3,5] y) {{
        f = Cast<to=1>(x)
        e = EyeLike<k=-1>(f)
        y = Cast<to={to.value}>(e)
    }}"""


@pytest.mark.parametrize(
    "to", [ir.DataType.BFLOAT16, ir.DataType.INT8, ir.DataType.BOOL], ids=lambda t: t.name
)
def test_chain_becomes_one_eyelike(apply_eyelike_rules, with_ieee_specials, to):
    before, after, rules = apply_eyelike_rules(_text("float16", to=to), rules=RULE)
    assert rules.hits == {"cast_eyelike_cast": 1}
    (eye,) = list(after.graph)
    assert eye.op_type == "EyeLike" and eye.inputs[0] is after.graph.inputs[0]
    assert (eye.attributes.get_int("dtype"), eye.attributes.get_int("k")) == (to.value, -1)
    check_model_safely(after)
    assert_same_outputs(before, after, with_ieee_specials(random_inputs(before)))


def test_bfloat16_below_opset_22_stays(apply_eyelike_rules):
    _, after, rules = apply_eyelike_rules(_text(opset=21), rules=RULE)
    assert rules.hits["cast_eyelike_cast"] == 0
    assert count_ops(after, "Cast") == 2


def test_below_opset_22_the_default_rules_still_drop_the_inner_cast(apply_eyelike_rules):
    before, after, rules = apply_eyelike_rules(_text(opset=21))
    assert rules.hits["drop_input_producer"] == 1 and rules.hits["cast_to_dtype"] == 0
    assert [n.op_type for n in after.graph] == ["EyeLike", "Cast"]
    assert_same_outputs(before, after)


def test_invalid_eyelike_input_type_stays(apply_eyelike_rules):
    _, after, rules = apply_eyelike_rules(_text("string"), rules=RULE)
    assert rules.hits["cast_eyelike_cast"] == 0
    assert count_ops(after, "Cast") == 2


def test_inner_cast_with_another_user_stays(apply_eyelike_rules):
    text = _text().replace("=> (bfloat16[3,5] y)", "=> (bfloat16[3,5] y, float[3,5] f)")
    _, after, rules = apply_eyelike_rules(text, rules=RULE)
    assert rules.hits["cast_eyelike_cast"] == 0
    assert count_ops(after, "Cast") == 2


def test_pipeline_folds_the_collapsed_chain(optimize_onnx_text):
    original, model, report = optimize_onnx_text(_text())
    assert report.extra["rules"]["cast_eyelike_cast"] == 1
    assert [n.action for n in report.nodes] == ["folded"]
    assert len(model.graph) == 0
    assert model.graph.outputs[0].const_value.dtype == ir.DataType.BFLOAT16
    assert_same_outputs(original, model)
