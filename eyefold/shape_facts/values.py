"""The values of the small tensors exporters compute shapes with, element by element.

Exporters build the shape an EyeLike gets from ``Shape`` and ``Size`` of other tensors,
through Gather, Reshape, Squeeze/Unsqueeze, Slice, Concat, Cast, Expand, scalar arithmetic
and Min/Max. onnx's data propagation follows some of these (not Reshape, not Div, not a
Slice whose ends are computed, not Range): there the shape is lost although every number
in it is known. This module computes those values where they are known: a
:class:`PartialValue` holds a scalar or 1-D tensor's elements, each a number or None
(unknown), read from constants and from the shapes onnx inferred. The evaluators below carry
partial knowledge (a Shape of symbolic dims, a Concat of some known elements); any other
op whose inputs are all known is run by onnx's reference evaluator
(:mod:`eyefold.shape_facts.evaluate`).

Every evaluator computes what the op computes, in the tensor's own element type (integer
division truncates toward zero, as onnx's reference evaluator and onnxruntime do); where a
result could depend on something not modelled here (overflow, a division by zero, a
non-finite float, an index out of range) the element stays unknown. Nothing is guessed:
an unknown stays unknown.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx
from onnx import numpy_helper

from eyefold.core.weightless import LargeTensor
from eyefold.shape_facts.evaluate import evaluate

__all__ = [
    "MAX_ELEMENTS",
    "MAX_ON_DEMAND",
    "PartialValue",
    "ShapeLookup",
    "ValuesOnDemand",
    "from_array",
    "propagate",
]

# Shape values are short: longer tensors are not followed.
MAX_ELEMENTS = 64

Item = int | float | bool | None
ShapeLookup = Callable[[str], "list[int | str | None] | None"]


@dataclasses.dataclass(frozen=True)
class PartialValue:
    """A scalar or 1-D tensor whose elements are known or not (None).

    Attributes:
        dtype: the element type.
        scalar: rank 0 (one element) rather than 1.
        items: the elements, Python numbers or None.
    """

    dtype: np.dtype
    scalar: bool
    items: tuple[Item, ...]

    @property
    def known(self) -> bool:
        """Whether every element is known."""
        return all(item is not None for item in self.items)

    def ints(self) -> list[int] | None:
        """The elements as ints when all are known integers, else None."""
        if not self.known or self.dtype.kind not in "iu":
            return None
        return [int(item) for item in self.items]  # type: ignore[arg-type]

    def array(self) -> np.ndarray:
        """The tensor (every element must be known)."""
        array = np.array(self.items, dtype=self.dtype)
        return array.reshape(()) if self.scalar else array


def from_array(array: np.ndarray) -> PartialValue | None:
    """The value of a small numeric tensor of rank <= 1, else None."""
    if array.ndim > 1 or array.size > MAX_ELEMENTS or array.dtype.kind not in "iufb":
        return None
    items = tuple(
        None if array.dtype.kind == "f" and not math.isfinite(item) else item
        for item in (element.item() for element in array.reshape(-1))
    )
    return PartialValue(array.dtype, array.ndim == 0, items)


def _fits(result: object, dtype: np.dtype) -> Item:
    """``result`` as an element of ``dtype``, or None when it does not fit exactly."""
    if dtype.kind == "b":
        return bool(result)
    if dtype.kind in "iu":
        if isinstance(result, float) and not result.is_integer():
            return None
        info = np.iinfo(dtype)
        value = int(result)  # type: ignore[call-overload]
        return value if info.min <= value <= info.max else None
    value = float(np.array(result, dtype=dtype))
    return value if math.isfinite(value) else None


def _divide(a: Item, b: Item, dtype: np.dtype) -> Item:
    if dtype.kind in "iu":
        if b == 0:
            return None
        quotient = abs(int(a)) // abs(int(b))  # type: ignore[arg-type]
        return quotient if (a < 0) == (b < 0) else -quotient  # type: ignore[operator]
    if b == 0:
        return None
    return float(np.array(a, dtype=dtype) / np.array(b, dtype=dtype))


def _in_dtype(op: Callable[[Item, Item], object]) -> Callable[[Item, Item, np.dtype], Item]:
    """A binary op computed in the element type (floats rounded as the type rounds)."""

    def run(a: Item, b: Item, dtype: np.dtype) -> Item:
        if dtype.kind == "f":
            return op(np.array(a, dtype=dtype), np.array(b, dtype=dtype)).item()  # type: ignore[union-attr]
        return op(a, b)  # type: ignore[return-value]

    return run


_BINARY: dict[str, Callable[[Item, Item, np.dtype], Item]] = {
    "Add": _in_dtype(lambda a, b: a + b),  # type: ignore[operator]
    "Sub": _in_dtype(lambda a, b: a - b),  # type: ignore[operator]
    "Mul": _in_dtype(lambda a, b: a * b),  # type: ignore[operator]
    "Div": _divide,
    "Min": lambda a, b, _: min(a, b),  # type: ignore[type-var]
    "Max": lambda a, b, _: max(a, b),  # type: ignore[type-var]
}
_COMPARE: dict[str, Callable[[Item, Item], bool]] = {
    "Equal": lambda a, b: a == b,
    "Less": lambda a, b: a < b,  # type: ignore[operator]
    "Greater": lambda a, b: a > b,  # type: ignore[operator]
    "LessOrEqual": lambda a, b: a <= b,  # type: ignore[operator]
    "GreaterOrEqual": lambda a, b: a >= b,  # type: ignore[operator]
}
_BOOL = np.dtype(np.bool_)
_INT64 = np.dtype(np.int64)


def _broadcast(parts: Sequence[PartialValue]) -> tuple[int, bool] | None:
    """(length, scalar) of an elementwise result of scalars and 1-D values, or None."""
    length = max(len(p.items) for p in parts)
    if any(len(p.items) not in (1, length) for p in parts):
        return None
    return length, all(p.scalar for p in parts)


def _elementwise(
    parts: Sequence[PartialValue], dtype: np.dtype, fn: Callable[..., Item]
) -> PartialValue | None:
    shape = _broadcast(parts)
    if shape is None:
        return None
    length, scalar = shape
    items: list[Item] = []
    for i in range(length):
        args = [p.items[0 if len(p.items) == 1 else i] for p in parts]
        if any(a is None for a in args):
            items.append(None)
            continue
        try:
            result = fn(*args)
        except (ArithmeticError, ValueError, TypeError):
            result = None
        items.append(None if result is None else _fits(result, dtype))
    return PartialValue(dtype, scalar, tuple(items))


@dataclasses.dataclass
class _Node:
    """What an evaluator sees of one node: its op, attributes, input values and output rank."""

    proto: onnx.NodeProto
    inputs: list[PartialValue | None]
    shape_of: ShapeLookup

    def attr(self, name: str, default: object = None) -> object:
        for attribute in self.proto.attribute:
            if attribute.name == name:
                return onnx.helper.get_attribute_value(attribute)
        return default

    def input_shape(self, index: int) -> list[int | str | None] | None:
        names = self.proto.input
        return self.shape_of(names[index]) if index < len(names) and names[index] else None

    def output_rank(self) -> int | None:
        shape = self.shape_of(self.proto.output[0])
        return None if shape is None else len(shape)


def _constant(node: _Node) -> PartialValue | None:
    for name in ("value_int", "value_ints", "value_float", "value_floats"):
        value = node.attr(name)
        if value is not None:
            dtype = _INT64 if "int" in name else np.dtype(np.float32)
            return from_array(np.array(value, dtype=dtype))
    tensor = node.attr("value")
    if isinstance(tensor, onnx.TensorProto) and math.prod(tensor.dims) <= MAX_ELEMENTS:
        return from_array(numpy_helper.to_array(tensor))
    return None


def _shape(node: _Node) -> PartialValue | None:
    dims = node.input_shape(0)
    if dims is None:
        return None
    rank = len(dims)
    start, end = int(node.attr("start", 0)), int(node.attr("end", rank))  # type: ignore[call-overload]
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    picked = [d if isinstance(d, int) else None for d in dims[start:end]]
    return PartialValue(_INT64, False, tuple(picked))


def _size(node: _Node) -> PartialValue | None:
    dims = node.input_shape(0)
    if dims is None or not all(isinstance(d, int) for d in dims):
        return None
    return PartialValue(_INT64, True, (math.prod(dims),))  # type: ignore[arg-type]


def _same_values(node: _Node) -> PartialValue | None:
    """Reshape, Squeeze, Unsqueeze, Flatten, Identity: the elements, at the output's rank."""
    data = node.inputs[0]
    if data is None:
        return None
    rank = node.output_rank()
    if node.proto.op_type == "Identity":
        return data
    target = node.inputs[1] if len(node.inputs) > 1 else None
    if rank is None and node.proto.op_type == "Reshape" and target is not None:
        rank = len(target.items)
    if rank is None and node.proto.op_type == "Unsqueeze" and data.scalar:
        rank = 1
    if rank is None and node.proto.op_type == "Squeeze" and len(data.items) == 1:
        rank = 0
    if rank not in (0, 1) or (rank == 0 and len(data.items) != 1):
        return None
    return PartialValue(data.dtype, rank == 0, data.items)


