"""Facts the EyeLike rules share: the opset in force, square dims, identity operands.

Every helper only reads the graph; the rules stay stateless and decide everything from the
values bound by their pattern.
"""

from __future__ import annotations

import onnx_ir as ir

from eyefold.core.constants import constant_tensor, is_identity_array
from eyefold.core.domains import DEFAULT_DOMAINS, default_opset
from eyefold.core.eyelike_types import allowed_types
from eyefold.core.metadata_keys import LEGALIZED_FOR_KEY, RULE_FACTS_KEY
from eyefold.core.range_identity import range_identity
from eyefold.core.shapes import merge_shapes

__all__ = [
    "INT64_MIN",
    "adopt_shape",
    "eyelike_attributes",
    "eyelike_dtype",
    "eyelike_k",
    "identity_operand",
    "known_dtype",
    "known_shape",
    "legalized_for",
    "same_dim",
    "scope_opset",
    "shapes_agree",
    "square_dim",
    "valid_eyelike_type",
]

# k = INT64_MIN has no int64 negation, so the transpose rule leaves it alone.
INT64_MIN = -(2**63)


def scope_opset(graph_or_function: ir.Graph | ir.Function, model: ir.Model) -> int | None:
    """The default-domain opset in force in a graph or function.

    A function has its own imports; the main graph and subgraphs (If/Loop/Scan bodies,
    which import nothing themselves) use the model's.
    """
    if isinstance(graph_or_function, ir.Function):
        return default_opset(graph_or_function.opset_imports, model.opset_imports)
    return default_opset(model.opset_imports)


def known_shape(value: ir.Value) -> ir.Shape | None:
    """The value's shape, else what eyefold's inference found for the rules (never saved)."""
    if value.shape is not None:
        return value.shape
    return value.meta.get(RULE_FACTS_KEY, (None, None))[1]


def known_dtype(value: ir.Value) -> ir.DataType | None:
    """The value's element type, else what eyefold's inference found for the rules."""
    if value.dtype is not None:
        return value.dtype
    return value.meta.get(RULE_FACTS_KEY, (None, None))[0]


def legalized_for(node: ir.Node | None) -> str | None:
    """The runtime an EyeLike was legalized for (its Casts are deliberate), or None."""
    return None if node is None else node.metadata_props.get(LEGALIZED_FOR_KEY)


def valid_eyelike_type(dtype: int | ir.DataType | None, opset: int | None) -> bool:
    """True when ``dtype`` is an EyeLike input/output type at ``opset`` (bfloat16: 22+)."""
    if dtype is None:
        return False
    try:
        return ir.DataType(dtype) in allowed_types(opset)
    except ValueError:
        return False


def same_dim(a: int | ir.SymbolicDim, b: int | ir.SymbolicDim) -> bool:
    """True when two dims are provably equal: the same int or the same named symbol."""
    if isinstance(a, int) or isinstance(b, int):
        return isinstance(a, int) and isinstance(b, int) and a == b
    return a.value is not None and a.value == b.value


def shapes_agree(a: ir.Value, b: ir.Value) -> bool:
    """False when the known shapes of ``a`` and ``b`` contradict each other.

    A rank or a static dim that differs is a contradiction; unknown parts are not.
    """
    if a.shape is None or b.shape is None:
        return True
    if len(a.shape) != len(b.shape):
        return False
    return all(
        not (isinstance(p, int) and isinstance(q, int)) or p == q
        for p, q in zip(a.shape.dims, b.shape.dims, strict=True)
    )


def square_dim(value: ir.Value | None) -> int | ir.SymbolicDim | None:
    """``n`` when ``value`` is known to be an ``n x n`` matrix, else None."""
    if value is None or value.shape is None or len(value.shape) != 2:
        return None
    rows, cols = value.shape.dims
    return rows if same_dim(rows, cols) else None


def _int_attribute(node: ir.Node, name: str) -> int | None:
    attribute = node.attributes.get(name)
    if attribute is None or attribute.type != ir.AttributeType.INT:
        return None
    return attribute.as_int()


def eyelike_k(node: ir.Node) -> int | None:
    """The diagonal offset of an EyeLike node (None when the attribute is malformed)."""
    if "k" not in node.attributes:
        return 0
    return _int_attribute(node, "k")


def eyelike_dtype(node: ir.Node) -> ir.DataType | None:
    """The output element type of an EyeLike node: its ``dtype``, else its input's.

    None when unknown or invalid; the fold and infer passes report invalid ones.
    """
    if "dtype" in node.attributes:
        code = _int_attribute(node, "dtype")
        try:
            return ir.DataType(code) if code is not None else None
        except ValueError:
            return None
    source = node.inputs[0] if node.inputs else None
    return source.dtype if source is not None else None


def eyelike_attributes(k: int, dtype: ir.DataType | None) -> dict[str, int]:
    """Attributes for a new EyeLike node, leaving out the defaults (k=0, no dtype)."""
    attributes: dict[str, int] = {}
    if k:
        attributes["k"] = k
    if dtype is not None:
        attributes["dtype"] = int(dtype)
    return attributes


def identity_operand(
    value: ir.Value | None,
) -> tuple[int | ir.SymbolicDim, ir.DataType] | None:
    """``(n, dtype)`` when ``value`` is exactly the ``n x n`` identity matrix, else None.

    That is an EyeLike with k=0 on a square input, dynamo's Range/Equal identity
    (:mod:`eyefold.core.range_identity`), or a constant (initializer or Constant node)
    whose values are the identity. A constant's shape and type are checked before any of
    its data is read.
    """
    if value is None:
        return None
    built = range_identity(value)
    if built is not None:
        return built.size, built.dtype
    producer = value.producer()
    if producer is not None and producer.op_type == "EyeLike":
        if producer.domain not in DEFAULT_DOMAINS or eyelike_k(producer) != 0:
            return None
        size = square_dim(producer.inputs[0])
        dtype = eyelike_dtype(producer)
        if size is None or dtype is None:
            return None
        return size, dtype
    tensor = constant_tensor(value)
    if tensor is None or len(tensor.shape) != 2 or not tensor.shape.is_static():
        return None
    rows, cols = tensor.shape.dims
    if rows != cols or not is_identity_array(tensor.numpy()):
        return None
    return int(rows), tensor.dtype


def adopt_shape(target: ir.Value, known: ir.Value) -> None:
    """Records on ``target`` the shape ``known`` has, where ``target``'s is less specific.

    Only for values a shape-preserving op maps one onto the other, and never on a graph
    input or initializer, whose declared shape is the model's interface.
    """
    if target.is_graph_input() or target.is_initializer() or known.shape is None:
        return
    merged = merge_shapes(target.shape, known.shape.dims)
    if merged is not None:
        target.shape = merged
