"""onnx's inference on the weightless backward slice of an EyeLike input, once for both paths.

An EyeLike whose input nothing declares (a Reshape or MatMul output, as exporters leave
them) gets its static shape from onnx's inference with data propagation
(:func:`~eyefold.shape_facts.rounds.infer_with_values`), run not on the model but on the
slice that computes the input: the nodes the targets depend on, copied into a ModelProto
with the tensors over :data:`~eyefold.core.limits.WEIGHTLESS_TENSOR_LIMIT_BYTES` declared
as typed graph inputs (:mod:`eyefold.core.weightless`). The slice stops at a large
Constant, whose output becomes an input typed from its tensor: a shape chain may read it.

The walk (:func:`backward_slice`), the model (:func:`weightless_slice`) and the reading of
what onnx found (:func:`infer_slice`: the declarations, the graph inputs whose static dims
a shape was computed from) are written once, on a graph's columns, each node's reads and
outputs by position, through a :class:`SliceSource`. The file path hands its scan of the
proto (:mod:`eyefold.proto_path.infer_inputs`); the whole-model path hands its onnx-ir
graph and serializes only the slice's nodes (:mod:`eyefold.passes.infer_input_shapes`;
onnx-ir's whole-model round trip costs about 12x a protobuf load and save). So both hand
onnx the same model and read the same answer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Container, Hashable, Iterable, Mapping, Sequence
from typing import Protocol, TypeAlias, TypeVar

import onnx

from eyefold.core.onnx_safety import DefusedEyeLikes
from eyefold.core.proto_subgraphs import nested_graphs
from eyefold.core.weightless import LargeTensor, weightless_model
from eyefold.shape_facts.lost import GraphFacts, copy_for_static_dims, static_dims_used
from eyefold.shape_facts.rounds import Inference, infer_with_values

__all__ = [
    "SLICE_GRAPH_NAME",
    "Declaration",
    "Slice",
    "SliceInference",
    "SliceSource",
    "WeightlessSlice",
    "backward_slice",
    "declared_dim_params",
    "forget_made_up_dims",
    "infer_slice",
    "weightless_slice",
]

# The name of the slice's main graph, under which its declarations are read back.
SLICE_GRAPH_NAME = "eyefold_slice"

_Key = TypeVar("_Key", bound=Hashable)

# How the slice declares a value it reads but does not compute: a small initializer
# travels with it (data propagation reads Reshape targets, Gather indices, Concat pieces),
# anything else is a typed graph input, with the large tensor it stands for if any.
Declaration: TypeAlias = onnx.TensorProto | tuple[onnx.ValueInfoProto, LargeTensor | None]


class SliceSource(Protocol[_Key]):
    """A graph as the slice reads it: values by key (a name, a Value), nodes by position.

    The columns are read only at the positions the walk reaches: a source may compute
    them on demand.

    Attributes:
        reads: each node's reads: its inputs, and the outer values its subgraphs read.
        outputs: each node's outputs.
        producer: the position of the node making each value.
        large_constants: the positions of the default-domain Constant nodes whose tensor
            is too large for the slice.
    """

    reads: Sequence[Sequence[_Key]]
    outputs: Sequence[Sequence[_Key]]
    producer: Mapping[_Key, int]
    large_constants: Container[int]

    def nodes(self, positions: list[int]) -> Iterable[onnx.NodeProto]:
        """The nodes at ``positions`` as NodeProtos, in that order."""
        ...

    def declare(self, key: _Key) -> Declaration | None:
        """How the slice declares ``key``, which it reads and does not compute.

        A large Constant's output, an initializer or a graph input; None for a value of
        another graph (a subgraph's own).
        """
        ...


@dataclasses.dataclass(frozen=True)
class Slice:
    """The nodes the targets depend on.

    Attributes:
        positions: their positions, ascending (the graph's order).
        large: the large Constants among them, where the walk stopped.
    """

    positions: list[int]
    large: set[int]


def backward_slice(source: SliceSource[_Key], starts: Iterable[int]) -> Slice:
    """The nodes the nodes at ``starts`` depend on, themselves included.

    On a long chain the slice is the whole graph: the loop reads the columns directly.
    """
    reads, producer, stops = source.reads, source.producer, source.large_constants
    selected: set[int] = set()
    large: set[int] = set()
    work = list(starts)
    while work:
        position = work.pop()
        if position in selected:
            continue
        selected.add(position)
        if position in stops:
            large.add(position)
            continue
        for key in reads[position]:
            at = producer.get(key)
            if at is not None and at not in selected:
                work.append(at)
    return Slice(sorted(selected), large)


@dataclasses.dataclass
class WeightlessSlice:
    """The ModelProto onnx's inference is handed for a slice.

    Attributes:
        model: the model; its main graph's outputs are the targets.
        defused: the defused EyeLikes onnx's messages must be read through.
        large: the tensors declared as typed inputs (large Constants' and initializers'),
            by input name, for a shape chain that reads a few of their elements.
    """

    model: onnx.ModelProto
    defused: DefusedEyeLikes
    large: dict[str, LargeTensor]


def weightless_slice(
    source: SliceSource[_Key],
    sliced: Slice,
    targets: Iterable[str],
    *,
    ir_version: int,
    opset_imports: Iterable[onnx.OperatorSetIdProto],
    functions: Iterable[onnx.FunctionProto],
) -> WeightlessSlice:
    """The model of ``sliced``, whose outputs are ``targets``.

    What the slice reads and does not compute is declared in the order its nodes read it.
    """
    proto = onnx.ModelProto()
    graph = proto.graph
    graph.name = SLICE_GRAPH_NAME
    reads, outputs = source.reads, source.outputs
    kept = [p for p in sliced.positions if p not in sliced.large]
    produced = {key for p in kept for key in outputs[p]}
    free: dict[_Key, None] = {}
    for position in sliced.positions:
        if position in sliced.large:
            free.update(dict.fromkeys(outputs[position]))
        else:
            free.update(dict.fromkeys(k for k in reads[position] if k not in produced))
    large: dict[str, LargeTensor] = {}
    for key in free:
        declared = source.declare(key)
        if isinstance(declared, onnx.TensorProto):
            graph.initializer.append(declared)
        elif declared is not None:
            info, tensor = declared
            graph.input.append(info)
            if tensor is not None:
                large[info.name] = tensor
    graph.node.extend(source.nodes(kept))
    graph.output.extend(onnx.ValueInfoProto(name=name) for name in targets)
    proto, defused = weightless_model(
        proto, ir_version=ir_version, opset_imports=opset_imports, functions=functions
    )
    return WeightlessSlice(proto, defused, large)


@dataclasses.dataclass
class SliceInference:
    """What onnx's inference found on a slice.

    Attributes:
        inference: the rounds' answer; its model is the slice, inferred.
        built: the slice as built, when one of the model's inputs has a static dim (only
            then can a shape bake one in).
        large: the tensors the slice declares as typed inputs.
        model_inputs: the graph inputs that are the model's own.
    """

    inference: Inference
    built: onnx.ModelProto | None
    large: dict[str, LargeTensor]
    model_inputs: list[str]

    def declarations(
        self, graphs: Collection[str] = (SLICE_GRAPH_NAME,)
    ) -> dict[tuple[str, str], onnx.ValueInfoProto]:
        """What onnx declared, typed, by (graph name, value name), in the ``graphs`` named.

        The slice's subgraphs are walked only when more than its main graph is asked.
        """
        model = self.inference.model
        listed = [model.graph]
        if len(graphs) > 1:
            listed.extend(nested_graphs(model.graph.node))
        found: dict[tuple[str, str], onnx.ValueInfoProto] = {}
        for graph in listed:
            if graph.name in graphs:
                for info in [*graph.value_info, *graph.output]:
                    if info.HasField("type"):
                        found[(graph.name, info.name)] = info
        return found

    def baked_in(self, targets: Collection[str]) -> dict[str, list[str]]:
        """For each of ``targets`` whose shape came out static, the inputs it bakes in.

        :func:`~eyefold.shape_facts.lost.static_dims_used`, on the slice as built.
        """
        if self.built is None:
            return {}
        facts = GraphFacts.before_rounds(self.built, self.inference, self.large)
        return static_dims_used(facts, targets, self.model_inputs)


def infer_slice(
    sliced: WeightlessSlice, targets: list[str], model_inputs: list[str]
) -> SliceInference:
    """Runs onnx's inference, with shape values computed between rounds, on ``sliced``.

    ``targets``: the main-graph values to make static. ``sliced.model`` is changed.

    Raises:
        Exception: what onnx's inference raises (several unrelated types).
    """
    built = copy_for_static_dims(sliced.model, model_inputs)
    inference = infer_with_values(sliced.model, targets, large=sliced.large)
    return SliceInference(inference, built, sliced.large, model_inputs)


def declared_dim_params(proto: onnx.ModelProto) -> set[str]:
    """Every dim name a slice holds before inference (the others, onnx made up)."""
    found: set[str] = set()
    for graph in [proto.graph, *nested_graphs(proto.graph.node)]:
        for info in [*graph.input, *graph.output, *graph.value_info]:
            found.update(d.dim_param for d in info.type.tensor_type.shape.dim)
    return found


def forget_made_up_dims(type_proto: onnx.TypeProto, declared: set[str]) -> None:
    """Unnames the dims onnx named itself (``unk__0``...): they mean nothing to the user."""
    for dim in type_proto.tensor_type.shape.dim:
        if dim.HasField("dim_param") and dim.dim_param not in declared:
            dim.ClearField("dim_param")
