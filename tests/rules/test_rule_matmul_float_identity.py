"""matmul_float_identity (relaxed): MatMul(A, I) -> A for floating identities."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from eyefold.errors import UnknownRuleError
from eyefold.passes import ApplyEyeLikeRulesPass
from eyefold.testing import (
    assert_same_outputs,
    check_model_safely,
    count_ops,
    random_inputs,
    run_reference,
)

RULE = ["matmul_float_identity"]
FLOAT_TYPES = [
    ir.DataType.FLOAT,
    ir.DataType.DOUBLE,
    ir.DataType.FLOAT16,
    ir.DataType.BFLOAT16,
]


def _text(dtype: ir.DataType, product: str = "MatMul(a, i)") -> str:
    name = dtype.name.lower()
    return f"""<ir_version: 10, opset_import: ["" : 22]>
    agraph (float[3,3] s, {name}[3,3] x) => ({name}[3,3] y) <{name}[3,3] a> {{
        a = Neg(x)
        i = EyeLike<dtype={dtype.value}>(s)
        y = {product}
    }}"""


@pytest.mark.parametrize("dtype", FLOAT_TYPES, ids=[t.name for t in FLOAT_TYPES])
@pytest.mark.parametrize("product", ["MatMul(a, i)", "MatMul(i, a)"], ids=["right", "left"])
def test_fires_with_relaxed_and_matches_on_finite_inputs(apply_eyelike_rules, dtype, product):
    before, after, rules = apply_eyelike_rules(_text(dtype, product), rules=RULE, relaxed=True)
    assert rules.hits == {"matmul_float_identity": 1}
    assert [n.op_type for n in after.graph] == ["Neg"]
    check_model_safely(after)
    # Finite inputs without -0.0: bit for bit the same (a * 1 + 0 is exact).
    assert_same_outputs(before, after, random_inputs(before, seed=3))


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize(
    ("special", "where"),
    [(np.inf, "inf * 0 = NaN"), (-0.0, "-0.0 + 0.0 = +0.0")],
    ids=["inf", "negative-zero"],
)
def test_relaxed_because_special_values_differ(apply_eyelike_rules, special, where):
    before, after, _ = apply_eyelike_rules(_text(ir.DataType.FLOAT), rules=RULE, relaxed=True)
    feeds = random_inputs(before, seed=3)
    feeds["x"][0, 0] = -special  # Neg gives `special`
    (original,) = run_reference(before, feeds)
    (rewritten,) = run_reference(after, feeds)
    assert original.tobytes() != rewritten.tobytes(), where
    np.testing.assert_array_equal(original[1:], rewritten[1:])  # only row 0 differs


def test_default_selection_leaves_floating_matmul(apply_eyelike_rules):
    _, after, rules = apply_eyelike_rules(_text(ir.DataType.FLOAT))
    assert "matmul_float_identity" not in rules.hits
    assert sum(rules.hits.values()) == 0
    assert count_ops(after, "MatMul") == 1


def test_naming_it_without_relaxed_is_an_error():
    with pytest.raises(UnknownRuleError, match="relaxed"):
        ApplyEyeLikeRulesPass(rules=RULE)


def test_integer_matmul_is_not_this_rule(apply_eyelike_rules):
    text = _text(ir.DataType.FLOAT).replace("float[3,3] x", "int64[3,3] x")
    text = text.replace("dtype=1", "dtype=7").replace("float[3,3] a", "int64[3,3] a")
    text = text.replace("(float[3,3] y)", "(int64[3,3] y)")
    _, after, rules = apply_eyelike_rules(text, rules=RULE, relaxed=True)
    assert rules.hits["matmul_float_identity"] == 0
    assert count_ops(after, "MatMul") == 1
