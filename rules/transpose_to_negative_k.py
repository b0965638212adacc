"""Transpose(EyeLike(x, k, dtype?), perm=[1, 0]) -> EyeLike(x, -k, dtype?) for square x.

Identity: for an ``n x n`` input the EyeLike output has ones exactly at ``[i, i + k]``;
its transpose has them at ``[i + k, i]``, i.e. at ``[j, j - k]``: the EyeLike with offset
``-k`` of the same input. An offset past the matrix gives all zeros on both sides.

Why it is exact: Transpose only moves elements, so the output holds the same 0 and 1
values of the same type; the rewrite produces them in place.

Conditions:
    * ``perm`` is ``[1, 0]`` or absent (a rank-2 Transpose without perm reverses the dims);
    * ``x`` is known to be square: two equal static dims or the same named symbolic dim
      (for a non-square ``m x n`` input the transpose is ``n x m``, not an EyeLike of x);
    * ``k`` is not INT64_MIN, whose negation does not fit in int64;
    * the EyeLike output is used only by the Transpose and is not a graph output.
"""

from __future__ import annotations

import onnx_ir as ir

from eyefold.core.rule_spec import MatchResult, Mismatch, Reach, RuleSpec, match_result
from eyefold.rules._common import INT64_MIN, eyelike_k, square_dim

__all__ = ["TransposeToNegativeK", "spec"]


class TransposeToNegativeK:
    """Replaces the transpose of a square EyeLike by the EyeLike with the opposite k."""

    def pattern(self, op, x):
        """EyeLike(x) feeding a Transpose (any perm; check() reads it)."""
        eye = op.EyeLike(x, _outputs=["eye"])
        return op.Transpose(eye, _outputs=["transposed"])

    def check(self, context, x: ir.Value, eye: ir.Value, transposed: ir.Value) -> MatchResult:
        """Accepts a [1, 0] transpose of an EyeLike on a provably square input."""
        del context
        result = match_result()
        perm = transposed.producer().attributes.get("perm")
        if perm is not None and (
            perm.type != ir.AttributeType.INTS or list(perm.as_ints()) != [1, 0]
        ):
            return result.fail(Mismatch("Transpose perm is not [1, 0]"))
        if square_dim(x) is None:
            return result.fail("EyeLike input is not known to be square")
        k = eyelike_k(eye.producer())
        if k is None or k == INT64_MIN:
            return result.fail("EyeLike k is malformed or INT64_MIN (no int64 negation)")
        return result

    def rewrite(self, op, x: ir.Value, eye: ir.Value, transposed: ir.Value) -> ir.Value:
        """The EyeLike of the same input with the offset negated."""
        del transposed
        node = eye.producer()
        k = eyelike_k(node) or 0
        attributes: dict[str, int | ir.Attr] = {"k": -k} if k else {}
        if "dtype" in node.attributes:
            attributes["dtype"] = node.attributes["dtype"]  # kept exactly as written
        return op.EyeLike(x, _name=node.name, **attributes)


# Root: the Transpose after the EyeLike, which becomes an EyeLike.
REACH = Reach(frozenset({"Transpose"}), depth=1, replaces=frozenset({"Transpose"}))
# Dims left symbolic, so nothing folds first.
FIRING_MODEL = """<ir_version: 10, opset_import: ["" : 22]>
agraph (float[N, N] x) => (y) {
    e = EyeLike<k=1>(x)
    y = Transpose<perm=[1, 0]>(e)
}"""
spec = RuleSpec.declare(
    __name__,
    __doc__,
    TransposeToNegativeK,
    exactness="exact",
    phase="before-fold",
    reach=REACH,
    firing_model=FIRING_MODEL,
)
__getattr__ = spec.module_attribute  # `rule`: the onnxscript rule, built on first use
