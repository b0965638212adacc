"""Recognizing the identity matrix torch.onnx's dynamo exporter builds out of Range and Equal.

With a size known only at run time, dynamo exports ``torch.eye(n, dtype=...)`` through
torch's decomposition (torchlib has no ``aten::eye``), not as EyeLike; torch 2.13 writes::

    r = Range(0, n, 1)                   (int64; one Range per distinct size)
    eq = Equal(Unsqueeze(r, axes=[1]), r)
    y = Cast(eq, to=dtype)               (no Cast for dtype=torch.bool)

``eq[i, j]`` is ``i == j``, exactly True on the diagonal and False elsewhere, and Cast maps
them to exactly 1 and 0 in every type, so ``y`` is the ``n x n`` identity of ``dtype``
whenever both Ranges count to the same ``n``. The variants accepted: Unsqueeze's axes as
an input or an attribute, ``[1]`` or ``[-1]`` (the rows), the columns' Range bare or
unsqueezed at ``[0]`` or ``[-2]`` (eyefold's own lowered form), Equal's operands in either
order, and any integer start 0 and delta 1. Both Ranges must be the same value or read the
same limit: ``torch.eye(n, m)`` with ``m`` not provably ``n`` is no identity. ``n`` itself
is a constant limit, the matrix's or the Range's declared dim (dynamo declares them), or
the dim of a tensor the limit reads (``Squeeze(Shape(x, start=i, end=i+1))`` or
``Gather(Shape(x), i)``), so a MatMul's other operand can be proved to match it.

The rules read such a value as an identity operand (``rules/_common.identity_operand``); the
report counts them apart from the EyeLike census.
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

from eyefold.core.constants import constant_tensor
from eyefold.core.domains import DEFAULT_DOMAINS

__all__ = ["RANGE_IDENTITY_OPS", "RangeIdentity", "range_identity"]

# The ops whose output can be such an identity: Cast, or Equal for a bool one.
RANGE_IDENTITY_OPS = frozenset({"Cast", "Equal"})

# Unsqueeze axes that make a 1-D Range the rows ([n, 1]) or the columns ([1, n]).
_ROW_AXES = ((1,), (-1,))
_COLUMN_AXES = ((0,), (-2,))


@dataclasses.dataclass(frozen=True)
class RangeIdentity:
    """A value that is exactly the ``size x size`` identity of ``dtype``.

    Attributes:
        size: ``n``, a static or a named symbolic dim (what the other operand of a
            MatMul must provably have).
        dtype: the element type (BOOL when no Cast follows the Equal).
    """

    size: int | ir.SymbolicDim
    dtype: ir.DataType


def _producer(value: ir.Value | None, op_type: str) -> ir.Node | None:
    producer = value.producer() if value is not None else None
    if (
        producer is None
        or producer.op_type != op_type
        or producer.domain not in DEFAULT_DOMAINS
    ):
        return None
    return producer


def _scalar(value: ir.Value | None) -> int | None:
    """The integer a constant scalar (or 1-element) tensor holds, else None."""
    tensor = constant_tensor(value) if value is not None else None
    if tensor is None or not tensor.dtype.is_integer() or tensor.size != 1:
        return None
    return int(tensor.numpy().reshape(-1)[0])


def _axes(node: ir.Node) -> tuple[int, ...] | None:
    """Unsqueeze's axes, from its input (opset 13+) or its attribute."""
    if len(node.inputs) > 1:
        tensor = constant_tensor(node.inputs[1]) if node.inputs[1] is not None else None
        return None if tensor is None else tuple(int(a) for a in tensor.numpy().reshape(-1))
    attribute = node.attributes.get("axes")
    if attribute is None or attribute.type != ir.AttributeType.INTS:
        return None
    return tuple(attribute.as_ints())


def _counting_range(value: ir.Value | None) -> ir.Node | None:
    """The ``Range(0, n, 1)`` producing ``value``, else None."""
    node = _producer(value, "Range")
    if node is None or len(node.inputs) != 3:
        return None
    start, _, delta = node.inputs
    return node if _scalar(start) == 0 and _scalar(delta) == 1 else None


