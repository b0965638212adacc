"""Static shapes of undeclared EyeLike inputs, from onnx's inference on the proto itself.

An EyeLike whose input nothing declares (a Reshape or MatMul output, as exporters leave
them) makes the neighbourhood take the input's whole backward slice, for the pipeline's
``infer-input-shapes`` step to run onnx's inference on it. On a long chain that slice is
the whole model, and deserializing it into onnx-ir costs what the whole-model path costs.
Here the same inference runs first, on the proto: the scan's columns go to
:mod:`eyefold.shape_facts.inference_slices`, which walks the slice, builds its weightless
model and reads what onnx found for that step too. An input that comes out with an
element type and a fully static shape is then declared in the neighbourhood as a typed
stand-in, so the neighbourhood needs only the EyeLike's direct producer, and the step
finds nothing left to infer: the fold, the report and the value_info written back are
those of the whole-model path (``tests/file_path/test_proto_path.py`` compares them).

Inputs it cannot make static, or an inference that fails, change nothing: their
neighbourhood takes the whole slice as before, and the step reports the failure.

After an opset upgrade on the proto, onnx's converter has already typed every value it
could (:class:`~eyefold.upgrade.on_proto.ConverterTypes`). Where it made every target
static from the facts this inference would start from, no second inference runs: the
model declared no value_info, no large Constant and no graph output lies in the slice
(the converter saw what they hold, the slice does not), and the converter's inference,
without data propagation, found no less than this one can (a static shape found without
data propagation is the one found with it). In a sorted graph with no large Constant and
no graph output's producer at or before the last target's producer, those conditions hold
without walking the slice at all.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping

import onnx
from onnx import numpy_helper

from eyefold.core.domains import DEFAULT_DOMAINS
from eyefold.core.weightless import (
    is_large,
    proto_large_constant,
    proto_large_tensor,
    proto_nbytes,
    typed_input,
)
from eyefold.proto_path.scan import GraphIndex
from eyefold.shape_facts.inference_slices import (
    SLICE_GRAPH_NAME,
    Declaration,
    Slice,
    backward_slice,
    infer_slice,
    weightless_slice,
)
from eyefold.shape_facts.lost import GraphFacts, static_dims_used
from eyefold.shape_facts.rounds import Dims, dims_of
from eyefold.shape_facts.values import MAX_ELEMENTS, PartialValue, ValuesOnDemand, from_array
from eyefold.upgrade.on_proto import ConverterTypes

__all__ = ["infer_undeclared_inputs"]


def _undeclared_targets(index: GraphIndex) -> list[str]:
    """EyeLike inputs computed by a node and declared nowhere (value_info, outputs)."""
    declared = index.value_info.keys() | set(index.outputs)
    targets: dict[str, None] = {}
    for position in index.eyelike:
        inputs = index.node_inputs[position]
        if inputs and inputs[0] in index.producer and inputs[0] not in declared:
            targets[inputs[0]] = None
    return list(targets)


class _IndexSource:
    """The main graph as the slice reads it, from the scan's columns.

    A node holding subgraphs reads, besides its inputs, the outer values they read.
    """

    def __init__(self, index: GraphIndex) -> None:
        self.index = index
        self.reads: list[list[str]] = index.node_inputs
        if index.outer_reads:
            self.reads = list(index.node_inputs)
            for position, names in index.outer_reads.items():
                self.reads[position] = [*self.reads[position], *names]
        self.outputs = index.node_outputs
        self.producer = index.producer
        self.large_constants = set(index.large_constants)

    def nodes(self, positions: list[int]) -> Iterable[onnx.NodeProto]:
        """The graph's own NodeProtos (copied by the slice's graph)."""
        node = self.index.graph.node
        return (node[p] for p in positions)

    def declare(self, name: str) -> Declaration | None:
        """A large Constant's output, or an initializer or graph input of the main graph."""
        index = self.index
        graph = index.graph
        producer = index.producer.get(name)
        if producer is not None:  # the slice computes every other produced value
            tensor = proto_large_constant(graph.node[producer])
            assert tensor is not None  # the index's large Constants are these
            return typed_input(name, tensor), proto_large_tensor(tensor)
        if name in index.initializers:
            tensor = graph.initializer[index.initializers[name]]
            if not is_large(proto_nbytes(tensor)):
                return tensor
            # Typed from its tensor, as onnx-ir types an initializer.
            large = None if name in index.inputs else proto_large_tensor(tensor)
            return typed_input(name, tensor), large
        if name in index.inputs:
            return graph.input[index.inputs.index(name)], None
        return None


def _is_static(type_proto: onnx.TypeProto) -> bool:
    tensor = type_proto.tensor_type
    if not type_proto.HasField("tensor_type") or not tensor.elem_type:
        return False
    return tensor.HasField("shape") and all(d.HasField("dim_value") for d in tensor.shape.dim)


def _typed_by_converter(
    index: GraphIndex, sliced: Slice, targets: list[str], converted: ConverterTypes | None
) -> dict[str, onnx.ValueInfoProto] | None:
    """The targets' declarations from the converter's types, or None: the inference runs.

    Only where those types stand for this inference's (see the module docstring).
    """
    if converted is None or converted.declared or sliced.large:
        return None
    outputs = set(index.outputs)
    if any(name in outputs for p in sliced.positions for name in index.node_outputs[p]):
        return None
    return _converter_declarations(targets, converted)


