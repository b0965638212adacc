"""ReduceSum(Mul(x, mask)) over one axis of an EyeLike mask: the shared matching logic.

Both torch exporters compute ``torch.diagonal`` as a masked sum: the input, its two
diagonal dims moved last, times an EyeLike mask of those two dims, summed over one of
them. That reads and multiplies every element (O(rows x cols) per matrix) to keep
min(rows, cols) of them. The sum over the mask's rows gives, at column ``j``,
``x[j - k, j]`` (zero where ``j - k`` is outside the rows); the sum over its columns gives,
at row ``i``, ``x[i, i + k]`` (zero outside the columns). The replacement reads only the
diagonal: the two dims are flattened into one (a Reshape, which copies nothing) and a
Slice with step ``cols + 1`` picks the ``L`` diagonal elements; a Pad adds the zeros the
sum had at the positions the diagonal does not reach, so the value replaced keeps its
shape and every later node (the exporter's Slice or GatherND) reads what it read before.

The mask may also be dynamo's Range/Equal identity (:mod:`eyefold.core.range_identity`),
which is what dynamo exports ``(x * torch.eye(x.shape[-1])).sum(-1)`` with: an EyeLike
with k=0 whose rows and cols are its size, under the same conditions.

``diagonal_int`` (exact) and ``diagonal_float`` (relaxed) differ only in the element
types they accept; both subclass :class:`MaskedSumDiagonalBase`.
"""

from __future__ import annotations

from typing import ClassVar

import onnx_ir as ir

from eyefold.core.domains import DEFAULT_DOMAINS
from eyefold.core.eyelike_types import EYELIKE_TYPES_OPSET_22
from eyefold.core.range_identity import RangeIdentity, range_identity
from eyefold.core.rule_spec import (
    Exactness,
    MatchResult,
    Mismatch,
    Phase,
    Reach,
    RuleSpec,
    match_result,
)
from eyefold.rules._common import (
    eyelike_k,
    known_dtype,
    known_shape,
    legalized_for,
    same_dim,
    scope_opset,
)
from eyefold.rules._diagonal_build import MaskedDiagonal, build_diagonal

__all__ = [
    "FLOAT_TYPES",
    "INTEGER_TYPES",
    "MIN_OPSET",
    "MaskedSumDiagonalBase",
    "diagonal_spec",
    "masked_diagonal",
    "shape_items",
]

# Reshape's allowzero (opset 14) keeps a zero-size matrix flattenable: without it a 0 in the
# target shape would copy the input's dim instead.
MIN_OPSET = 14
# The Mul element types each rule takes: those an EyeLike mask can be cast to.
INTEGER_TYPES = frozenset(t for t in EYELIKE_TYPES_OPSET_22 if t.is_integer())
FLOAT_TYPES = frozenset(t for t in EYELIKE_TYPES_OPSET_22 if t.is_floating_point())
# Ops that keep every dim of their (first) input where it is; a dim read from their output
# is the same dim of their input.
_SAME_SHAPE_OPS = frozenset({"Cast", "CastLike", "Identity"})

# Root: the ReduceSum after Mul(data, mask), the mask read through a Cast, CastLike or
# Identity; the data side's shape chain is read too, beyond the EyeLike's neighbourhood.
# The EyeLike's own consumer is the Mul, or the Cast or CastLike the mask is read through.
_PHASE: Phase = "before-fold"
_REACH = Reach(
    frozenset({"Mul", "Cast", "CastLike"}),
    depth=3,
    replaces=_SAME_SHAPE_OPS,
    reads_operands=frozenset({"Mul"}),
)

# A dim of a shape: a number, a dim of a value (value, axis), or a named symbol.
Item = int | ir.SymbolicDim | tuple[ir.Value, int]


def _int_constant(value: ir.Value | None) -> list[int] | None:
    """The integers of a constant int tensor or Constant(value_int[s]) (rank <= 1)."""
    if value is None or value.is_graph_input():  # a graph input's initializer: a default
        return None
    if value.const_value is not None:
        array = value.const_value.numpy()
        return [int(v) for v in array.reshape(-1)] if array.ndim <= 1 else None
    node = value.producer()
    if node is None or node.op_type != "Constant" or node.domain not in DEFAULT_DOMAINS:
        return None
    for name, attribute in node.attributes.items():
        if name == "value_int":
            return [attribute.as_int()]
        if name == "value_ints":
            return list(attribute.as_ints())
        if name == "value" and attribute.type == ir.AttributeType.TENSOR:
            array = attribute.as_tensor().numpy()
            if array.ndim <= 1 and array.dtype.kind in "iu":
                return [int(v) for v in array.reshape(-1)]
    return None


