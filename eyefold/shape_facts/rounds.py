"""onnx's data-propagating inference, with the shape values it stops at computed in between.

onnx's inference (the engine eyefold trusts for tensor shapes) loses a shape where a
shape-computing op it does not propagate data through sits in the chain: a Reshape or a
scalar Gather of a Shape (dynamo's ``Shape -> Gather -> Reshape([1]) -> Concat``), a Slice
whose ends come from a Div, a Range. There every number is known, but onnx treats the
result as unknown data, so the Reshape, Slice, Range or ConstantOfShape after it gets no
static shape. Between rounds of onnx's inference :func:`infer_with_values` computes those
values (:mod:`eyefold.shape_facts.values`) and writes each one that is fully known into
the (throwaway) model as a constant, in place of the node that computed it; the next round
then sees a constant and infers the shapes that follow. Rounds stop when the targets are
static or a round learns nothing new.

The model handed in is a weightless slice eyefold built for onnx (no weights, only the
nodes the targets depend on); it is changed in place.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import onnx
from onnx import numpy_helper

from eyefold.core.weightless import LargeTensor
from eyefold.shape_facts.values import PartialValue, from_array, propagate

__all__ = [
    "MAX_ROUNDS",
    "Inference",
    "dims_of",
    "infer_with_values",
    "shape_table",
    "small_constants",
]

# Each round replaces at least one node by a constant; real chains need two to four.
MAX_ROUNDS = 16

Dims = list[int | str | None]


@dataclasses.dataclass
class Inference:
    """What the rounds found.

    Attributes:
        model: the last round's inferred model (value_info holds the shapes).
        shapes: the dims of every value the last round typed, by name (only the
            targets' when they all came out static).
        values: the shape values computed in the last round, by name (none when the
            targets came out static).
        rounds: how many rounds of onnx's inference ran.
        computed: the values eyefold computed and wrote as constants, in order.
    """

    model: onnx.ModelProto
    shapes: dict[str, Dims]
    values: dict[str, PartialValue]
    rounds: int
    computed: list[str] = dataclasses.field(default_factory=list)


def dims_of(type_proto: onnx.TypeProto) -> Dims | None:
    """The dims a type declares (ints, names, None), or None when it declares no shape."""
    tensor = type_proto.tensor_type
    if not type_proto.HasField("tensor_type") or not tensor.HasField("shape"):
        return None
    return [
        d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
        for d in tensor.shape.dim
    ]


def shape_table(graph: onnx.GraphProto) -> dict[str, Dims]:
    """The dims of every value of ``graph`` that has a shape (inputs, value_info, outputs)."""
    table: dict[str, Dims] = {t.name: list(t.dims) for t in graph.initializer}
    for info in [*graph.input, *graph.value_info, *graph.output]:
        dims = dims_of(info.type)
        if dims is not None:
            table[info.name] = dims
    return table


def _target_dims(graph: onnx.GraphProto, targets: set[str]) -> dict[str, Dims]:
    """The dims of the targets only: the common case, every target static, reads no more."""
    table: dict[str, Dims] = {}
    for info in [*graph.value_info, *graph.output]:
        if info.name in targets and (dims := dims_of(info.type)) is not None:
            table[info.name] = dims
    return table


def _static(shapes: dict[str, Dims], name: str) -> bool:
    dims = shapes.get(name)
    return dims is not None and all(isinstance(d, int) for d in dims)


def small_constants(graph: onnx.GraphProto) -> dict[str, PartialValue]:
    """The values of ``graph``'s initializers small enough to be shape values."""
    found: dict[str, PartialValue] = {}
    for tensor in graph.initializer:
        if len(tensor.dims) <= 1 and (not tensor.dims or tensor.dims[0] <= 64):
            value = from_array(numpy_helper.to_array(tensor))
            if value is not None:
                found[tensor.name] = value
    return found


def _read_where_unknown(inferred: onnx.GraphProto, shapes: dict[str, Dims]) -> set[str]:
    """What the nodes with an output of no static shape read.

    Only there does a known value written as a constant let onnx's next round infer more.
    """
    read: set[str] = set()
    for node in inferred.node:
        if any(name and not _static(shapes, name) for name in node.output):
            read.update(node.input)
    return read


def _write_constants(
    graph: onnx.GraphProto, values: dict[str, PartialValue], keep: set[str], useful: set[str]
) -> list[str]:
    """Replaces nodes whose one output is fully known (and ``useful``) by initializers."""
    written: list[str] = []
    kept: list[onnx.NodeProto] = []
    for node in graph.node:
        outputs = list(node.output)
        value = values.get(outputs[0]) if len(outputs) == 1 else None
        if (
            value is None
            or not value.known
            or node.op_type == "Constant"
            or outputs[0] in keep
            or outputs[0] not in useful
            or node.domain not in ("", "ai.onnx")
        ):
            kept.append(node)
            continue
        graph.initializer.append(numpy_helper.from_array(value.array(), outputs[0]))
        written.append(outputs[0])
    if written:
        del graph.node[:]
        graph.node.extend(kept)
    return written


def infer_with_values(
    model: onnx.ModelProto,
    targets: list[str],
    *,
    max_rounds: int = MAX_ROUNDS,
    large: Mapping[str, LargeTensor] | None = None,
) -> Inference:
    """Infers the shapes of ``targets`` (main-graph values); ``model`` is changed in place.

    Between rounds of onnx's inference, the shape values it did not propagate are computed
    and written into ``model`` as constants. ``large``: the tensors the slice declares as
    typed inputs, of which a shape chain may read a few elements.

    Raises:
        Exception: what onnx's inference raises (several unrelated types).
    """
    keep = set(targets)
    computed: list[str] = []
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    for round_number in range(1, max_rounds + 1):
        inferred = onnx.shape_inference.infer_shapes(
            model, check_type=False, strict_mode=False, data_prop=True
        )
        found = _target_dims(inferred.graph, keep)
        if all(_static(found, name) for name in targets):
            return Inference(inferred, found, {}, round_number, computed)
        shapes = shape_table(inferred.graph)
        values = propagate(
            inferred.graph.node,
            small_constants(inferred.graph),
            shapes.get,
            opset=opset,
            large=large,
        )
        result = Inference(inferred, shapes, values, round_number, computed)
        useful = _read_where_unknown(inferred.graph, shapes)
        written = _write_constants(model.graph, values, keep, useful)
        if not written:
            return result
        computed.extend(written)
    return result
