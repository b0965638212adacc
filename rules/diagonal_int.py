"""ReduceSum(Mul(x, EyeLike mask), one mask dim) -> Pad(strided Slice of x's diagonal), ints.

Identity: summing ``x`` times an EyeLike mask over the mask's rows gives, at column
``j``, ``x[..., j - k, j]`` (0 where ``j - k`` is not a row); summing over its columns
gives, at row ``i``, ``x[..., i, i + k]`` (0 where ``i + k`` is not a column). The
replacement reads those elements directly (both dims flattened by a Reshape, then a Slice
with step ``cols + 1``) and pads the zeros back with a Pad, so the value keeps its shape
and the exporter's own trimming Slice (or GatherND) after it reads the same thing. It is
O(diagonal) where the original multiplies and sums the whole matrix.

Why it is exact: in an integer type every term of the sum but one is ``x * 0 = 0`` and the
one left is ``x * 1 = x``, so the sum is exactly the diagonal element (or 0), without
overflow. Bool inputs are covered: both exporters Cast them to INT64 before the Mul and
back after, and the Cast is moved after the selection (a Cast commutes with it).

Both torch exporters are matched as they write it:
    * dynamo (onnxscript's ``torch_lib.ops.core.aten_diagonal``):
      ``ReduceSum(Mul(Transpose(x, perm), CastLike(EyeLike(ConstantOfShape(Concat(rows,
      cols)), k), x)), axes=[rank-2], keepdims=0)``, then a Slice; for bool,
      ``Cast(INT64)`` on both Mul operands;
    * TorchScript (``symbolic_opset12.diagonal``): ``ReduceSum(Mul(Transpose(x, perm),
      EyeLike(ConstantOfShape(Concat(rows, cols)), k)), axes=[-1], keepdims=0)``, then
      a GatherND inside an If.

Conditions:
    * opset 14 or later (Reshape's allowzero keeps a zero-size matrix flattenable);
    * the Mul's element type is an integer type;
    * one Mul operand is an EyeLike (through at most one Cast or CastLike) used only
      there, whose rows and cols provably are the other operand's last two dims (the
      same input dims read by Shape/Gather/Concat, equal static dims or the same symbol);
    * ReduceSum sums over exactly one of those two dims, with keepdims=0.
    A Transpose in front that moved two adjacent dims last (the others in order) is read
    through, so the diagonal is taken from its input and the transpose copies nothing.
"""

from __future__ import annotations

from typing import ClassVar

import onnx_ir as ir

from eyefold.rules._diagonal import INTEGER_TYPES, MaskedSumDiagonalBase, diagonal_spec

__all__ = ["MaskedSumDiagonalInt", "spec"]


class MaskedSumDiagonalInt(MaskedSumDiagonalBase):
    """Reads the diagonal a masked sum computes, for integer element types (exact)."""

    DTYPES: ClassVar[frozenset[ir.DataType]] = INTEGER_TYPES


spec = diagonal_spec(__name__, __doc__, MaskedSumDiagonalInt, "exact", "int64")
__getattr__ = spec.module_attribute  # `rule`: the onnxscript rule, built on first use