def _cast(node: _Node) -> PartialValue | None:
    data, to = node.inputs[0], node.attr("to")
    if data is None or not isinstance(to, int):
        return None
    try:
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(to))
    except (KeyError, TypeError, ValueError):
        return None
    if dtype.kind not in "iufb":
        return None
    if dtype.kind in "iu" and data.dtype.kind == "f":
        return _elementwise([data], dtype, lambda a: math.trunc(a))
    return _elementwise([data], dtype, lambda a: a)


def _gather(node: _Node) -> PartialValue | None:
    data, indices = node.inputs[0], node.inputs[1] if len(node.inputs) > 1 else None
    if data is None or data.scalar or indices is None or node.attr("axis", 0) not in (0, -1):
        return None
    picked = indices.ints()
    length = len(data.items)
    if picked is None or not all(-length <= i < length for i in picked):
        return None
    return PartialValue(data.dtype, indices.scalar, tuple(data.items[i] for i in picked))


def _concat(node: _Node) -> PartialValue | None:
    parts = node.inputs
    if node.attr("axis") not in (0, -1) or any(p is None or p.scalar for p in parts):
        return None
    items = tuple(item for part in parts for item in part.items)  # type: ignore[union-attr]
    return PartialValue(parts[0].dtype, False, items)  # type: ignore[union-attr]


