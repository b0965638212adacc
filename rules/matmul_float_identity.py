"""MatMul(A, I) -> A and MatMul(I, A) -> A for a floating identity I (relaxed).

Identity: as ``matmul_int_identity`` (``A @ I = I @ A = A`` for the ``n x n`` identity: an
EyeLike with k=0 on a square input or a constant equal to it), for float, double, float16
and bfloat16.

Why it is only relaxed: IEEE arithmetic gives the same result for every finite input
except the sign of zero, and differs on special values:

    * ``inf * 0 = NaN``: a row (A @ I) or column (I @ A) of A holding an inf gives NaN in
      every other position of that row or column of the product;
    * NaN in A spreads the same way;
    * ``-0.0 * 1 + 0.0 * 0 = +0.0``: a -0.0 in A comes out as +0.0.

So it is not exact, only relaxed, and runs only with ``--relaxed`` / ``relaxed=True``.

Conditions (those of ``matmul_int_identity``, for a floating element type):
    * one operand is an exact ``n x n`` identity of the same element type as the other;
    * the other operand's contracted dim is provably ``n``;
    * the element type is float, double, float16 or bfloat16.
"""

from __future__ import annotations

from eyefold.rules._matmul import FLOAT_TYPES, identity_rule_class, identity_spec

__all__ = ["MatMulFloatIdentity", "spec"]

MatMulFloatIdentity = identity_rule_class(__name__, "MatMulFloatIdentity", FLOAT_TYPES)
spec = identity_spec(__name__, __doc__, MatMulFloatIdentity, "relaxed", FLOAT_TYPES, "float")
__getattr__ = spec.module_attribute  # `rule`: the onnxscript rule, built on first use