def _rank(value: ir.Value | None) -> int | None:
    """The rank of ``value``: its shape's, else what a Transpose, Cast or Identity keeps."""
    for _ in range(4):
        if value is None:
            return None
        if (shape := known_shape(value)) is not None:
            return len(shape)
        node = value.producer()
        if node is None or node.domain not in DEFAULT_DOMAINS:
            return None
        if node.op_type == "Transpose" and node.attributes.get_ints("perm") is not None:
            return len(node.attributes.get_ints("perm"))
        if node.op_type not in _SAME_SHAPE_OPS:
            return None
        value = node.inputs[0]
    return None


def _element_type(value: ir.Value | None) -> ir.DataType | None:
    """The element type of ``value``, read through Transpose, Identity and Cast."""
    for _ in range(4):
        if value is None or known_dtype(value) is not None:
            return None if value is None else known_dtype(value)
        node = value.producer()
        if node is None or node.domain not in DEFAULT_DOMAINS:
            return None
        if node.op_type == "Cast":
            to = node.attributes.get_int("to")
            return ir.DataType(to) if to is not None else None
        if node.op_type not in ("Transpose", "Identity"):
            return None
        value = node.inputs[0]
    return None


def _shape_items(node: ir.Node) -> list[Item] | None:
    """``Shape(src, start?, end?)`` as (src, axis) items."""
    source, rank = node.inputs[0], _rank(node.inputs[0])
    if source is None or rank is None:
        return None
    start = node.attributes.get_int("start", 0)
    end = node.attributes.get_int("end", rank)
    axes = range(rank)[slice(start, end)]
    return [(source, axis) for axis in axes]


def shape_items(value: ir.Value | None, depth: int = 8) -> list[Item] | None:
    """The elements of a 1-D int64 shape tensor: ints, or (value, axis) for a dim of value.

    Follows what exporters build shapes with (Shape, Gather, Reshape, Unsqueeze, Squeeze,
    Concat, Cast, Identity); None for anything else.
    """
    if value is None or depth == 0:
        return None
    constant = _int_constant(value)
    if constant is not None:
        return list(constant)
    node = value.producer()
    if node is None or node.domain not in DEFAULT_DOMAINS:
        return None
    op = node.op_type
    if op == "Shape":
        return _shape_items(node)
    if op in ("Reshape", "Unsqueeze", "Squeeze", "Cast", "Identity"):
        return shape_items(node.inputs[0], depth - 1)
    if op == "Concat":
        parts = [shape_items(v, depth - 1) for v in node.inputs]
        return None if any(p is None for p in parts) else [i for p in parts for i in p]
    if op == "Gather" and node.attributes.get_int("axis", 0) == 0 and len(node.inputs) == 2:
        data, indices = shape_items(node.inputs[0], depth - 1), _int_constant(node.inputs[1])
        if data is None or indices is None:
            return None
        if not all(-len(data) <= i < len(data) for i in indices):
            return None
        return [data[i] for i in indices]
    return None


def _aliases(value: ir.Value, axis: int) -> list[tuple[ir.Value, int]]:
    """(value, axis) and the same dim seen further up through Transpose, Cast, Identity."""
    found = [(value, axis)]
    for _ in range(4):
        node = value.producer()
        if node is None or node.domain not in DEFAULT_DOMAINS or node.inputs[0] is None:
            break
        if node.op_type == "Transpose":
            perm = node.attributes.get_ints("perm")
            if perm is None or not 0 <= axis < len(perm):
                break
            axis = perm[axis]
        elif node.op_type not in _SAME_SHAPE_OPS:
            break
        value = node.inputs[0]
        found.append((value, axis))
    return found


def _dim_of(value: ir.Value, axis: int) -> int | ir.SymbolicDim | None:
    shape = known_shape(value)
    if shape is None or not 0 <= axis < len(shape):
        return None
    return shape[axis]


def _same_dim(item: Item, target: ir.Value, axis: int) -> bool:
    """True when ``item`` provably equals dim ``axis`` of ``target``."""
    for value, index in _aliases(target, axis):
        known = _dim_of(value, index)
        if isinstance(item, int | ir.SymbolicDim):
            if known is not None and same_dim(known, item):
                return True
            continue
        if item[0] is value and item[1] == index:
            return True
        other = _dim_of(*item)
        if known is not None and other is not None and same_dim(known, other):
            return True
    return False


