"""ReduceSum(Mul(x, EyeLike mask), one mask dim) -> Pad(strided Slice of x's diagonal), floats.

Identity: as ``diagonal_int`` (the same two exporter patterns, the same replacement), for
float, double, float16 and bfloat16.

Why it is only relaxed: for finite inputs the sum is the diagonal element plus zeros, so
the value is the same, but IEEE arithmetic differs on special values:

    * ``inf * 0 = NaN`` and ``NaN * 0 = NaN``: an inf or NaN anywhere off the diagonal in
      a row (or column) of the original makes its sum NaN, where the rewrite gives the
      diagonal element;
    * ``-0.0 + 0.0 = +0.0``: a -0.0 on the diagonal comes out as +0.0 from the original
      when another term is +0.0, and the zeros the sum has off the diagonal can be -0.0
      (``negative * 0``), where the rewrite pads +0.0.

So it runs only with ``--relaxed`` / ``relaxed=True``.

Conditions (those of ``diagonal_int``, for a floating element type):
    * opset 14 or later;
    * the Mul's element type is float, double, float16 or bfloat16;
    * the EyeLike mask is used only by the Mul and covers the data's last two dims;
    * ReduceSum sums over exactly one of them, with keepdims=0.
"""

from __future__ import annotations

from typing import ClassVar

import onnx_ir as ir

from eyefold.core.rule_spec import RuleSpec
from eyefold.rules._diagonal import MaskedSumDiagonalBase

__all__ = ["MaskedSumDiagonalFloat", "rule", "spec"]


class MaskedSumDiagonalFloat(MaskedSumDiagonalBase):
    """Reads the diagonal a masked sum computes, for floating types (relaxed)."""

    DTYPES: ClassVar[frozenset[ir.DataType]] = frozenset(
        {ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16}
    )


rule = MaskedSumDiagonalFloat.rule()
spec = RuleSpec.declare(__name__, __doc__, rule, exactness="relaxed", phase="before-fold")
