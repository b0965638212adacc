"""ReduceSum(Mul(x, EyeLike mask), one mask dim) -> Pad(strided Slice of x's diagonal), floats.

Identity: as ``diagonal_int`` (the same two exporter patterns, the same replacement), for
float, double, float16 and bfloat16.

Why it is relaxed, not exact: on finite inputs the masked sum adds zeros to the one diagonal
element, which gives that element, but IEEE special values break it. An inf or NaN off the
diagonal becomes NaN when multiplied by the mask's 0, and that NaN then poisons the whole
sum of its row (or column), where the rewrite returns the diagonal element. Signed zeros
differ as well: a -0.0 on the diagonal plus the +0.0 of the other terms is +0.0 in the
original, and a sum of ``negative * 0`` terms is -0.0 where the rewrite pads +0.0. Hence
it runs only with ``--relaxed`` / ``relaxed=True``.

Conditions: those of ``diagonal_int`` (opset 14 or later, a mask used only by the Mul that
covers the data's last two dims, one summed dim, keepdims=0), with a float, double,
float16 or bfloat16 Mul.
"""

from __future__ import annotations

from typing import ClassVar

import onnx_ir as ir

from eyefold.rules._diagonal import FLOAT_TYPES, MaskedSumDiagonalBase, diagonal_spec

__all__ = ["MaskedSumDiagonalFloat", "spec"]


class MaskedSumDiagonalFloat(MaskedSumDiagonalBase):
    """Reads the diagonal a masked sum computes, for floating types (relaxed)."""

    DTYPES: ClassVar[frozenset[ir.DataType]] = FLOAT_TYPES


spec = diagonal_spec(__name__, __doc__, MaskedSumDiagonalFloat, "relaxed", "float")
__getattr__ = spec.module_attribute  # `rule`: the onnxscript rule, built on first use