def _mask_eyelike(mask: ir.Value) -> ir.Node | RangeIdentity | str:
    """The EyeLike or Range identity behind the mask operand, or why not.

    Read through one Cast or CastLike; dynamo's Range/Equal identity
    (:mod:`eyefold.core.range_identity`) is an EyeLike with k=0 of its size.
    """
    for _ in range(2):
        found = range_identity(mask)
        if found is not None:
            if len(mask.uses()) != 1 or mask.is_graph_output():
                return "the mask is used twice; the rule rewrites only a mask it removes"
            return found
        node = mask.producer()
        if node is None or node.op_type not in ("Cast", "CastLike") or node.inputs[0] is None:
            break
        if len(mask.uses()) != 1:
            return "the mask is used twice; the rule rewrites only a mask it removes"
        mask = node.inputs[0]
    node = mask.producer()
    if node is None or node.op_type != "EyeLike" or node.domain not in DEFAULT_DOMAINS:
        return Mismatch("no EyeLike mask")
    if len(mask.uses()) != 1 or mask.is_graph_output():
        return "the mask is used twice; the rule rewrites only a mask it removes"
    return node


def _mask_items(eye: ir.Node) -> list[Item] | None:
    """The mask's (rows, cols) as shape items: its ConstantOfShape's shape, or its input's."""
    source = eye.inputs[0]
    if source is None:
        return None
    node = source.producer()
    if node is not None and node.op_type == "ConstantOfShape":
        return shape_items(node.inputs[0])
    return [(source, 0), (source, 1)]


def _reduced_axis(total: ir.Value, rank: int) -> int | str:
    node = total.producer()
    assert node is not None
    if node.attributes.get_int("keepdims", 1) != 0:
        return "ReduceSum keeps the reduced dim (keepdims=1)"
    axes = node.attributes.get_ints("axes")
    if axes is None:
        axes = _int_constant(node.inputs[1]) if len(node.inputs) > 1 else None
    if axes is None or len(axes) != 1 or not -rank <= axes[0] < rank:
        return "ReduceSum does not sum over exactly one constant axis"
    axis = axes[0] % rank
    if axis < rank - 2:
        return f"ReduceSum sums over axis {axis}, not one of the mask's dims"
    return axis


def _look_through(
    operand: ir.Value, rank: int, mul_type: ir.DataType
) -> tuple[ir.Value, tuple[int, int], ir.DataType | None]:
    """Where the diagonal is read: the Mul operand, or what its Transpose and Cast read.

    A Transpose that moved two adjacent dims last (the others in order) and a Cast to the
    Mul's type both commute with picking elements, so the diagonal is read before them.
    """
    source, dims, cast_to = operand, (rank - 2, rank - 1), None
    node = source.producer()
    if node is not None and node.op_type == "Transpose" and node.domain in DEFAULT_DOMAINS:
        perm = node.attributes.get_ints("perm")
        if perm is not None and len(perm) == rank:
            d1, d2 = perm[-2], perm[-1]
            rest = [a for a in range(rank) if a not in (d1, d2)]
            if list(perm[:-2]) == rest and abs(d1 - d2) == 1 and node.inputs[0] is not None:
                source, dims = node.inputs[0], (d1, d2)
    node = source.producer()
    if (
        node is not None
        and node.op_type == "Cast"
        and node.domain in DEFAULT_DOMAINS
        and node.attributes.get_int("to") == mul_type
        and node.inputs[0] is not None
    ):
        source, cast_to = node.inputs[0], mul_type
    return source, dims, cast_to


def masked_diagonal(
    a: ir.Value, b: ir.Value, total: ir.Value, dtypes: frozenset[ir.DataType]
) -> MaskedDiagonal | str:
    """The masked diagonal ``total = ReduceSum(Mul(a, b))`` reads, or why it is none."""
    reasons = []
    for data, mask in ((a, b), (b, a)):
        eye = _mask_eyelike(mask)
        if isinstance(eye, str):
            reasons.append(eye)
            continue
        if isinstance(eye, RangeIdentity):
            k: int | None = 0
            items: list[Item] | None = [eye.size, eye.size]
        else:
            if (runtime := legalized_for(eye)) is not None:
                return f"the mask was legalized for {runtime}"
            k, items = eyelike_k(eye), _mask_items(eye)
        rank = _rank(data)
        if k is None or rank is None or rank < 2:
            return "the mask's k or the data's rank is unknown"
        mul_type = _element_type(data) or total.dtype
        if mul_type not in dtypes:
            if mul_type is None:
                return "the element type of the data is unknown"
            return Mismatch(f"element type {mul_type.name} is not one this rule handles")
        if items is None or len(items) != 2:
            return "the mask's shape is not known to be two dims of the data"
        if not (_same_dim(items[0], data, rank - 2) and _same_dim(items[1], data, rank - 1)):
            return "the mask's dims are not provably the data's last two dims"
        axis = _reduced_axis(total, rank)
        if isinstance(axis, str):
            return axis
        source, dims, cast_to = _look_through(data, rank, mul_type)
        return MaskedDiagonal(source, dims, rank, k, axis == rank - 2, cast_to)
    joined = "; ".join(dict.fromkeys(reasons))
    return Mismatch(joined) if all(isinstance(r, Mismatch) for r in reasons) else joined