def slice_positions(length: int, start: int, end: int, step: int) -> list[int]:
    """The positions ``Slice`` picks from a 1-D tensor, clamped as the spec says."""
    if step > 0:
        start = min(max(start + length if start < 0 else start, 0), length)
        end = min(max(end + length if end < 0 else end, 0), length)
        return list(range(start, end, step))
    start = min(max(start + length if start < 0 else start, -1), length - 1)
    end = min(max(end + length if end < 0 else end, -1), length - 1)
    return list(range(start, end, step))


def _slice_picks(node: _Node, length: int) -> list[int] | None:
    """The positions a Slice of a 1-D tensor of ``length`` picks, when its bounds are known."""
    given = [v.ints() if v is not None else None for v in node.inputs[1:5]]
    given += [None] * (4 - len(given))
    starts, ends, axes, steps = given
    names = node.proto.input
    axes = axes if len(names) > 3 and names[3] else [0]
    steps = steps if len(names) > 4 and names[4] else [1]
    if starts is None or ends is None:
        return None
    if axes not in ([0], [-1]) or steps is None or len(steps) != 1 or steps[0] == 0:
        return None
    return slice_positions(length, starts[0], ends[0], steps[0])


def _slice(node: _Node) -> PartialValue | None:
    data = node.inputs[0]
    if data is None or data.scalar:
        return None
    positions = _slice_picks(node, len(data.items))
    if positions is None:
        return None
    return PartialValue(data.dtype, False, tuple(data.items[i] for i in positions))


def _gather_picks(node: _Node, dims: tuple[int, ...]) -> tuple[list[int], bool] | None:
    """The flat positions a Gather at known indices picks from a tensor of ``dims``.

    With whether the result is a scalar; None unless the result is a shape value (rank 0
    or 1) and every index is in range.
    """
    indices = node.inputs[1] if len(node.inputs) > 1 else None
    picked = indices.ints() if indices is not None else None
    rank = len(dims)
    axis = int(node.attr("axis", 0))  # type: ignore[call-overload]
    axis = axis + rank if axis < 0 else axis
    if picked is None or indices is None or not 0 <= axis < rank:
        return None
    if not all(-dims[axis] <= i < dims[axis] for i in picked):
        return None
    picked = [i % dims[axis] for i in picked]
    if rank == 1:
        return picked, indices.scalar
    if rank == 2 and indices.scalar:  # a row (axis 0) or a column (axis 1)
        if axis == 0:
            return [picked[0] * dims[1] + j for j in range(dims[1])], False
        return [j * dims[1] + picked[0] for j in range(dims[0])], False
    return None


