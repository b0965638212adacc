"""transpose_to_negative_k: Transpose(EyeLike(x, k), perm=[1, 0]) -> EyeLike(x, -k)."""

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
    run_reference,
)

RULE = ["transpose_to_negative_k"]


def _text(
    shape: str, *, k: int = 1, perm: str = "<perm=[1, 0]>", dtype: str = "", out: str = ""
) -> str:
    attributes = f"k={k}" + (f", dtype={dtype}" if dtype else "")
    return f"""<ir_version: 10, opset_import: ["" : 22]>
    agraph (float[{shape}] x) => ({out or "float"}[{shape}] y) {{
        e = EyeLike<{attributes}>(x)
        y = Transpose{perm}(e)
    }}"""


@pytest.mark.parametrize("k", [-5, -1, 0, 1, 2, 4], ids=lambda k: f"k{k}")
@pytest.mark.parametrize("perm", ["<perm=[1, 0]>", ""], ids=["perm10", "no-perm"])
def test_square_transpose_negates_k(apply_eyelike_rules, with_ieee_specials, k, perm):
    before, after, rules = apply_eyelike_rules(_text("4,4", k=k, perm=perm), rules=RULE)
    assert rules.hits == {"transpose_to_negative_k": 1}
    (eye,) = list(after.graph)
    assert eye.op_type == "EyeLike" and eye.attributes.get_int("k", 0) == -k
    assert count_ops(after, "Transpose") == 0
    check_model_safely(after)
    feeds = with_ieee_specials(random_inputs(before))
    assert_same_outputs(before, after, feeds)
    # The oracle: the transposed kernel output, independent of the rewrite.
    (result,) = run_reference(after, feeds)
    np.testing.assert_array_equal(result, kernel.eye(4, 4, k, ir.DataType.FLOAT).T)


def test_same_symbolic_dim_counts_as_square(apply_eyelike_rules):
    before, after, rules = apply_eyelike_rules(
        _text("n,n", k=2, dtype="7", out="int64"), rules=RULE
    )
    assert rules.hits["transpose_to_negative_k"] == 1
    (eye,) = list(after.graph)
    assert eye.attributes.get_int("dtype") == ir.DataType.INT64.value
    for n in (1, 3, 5):
        assert_same_outputs(before, after, {"x": np.zeros((n, n), np.float32)})


@pytest.mark.parametrize(
    ("shape", "perm", "k", "why"),
    [
        ("3,4", "<perm=[1, 0]>", 1, "static non-square"),
        ("n,m", "<perm=[1, 0]>", 1, "different symbols"),
        ("?,?", "<perm=[1, 0]>", 1, "unknown dims"),
        ("4,4", "<perm=[0, 1]>", 1, "identity perm"),
        ("4,4", "<perm=[1, 0]>", -(2**63), "k has no int64 negation"),
    ],
    ids=["non-square", "two-symbols", "unknown", "perm01", "int64-min"],
)
def test_condition_fails_does_not_fire(apply_eyelike_rules, shape, perm, k, why):
    _, after, rules = apply_eyelike_rules(_text(shape, k=k, perm=perm), rules=RULE)
    assert rules.hits["transpose_to_negative_k"] == 0, why
    assert [n.op_type for n in after.graph] == ["EyeLike", "Transpose"]


def test_eyelike_with_another_user_does_not_fire(apply_eyelike_rules):
    text = """<ir_version: 10, opset_import: ["" : 22]>
    agraph (float[3,3] x) => (float[3,3] y, float[3,3] z) {
        e = EyeLike<k=1>(x)
        y = Transpose<perm=[1, 0]>(e)
        z = Neg(e)
    }"""
    _, after, rules = apply_eyelike_rules(text, rules=RULE)
    assert rules.hits["transpose_to_negative_k"] == 0
    assert count_ops(after, "Transpose") == 1