def _unsqueezed_range(
    value: ir.Value | None, axes: tuple[tuple[int, ...], ...]
) -> ir.Node | None:
    """The Range that ``value`` unsqueezes at one of ``axes``, else None."""
    node = _producer(value, "Unsqueeze")
    if node is None or _axes(node) not in axes:
        return None
    return _counting_range(node.inputs[0])


def _column_range(value: ir.Value | None) -> ir.Node | None:
    return _counting_range(value) or _unsqueezed_range(value, _COLUMN_AXES)


def _ranges(equal: ir.Node) -> tuple[ir.Node, ir.Node] | None:
    """The (rows, columns) Ranges Equal compares, in either operand order."""
    if len(equal.inputs) != 2:
        return None
    a, b = equal.inputs
    for first, second in ((a, b), (b, a)):
        rows, columns = _unsqueezed_range(first, _ROW_AXES), _column_range(second)
        if rows is not None and columns is not None:
            return rows, columns
    return None


def _named_dim(dim: int | ir.SymbolicDim) -> int | ir.SymbolicDim | None:
    """A dim that can be compared with another: static, or a symbol with a name."""
    if isinstance(dim, int) or dim.value is not None:
        return dim
    return None


def _size(value: ir.Value, rows: ir.Node) -> int | ir.SymbolicDim | None:
    """``n``: the limit's constant, else the declared dims of the matrix or of its Range."""
    limit = _scalar(rows.inputs[1])
    if limit is not None:
        return max(limit, 0)
    shape = value.shape
    if shape is not None and len(shape) == 2 and shape[0] == shape[1]:
        found = _named_dim(shape[0])
        if found is not None:
            return found
    counted = rows.outputs[0].shape
    if counted is not None and len(counted) == 1:
        found = _named_dim(counted[0])
        if found is not None:
            return found
    return _dim_read(rows.inputs[1])


def _dim_read(limit: ir.Value | None) -> int | ir.SymbolicDim | None:
    """The dim ``x.shape[i]`` a Range limit reads, as exporters write it; else None.

    ``Squeeze(Shape(x, start=i, end=i+1))`` (dynamo) or ``Gather(Shape(x), i)`` (a scalar
    index), on an ``x`` whose declared dim ``i`` is static or named.
    """
    squeeze = _producer(limit, "Squeeze")
    if squeeze is not None:
        shape = _producer(squeeze.inputs[0], "Shape")
        index = None
    else:
        gather = _producer(limit, "Gather")
        if gather is None or len(gather.inputs) != 2 or "axis" in gather.attributes:
            return None
        shape = _producer(gather.inputs[0], "Shape")
        index = _scalar(gather.inputs[1])
        if shape is not None and (shape.attributes or index is None):
            return None
    source = shape.inputs[0] if shape is not None else None
    dims = source.shape if source is not None else None
    if shape is None or dims is None:
        return None
    rank = len(dims)
    if index is None:  # the one dim Shape's start:end slice keeps
        start, end = shape.attributes.get("start"), shape.attributes.get("end")
        first = start.as_int() if start is not None else 0
        last = end.as_int() if end is not None else rank
        first, last = (min(max(v + rank if v < 0 else v, 0), rank) for v in (first, last))
        if last - first != 1:
            return None
        index = first
    if not -rank <= index < rank:
        return None
    return _named_dim(dims[index])


def range_identity(value: ir.Value | None) -> RangeIdentity | None:
    """What identity ``value`` is, when it is dynamo's Range/Equal identity; else None."""
    if value is None:
        return None
    cast = _producer(value, "Cast")
    dtype = ir.DataType.BOOL
    if cast is not None:
        to = cast.attributes.get("to")
        if to is None or to.type != ir.AttributeType.INT:
            return None
        try:
            dtype = ir.DataType(to.as_int())
        except ValueError:
            return None
    equal = _producer(cast.inputs[0] if cast is not None else value, "Equal")
    ranges = _ranges(equal) if equal is not None else None
    if ranges is None:
        return None
    rows, columns = ranges
    if rows is not columns and rows.inputs[1] is not columns.inputs[1]:
        return None
    size = _size(value, rows)
    return None if size is None else RangeIdentity(size, dtype)