def _read_large(node: _Node, tensor: LargeTensor) -> PartialValue | None:
    """The few elements a Gather or a Slice with known settings reads of a large tensor.

    Only the positions picked are read (:class:`~eyefold.core.weightless.LargeTensor`).
    """
    op, dims = node.proto.op_type, tensor.dims
    scalar = False
    if op == "Gather":
        found = _gather_picks(node, dims)
        if found is None:
            return None
        positions, scalar = found
    elif op == "Slice" and len(dims) == 1:
        positions = _slice_picks(node, dims[0])
    else:
        return None
    if positions is None or len(positions) > MAX_ELEMENTS:
        return None
    array = tensor.read(np.array(positions, dtype=np.int64))
    if array is None:
        return None
    return from_array(array.reshape(()) if scalar else array)


def _expand(node: _Node) -> PartialValue | None:
    data, shape = node.inputs[0], node.inputs[1] if len(node.inputs) > 1 else None
    target = shape.ints() if shape is not None else None
    if data is None or target is None or len(target) > 1:
        return None
    if not target:  # Expand to shape (): the data as it is
        return data
    have, want = len(data.items), target[0]
    if data.scalar or have == 1:
        length = want if want >= 0 else -1  # a scalar or [1] broadcasts to any length
    else:
        length = have if want in (1, have) else -1
    if length < 0 or length > MAX_ELEMENTS:
        return None
    items = data.items * length if have == 1 else data.items
    return PartialValue(data.dtype, False, items)


def _constant_of_shape(node: _Node) -> PartialValue | None:
    shape = node.inputs[0]
    target = shape.ints() if shape is not None else None
    if target is None or len(target) > 1 or (target and not 0 <= target[0] <= MAX_ELEMENTS):
        return None
    tensor = node.attr("value")
    fill = numpy_helper.to_array(tensor) if isinstance(tensor, onnx.TensorProto) else None
    fill = np.zeros(1, np.float32) if fill is None else fill.reshape(-1)
    count = target[0] if target else 1
    return PartialValue(fill.dtype, not target, (fill[0].item(),) * count)


def _arithmetic(node: _Node) -> PartialValue | None:
    op = node.proto.op_type
    parts = node.inputs
    if not parts or any(p is None for p in parts):
        return None
    if op in _BINARY:
        dtype = parts[0].dtype  # type: ignore[union-attr]
        fn = _BINARY[op]
        if len(parts) == 1:
            return parts[0]
        if len(parts) > 2 and op not in ("Min", "Max"):
            return None
        return _elementwise(parts, dtype, lambda *args: _fold(fn, args, dtype))  # type: ignore[arg-type]
    if op in _COMPARE:
        return _elementwise(parts, _BOOL, _COMPARE[op])  # type: ignore[arg-type]
    if op == "Where" and len(parts) == 3:
        return _elementwise(parts, parts[1].dtype, lambda c, a, b: a if c else b)  # type: ignore[union-attr]
    unary = {"Neg": lambda a: -a, "Abs": abs, "Not": lambda a: not a}
    if op in unary and len(parts) == 1:
        return _elementwise(parts, parts[0].dtype, unary[op])  # type: ignore[arg-type, union-attr]
    return None


def _fold(fn: Callable[[Item, Item, np.dtype], Item], args: Sequence[Item], dtype: np.dtype):
    result = args[0]
    for arg in args[1:]:
        result = fn(result, arg, dtype)
        if result is None:
            return None
    return result


EVALUATORS: dict[str, Callable[[_Node], PartialValue | None]] = {
    "Constant": _constant,
    "Shape": _shape,
    "Size": _size,
    "Cast": _cast,
    "Gather": _gather,
    "Concat": _concat,
    "Slice": _slice,
    "Expand": _expand,
    "ConstantOfShape": _constant_of_shape,
    **dict.fromkeys(("Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity"), _same_values),
    **dict.fromkeys((*_BINARY, *_COMPARE, "Where", "Neg", "Abs", "Not"), _arithmetic),
}


def _evaluated(
    proto: onnx.NodeProto, inputs: Sequence[PartialValue | None], opset: int
) -> list[PartialValue | None]:
    """``proto``'s outputs computed by onnx's reference, when every input is known."""
    arrays: list[np.ndarray | None] = []
    for name, value in zip(proto.input, inputs, strict=True):
        if name and (value is None or not value.known):
            return []
        arrays.append(value.array() if value is not None else None)
    found = evaluate(proto, arrays, opset, max_elements=MAX_ELEMENTS) or []
    return [None if array is None else from_array(array) for array in found]


