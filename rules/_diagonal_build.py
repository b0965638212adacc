"""The replacement of a masked-sum diagonal: flatten, strided Slice, Pad.

For a matrix with ``R`` rows and ``C`` columns stored row-major, the diagonal with offset
``k >= 0`` starts at flat index ``k`` and the one with ``k < 0`` at ``-k * C``; each next
element is ``C + 1`` further on. Its length is ``L = max(0, min(R, C - k))`` for
``k >= 0`` and ``max(0, min(R + k, C))`` for ``k < 0``. ``k`` is clamped to ``[-R, C]``
first, which gives the same (empty) diagonal for larger ``|k|`` and keeps every product
below ``R * C``, so nothing overflows int64 whatever ``k`` is.

When the exporter's Transpose moved two adjacent dims last, the diagonal is read from the
Transpose's input instead: the block is then ``C x R`` when the dims were swapped, whose
diagonal ``-k`` is the same elements in the same order (``diag_k(A^T) = diag_-k(A)``).
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

__all__ = ["MaskedDiagonal", "build_diagonal"]

# Clamping k to this first keeps ``-k`` representable; no dim is larger anyway.
_INT64_MAX = 2**63 - 1


@dataclasses.dataclass(frozen=True)
class MaskedDiagonal:
    """What the replacement reads and produces.

    Attributes:
        source: the tensor whose diagonal is read (the Mul operand, or what its Transpose
            and Cast read when they can be looked through).
        dims: the two dims of ``source`` holding the mask's rows and columns.
        rank: the rank of ``source`` (= the Mul's rank).
        k: the mask's diagonal offset.
        sum_over_rows: True when ReduceSum removes the mask's rows (output length: cols).
        cast_to: the type of a Cast that was looked through (applied to the diagonal).
    """

    source: ir.Value
    dims: tuple[int, int]
    rank: int
    k: int
    sum_over_rows: bool
    cast_to: ir.DataType | None


def _ints(op, values: list[int]) -> ir.Value:
    return op.Constant(value_ints=values)


def _flat_bounds(op, masked: MaskedDiagonal, rows: ir.Value, cols: ir.Value):
    """(before, length, start, step): where the diagonal sits in the sum and in memory.

    ``before`` leading zeros of the sum, then ``length`` diagonal elements, read from flat
    index ``start`` with stride ``step``.
    """
    k = max(-_INT64_MAX, min(masked.k, _INT64_MAX))
    swapped = masked.dims[0] > masked.dims[1]
    zero = _ints(op, [0])
    if k >= 0:
        shift = op.Min(_ints(op, [k]), cols)  # the clamped k
        length = op.Max(op.Min(rows, op.Sub(cols, shift)), zero)
        start = op.Mul(shift, rows) if swapped else shift
        before = shift if masked.sum_over_rows else zero
    else:
        shift = op.Min(_ints(op, [-k]), rows)  # the clamped -k
        length = op.Max(op.Min(op.Sub(rows, shift), cols), zero)
        start = shift if swapped else op.Mul(shift, cols)
        before = zero if masked.sum_over_rows else shift
    step = op.Add(rows if swapped else cols, _ints(op, [1]))
    return before, length, start, step


def build_diagonal(op, masked: MaskedDiagonal) -> ir.Value:
    """Emits the diagonal of ``masked.source`` padded to the masked sum's length."""
    rank, (d1, d2) = masked.rank, masked.dims
    first = min(d1, d2)
    shape = op.Shape(masked.source)
    rows = op.Gather(shape, _ints(op, [d1]), axis=0)
    cols = op.Gather(shape, _ints(op, [d2]), axis=0)
    before, length, start, step = _flat_bounds(op, masked, rows, cols)
    pre, post = list(range(first)), list(range(first + 2, rank))
    target = [op.Mul(rows, cols)]
    if pre:
        target.insert(0, op.Gather(shape, _ints(op, pre), axis=0))
    if post:
        target.append(op.Gather(shape, _ints(op, post), axis=0))
    flat = op.Reshape(masked.source, op.Concat(*target, axis=0), allowzero=1)
    # Past the last element by one when the diagonal is not empty, ``start`` when it is.
    span = op.Max(op.Sub(op.Mul(length, step), op.Sub(step, _ints(op, [1]))), _ints(op, [0]))
    diagonal = op.Slice(flat, start, op.Add(start, span), _ints(op, [first]), step)
    if post:
        perm = [*pre, *range(first + 1, rank - 1), first]
        diagonal = op.Transpose(diagonal, perm=perm)
    if masked.cast_to is not None:
        diagonal = op.Cast(diagonal, to=masked.cast_to)
    size = cols if masked.sum_over_rows else rows
    after = op.Sub(op.Sub(size, before), length)
    # Pads list every axis's start, then every axis's end; only the last axis is padded.
    batch = [_ints(op, [0] * (rank - 2))] if rank > 2 else []
    pads = op.Concat(*batch, before, *batch, after, axis=0)
    return op.Pad(diagonal, pads)