class MaskedSumDiagonalBase:
    """ReduceSum(Mul(x, EyeLike mask)) -> the mask's diagonal of x, padded as the sum was."""

    DTYPES: ClassVar[frozenset[ir.DataType]] = frozenset()

    def pattern(self, op, a, b):
        """A ReduceSum of a Mul; check() finds the EyeLike mask on either side."""
        product = op.Mul(a, b)
        return op.ReduceSum(
            product, _allow_other_inputs=True, _allow_other_attributes=True, _outputs=["total"]
        )

    def check(self, context, a: ir.Value, b: ir.Value, total: ir.Value) -> MatchResult:
        """Accepts a sum over one dim of an EyeLike mask that covers the data's last dims."""
        result = match_result()
        masked = masked_diagonal(a, b, total, self.DTYPES)
        if isinstance(masked, Mismatch):  # another pattern, or the other rule's types
            return result.fail(masked)
        opset = scope_opset(context.graph_or_function, context.model)
        if opset is None or opset < MIN_OPSET:
            return result.fail(f"opset {opset} is below {MIN_OPSET} (Reshape allowzero)")
        if isinstance(masked, str):
            return result.fail(masked)
        return result

    def rewrite(self, op, a: ir.Value, b: ir.Value, total: ir.Value) -> ir.Value:
        """The strided-Slice diagonal, padded with zeros to the sum's length."""
        masked = masked_diagonal(a, b, total, self.DTYPES)
        assert not isinstance(masked, str)  # check() accepted it
        result = build_diagonal(op, masked)
        result.type, result.shape = total.type, total.shape
        return result


def diagonal_spec(
    module_name: str,
    module_doc: str | None,
    rule_class: type,
    exactness: Exactness,
    element_type: str,
) -> RuleSpec:
    """The spec of one masked-sum diagonal rule: phase and reach are the family's.

    Its firing model is dynamo's ``torch.diagonal(x, 1, 1, 2)`` on a rank-3 ``x`` of
    ``element_type`` (ONNX text's name), node for node as onnxscript's torch_lib
    aten_diagonal traces it.
    """
    firing_model = f"""<ir_version: 10, opset_import: ["" : 22]>
agraph ({element_type}[b, r, c] x) => (y) {{
    neg_1 = Constant<value_ints=[-1]>()
    i1 = Constant<value_int=1>()
    shape1 = Shape(x)
    g1 = Gather(shape1, i1)
    dim1_size = Reshape(g1, neg_1)
    i2 = Constant<value_int=2>()
    shape2 = Shape(x)
    g2 = Gather(shape2, i2)
    dim2_size = Reshape(g2, neg_1)
    mask_shape = Concat<axis=0>(dim1_size, dim2_size)
    zeros = ConstantOfShape(mask_shape)
    mask = EyeLike<k=1>(zeros)
    masklike = CastLike(mask, x)
    xt = Transpose<perm=[0, 1, 2]>(x)
    prod = Mul(xt, masklike)
    axes = Constant<value_ints=[1]>()
    summed = ReduceSum<keepdims=0>(prod, axes)
    min_dim_size = Min(dim1_size, dim2_size)
    offset_val = Constant<value_ints=[1]>()
    length0 = Sub(dim2_size, offset_val)
    start = Identity(offset_val)
    zero = Constant<value_ints=[0]>()
    shorter = Min(length0, min_dim_size)
    length = Max(shorter, zero)
    end = Add(start, length)
    y = Slice(summed, start, end, axes)
}}"""
    return RuleSpec.declare(
        module_name,
        module_doc,
        rule_class,
        exactness=exactness,
        phase=_PHASE,
        reach=_REACH,
        firing_model=firing_model,
    )