def _outputs(
    proto: onnx.NodeProto,
    inputs: list[PartialValue | None],
    shape_of: ShapeLookup,
    opset: int,
    large: Mapping[str, LargeTensor],
) -> list[tuple[str, PartialValue]]:
    """The values of ``proto``'s outputs that are computed from its inputs' values."""
    if proto.domain not in ("", "ai.onnx"):
        return []
    single = len(proto.output) == 1
    if proto.input and proto.input[0] in large and single:
        read = _read_large(_Node(proto, inputs, shape_of), large[proto.input[0]])
        if read is not None:
            return [(proto.output[0], read)]
    evaluator = EVALUATORS.get(proto.op_type)
    if evaluator is not None and single:
        found = evaluator(_Node(proto, inputs, shape_of))
        if found is not None and len(found.items) <= MAX_ELEMENTS:
            return [(proto.output[0], found)]
    if proto.op_type == "Constant":
        return []
    computed = zip(proto.output, _evaluated(proto, inputs, opset), strict=False)
    return [(name, value) for name, value in computed if name and value is not None]


def propagate(
    nodes: Sequence[onnx.NodeProto],
    constants: Mapping[str, PartialValue],
    shape_of: ShapeLookup,
    *,
    opset: int | None = None,
    large: Mapping[str, LargeTensor] | None = None,
) -> dict[str, PartialValue]:
    """The value of every output the evaluators compute, in one pass over sorted ``nodes``.

    A node no evaluator computes, whose inputs are all known, is run as onnx's reference
    evaluator runs it (:mod:`eyefold.shape_facts.evaluate`).

    Args:
        nodes: the graph's nodes, in topological order (default domain only count).
        constants: values already known (small initializers), by name.
        shape_of: a value's inferred dims (ints, names, None) or None when unknown.
        opset: the model's default-domain opset (None: the newest onnx knows).
        large: the tensors the slice left out (typed inputs there), by name: a Gather or
            a Slice of one gets the few elements it reads.
    """
    opset = opset or onnx.defs.onnx_opset_version()
    values = dict(constants)
    for proto in nodes:
        inputs = [values.get(name) if name else None for name in proto.input]
        values.update(_outputs(proto, inputs, shape_of, opset, large or {}))
    return values


# The most nodes one :class:`ValuesOnDemand` computes: a walk reads short shape chains.
MAX_ON_DEMAND = 4096


class ValuesOnDemand:
    """The values :func:`propagate` finds, computed only for the names asked for.

    A walk back from one value reads a few Reshape targets, Gather indices and Slice
    bounds of a graph that may be long: each is computed from its producers, and only
    values the shapes say are small (rank 0 or 1, at most :data:`MAX_ELEMENTS`) are
    followed further back.
    """

    def __init__(
        self,
        producer: Mapping[str, onnx.NodeProto],
        constant: Callable[[str], PartialValue | None],
        shape_of: ShapeLookup,
        *,
        opset: int | None = None,
    ) -> None:
        self._producer = producer
        self._constant = constant
        self._shape_of = shape_of
        self._opset = opset or onnx.defs.onnx_opset_version()
        self._found: dict[str, PartialValue | None] = {}
        self._budget = MAX_ON_DEMAND

    def _small(self, name: str) -> bool:
        dims = self._shape_of(name)
        if dims is None:
            return True  # unknown: may be a shape value
        return (
            len(dims) <= 1
            and all(isinstance(d, int) for d in dims)
            and (
                not dims or dims[0] <= MAX_ELEMENTS  # type: ignore[operator]
            )
        )

    def get(self, name: str) -> PartialValue | None:
        """``name``'s value, or None when it is not known (or too far to compute)."""
        stack, visiting = [name], set[str]()
        while stack:
            current = stack[-1]
            if current in self._found:
                stack.pop()
                continue
            node = self._producer.get(current)
            if node is None or not self._small(current) or self._budget <= 0:
                self._found[current] = None if node is not None else self._constant(current)
                stack.pop()
                continue
            missing = [n for n in node.input if n and n not in self._found]
            if missing and current not in visiting:
                visiting.add(current)
                stack.extend(missing)
                continue  # come back once they are known (a cycle leaves them unknown)
            self._budget -= 1
            inputs = [self._found.get(n) if n else None for n in node.input]
            computed = dict(_outputs(node, inputs, self._shape_of, self._opset, {}))
            for output in node.output:
                self._found[output] = computed.get(output)
            stack.pop()
        return self._found[name]
