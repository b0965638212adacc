"""MatMul(A, I) -> A and MatMul(I, A) -> A for an exact integer identity I.

Identity: ``(A @ I)[..., i, j] = sum_m A[..., i, m] * I[m, j] = A[..., i, j]`` and likewise
``I @ A = A``, where ``I`` is the ``n x n`` identity: an EyeLike with k=0 on a square input,
or a constant (an initializer, or a folded EyeLike) whose values are the identity.

Why it is exact: in integer arithmetic (int32, int64, uint32, uint64, the integer types
MatMul accepts; bool is not a MatMul type) every product with a 0 is 0 and ``a * 1 = a``,
so the sum is exactly ``A[..., i, j]``, wrap-around included. The floating types are not
exact (inf * 0 is NaN, -0.0 + 0.0 is +0.0): see ``matmul_float_identity``.

Conditions:
    * one operand is an exact ``n x n`` identity of the same element type as the other;
    * the other operand's contracted dim (last when I is on the right, second to last, or
      the only one, when I is on the left) is provably ``n`` (equal ints or the same
      symbolic dim), so the product has exactly its shape;
    * the element type is an integer type.

When the other operand is a graph input, graph output, initializer or outer-scope value,
the MatMul becomes an Identity that keeps the product's name.
"""

from __future__ import annotations

from eyefold.rules._matmul import INTEGER_TYPES, identity_rule_class, identity_spec

__all__ = ["MatMulIntIdentity", "spec"]

MatMulIntIdentity = identity_rule_class(__name__, "MatMulIntIdentity", INTEGER_TYPES)
spec = identity_spec(__name__, __doc__, MatMulIntIdentity, "exact", INTEGER_TYPES, "int32")
__getattr__ = spec.module_attribute  # `rule`: the onnxscript rule, built on first use