def _converter_declarations(
    targets: list[str], converted: ConverterTypes
) -> dict[str, onnx.ValueInfoProto] | None:
    """The converter's declarations of the targets, or None unless all are static."""
    wanted = set(targets)
    found = {
        info.name: info
        for info in converted.value_info
        if info.name in wanted and _is_static(info.type)
    }
    return {name: found[name] for name in targets} if len(found) == len(wanted) else None


def _typed_before_slicing(
    index: GraphIndex, targets: list[str], converted: ConverterTypes | None
) -> dict[str, onnx.ValueInfoProto] | None:
    """The converter's declarations where the graph's order alone rules the slice out.

    In a sorted graph a target's slice lies at or before its producer, so when no large
    Constant and no node making a graph output comes at or before the last target's
    producer, :func:`_typed_by_converter`'s conditions hold without walking the slice
    (on a long chain that walk is most of the graph). None: decide on the slice.
    """
    if converted is None or converted.declared or index.unsorted:
        return None
    last = max(index.producer[name] for name in targets)
    made_outputs = (index.producer.get(name) for name in index.outputs)
    if any(position is not None and position <= last for position in made_outputs):
        return None
    if index.large_constants and index.large_constants[0] <= last:
        return None
    return _converter_declarations(targets, converted)


def infer_undeclared_inputs(
    model: onnx.ModelProto, index: GraphIndex, converted: ConverterTypes | None = None
) -> tuple[dict[str, onnx.ValueInfoProto], dict[str, list[str]]]:
    """Declarations of the undeclared EyeLike inputs onnx infers static, by name.

    With, for those the inference made static, the graph inputs whose static dims their
    shapes were computed from (:func:`~eyefold.shape_facts.lost.static_dims_used`), as
    the whole-model path finds them.

    ``converted``: the types of the opset upgrade just done on ``model``, if any.
    """
    targets = _undeclared_targets(index)
    if not targets:
        return {}, {}
    source = _IndexSource(index)
    starts = [index.producer[name] for name in targets]
    typed = _typed_before_slicing(index, targets, converted)
    sliced = None
    if typed is None:
        sliced = backward_slice(source, starts)
        typed = _typed_by_converter(index, sliced, targets, converted)
    if typed is not None:
        assert converted is not None  # only the converter's types are taken unsliced
        facts = _converter_facts(model, index, converted)
        used = static_dims_used(facts, list(typed), index.inputs)
        if not any(used.values()):
            return typed, used
        # The walk reached static input dims: the slice's inference checks them.
    built = weightless_slice(
        source,
        sliced if sliced is not None else backward_slice(source, starts),
        targets,
        ir_version=model.ir_version,
        opset_imports=model.opset_import,
        functions=model.functions,
    )
    try:
        found = infer_slice(built, targets, [info.name for info in index.graph.input])
    except Exception:  # the step meets the same failure on the whole slice and says it
        return {}, {}
    inferred = found.declarations()
    declared = {
        name: info
        for name in targets
        if (info := inferred.get((SLICE_GRAPH_NAME, name))) is not None
        and _is_static(info.type)
    }
    return declared, found.baked_in(list(declared))


class _NodesByOutput(Mapping[str, onnx.NodeProto]):
    """The graph's nodes by output name, read through the scan's positions."""

    def __init__(self, index: GraphIndex) -> None:
        self._index = index

    def __getitem__(self, name: str) -> onnx.NodeProto:
        return self._index.graph.node[self._index.producer[name]]

    def __iter__(self) -> Iterator[str]:
        return iter(self._index.producer)

    def __len__(self) -> int:
        return len(self._index.producer)


class _DeclaredDims(Mapping[str, Dims]):
    """The dims of the graph's values: its inputs', its initializers', the converter's."""

    def __init__(self, index: GraphIndex, converted: ConverterTypes) -> None:
        self._index = index
        self._typed = {info.name: info for info in converted.value_info}

    def __getitem__(self, name: str) -> Dims:
        index = self._index
        if name in index.initializers:
            return list(index.graph.initializer[index.initializers[name]].dims)
        info = self._typed.get(name)
        if info is None and name in index.inputs:
            info = index.graph.input[index.inputs.index(name)]
        dims = None if info is None else dims_of(info.type)
        if dims is None:
            raise KeyError(name)
        return dims

    def __iter__(self) -> Iterator[str]:
        return iter({*self._index.initializers, *self._typed, *self._index.inputs})

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _converter_facts(
    model: onnx.ModelProto, index: GraphIndex, converted: ConverterTypes
) -> GraphFacts:
    """The upgraded graph as the converter typed it, for a walk back from a target."""
    graph = index.graph

    def constant(name: str) -> PartialValue | None:
        position = index.initializers.get(name)
        tensor = None if position is None else graph.initializer[position]
        if tensor is None or len(tensor.dims) > 1 or math.prod(tensor.dims) > MAX_ELEMENTS:
            return None
        return from_array(numpy_helper.to_array(tensor))

    producer = _NodesByOutput(index)
    shapes = _DeclaredDims(index, converted)
    imports = model.opset_import
    opset = next((o.version for o in imports if o.domain in DEFAULT_DOMAINS), None)
    values = ValuesOnDemand(producer, constant, shapes.get, opset=opset)
    return GraphFacts(producer, index.initializers.keys(), shapes, values)
