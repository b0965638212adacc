"""Merging what is declared about a value with what eyefold learned about it."""

from __future__ import annotations

from collections.abc import Sequence

import onnx_ir as ir

__all__ = ["merge_shapes"]


def _better(have: int | ir.SymbolicDim, new: int | ir.SymbolicDim) -> int | ir.SymbolicDim:
    """An int beats a named dim, which beats an unnamed one; ties keep what was there."""
    if isinstance(have, int):
        return have
    if isinstance(new, int):
        return new
    return have if have.value is not None else new


def merge_shapes(
    current: ir.Shape | None, learned: Sequence[int | ir.SymbolicDim | str | None]
) -> ir.Shape | None:
    """The shape ``current`` should become, or None when it should stay as it is.

    Known dims are never replaced, and a rank disagreement keeps the current shape (the
    caller decides whether that is an error).
    """
    new_dims = [
        d if isinstance(d, (int, ir.SymbolicDim)) else ir.SymbolicDim(d) for d in learned
    ]
    if current is None:
        return ir.Shape(new_dims)
    if len(current) != len(new_dims):
        return None
    merged = ir.Shape([_better(h, n) for h, n in zip(current.dims, new_dims, strict=True)])
    return None if merged == current else merged
