"""The weightless slice of a model that onnx's inference is handed for its EyeLike inputs.

Only the nodes the targets depend on are serialized (onnx-ir's whole-model round trip
costs about 12x a protobuf load and save), with the tensors over
:data:`~eyefold.core.limits.WEIGHTLESS_TENSOR_LIMIT_BYTES` declared as typed graph inputs
(:mod:`eyefold.core.weightless`; a large Constant's output with its tensor's dims, which a
shape chain may read) and every subgraph named, so that what onnx infers maps
back onto the ``ir.Graph`` it came from.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import onnx
import onnx_ir as ir

from eyefold.core.onnx_safety import DefusedEyeLikes
from eyefold.core.proto_subgraphs import nested_graphs, subgraph_attributes
from eyefold.core.scopes import Scope, read_values
from eyefold.core.weightless import (
    LargeTensor,
    ir_constant_input,
    ir_large_constant,
    ir_large_tensor,
    is_large,
    weightless_model,
)

__all__ = [
    "InferenceSlice",
    "SlicedModel",
    "anchor_in_root",
    "backward_slice",
    "declared_dim_params",
    "forget_made_up_dims",
    "inferred_types",
    "slice_model",
]


@dataclasses.dataclass
class InferenceSlice:
    """The nodes to serialize for one root graph and the EyeLike inputs to learn."""

    root: ir.Graph
    opset_imports: dict[str, int]
    nodes: list[ir.Node] = dataclasses.field(default_factory=list)
    targets: list[ir.Value] = dataclasses.field(default_factory=list)


def backward_slice(root: ir.Graph, anchors: list[ir.Node]) -> list[ir.Node]:
    """Nodes of ``root`` that the anchors depend on, in the graph's order."""
    selected: set[int] = set()
    work = list(anchors)
    while work:
        node = work.pop()
        if id(node) in selected:
            continue
        selected.add(id(node))
        if ir_large_constant(node):
            continue
        for value in read_values(node):
            producer = value.producer()
            if producer is not None and producer.graph is root:
                work.append(producer)
    return [node for node in root if id(node) in selected]


def anchor_in_root(scope: Scope, source: ir.Value) -> ir.Node | None:
    """The root-graph node whose backward slice determines ``source``."""
    if scope.top_node is not None:
        return scope.top_node
    return source.producer()


def _free_values(nodes: list[ir.Node], large: set[int]) -> list[ir.Value]:
    """Values the slice reads but does not compute (``large``: ids of big Constant nodes)."""
    produced = {id(out) for node in nodes if id(node) not in large for out in node.outputs}
    free: dict[int, ir.Value] = {}
    for node in nodes:
        if id(node) in large:
            free.update({id(out): out for out in node.outputs})
            continue
        for value in read_values(node):
            if id(value) not in produced and value.name and value.graph is node.graph:
                free.setdefault(id(value), value)
    return list(free.values())


def _name_subgraphs(
    ir_node: ir.Node, proto_node: onnx.NodeProto, names: dict[str, ir.Graph]
) -> None:
    """Gives every serialized subgraph a unique name, mapped to its ir.Graph."""
    for proto_attr, proto_graphs in subgraph_attributes(proto_node):
        ir_attr = ir_node.attributes.get(proto_attr.name)
        if ir_attr is None:
            continue
        if proto_attr.type == onnx.AttributeProto.GRAPH:
            ir_graphs: Sequence[ir.Graph] = [ir_attr.as_graph()]
        else:
            ir_graphs = ir_attr.as_graphs()
        for ir_graph, proto_graph in zip(ir_graphs, proto_graphs, strict=True):
            proto_graph.name = f"eyefold_subgraph_{len(names)}"
            names[proto_graph.name] = ir_graph
            for inner_ir, inner_proto in zip(ir_graph, proto_graph.node, strict=True):
                _name_subgraphs(inner_ir, inner_proto, names)


@dataclasses.dataclass
class SlicedModel:
    """The weightless ModelProto of a slice and what reads it back.

    Attributes:
        proto: the model (its outputs the targets).
        names: the ``ir.Graph`` each of its graph names stands for.
        defused: the defused EyeLikes onnx's messages must be read through.
        large: the tensors declared as typed inputs (large Constants' and initializers'),
            by input name, for a shape chain that reads a few of their elements.
    """

    proto: onnx.ModelProto
    names: dict[str, ir.Graph]
    defused: DefusedEyeLikes
    large: dict[str, LargeTensor]


def slice_model(model: ir.Model, piece: InferenceSlice) -> SlicedModel:
    """The weightless ModelProto of ``piece``, its graphs' names and the defused EyeLikes."""
    built = onnx.ModelProto()
    graph = built.graph
    graph.name = "eyefold_slice"
    names: dict[str, ir.Graph] = {graph.name: piece.root}
    large = {id(node) for node in piece.nodes if ir_large_constant(node)}
    tensors: dict[str, LargeTensor] = {}
    for value in _free_values(piece.nodes, large):
        tensor = value.const_value
        producer = value.producer()
        if producer is not None and id(producer) in large:
            constant = producer.attributes["value"].value
            graph.input.append(ir_constant_input(value.name or "", constant))
            tensors[value.name or ""] = ir_large_tensor(constant)
        elif tensor is not None and not is_large(tensor.nbytes):
            proto = ir.serde.serialize_tensor(tensor)
            proto.name = value.name or ""
            graph.initializer.append(proto)
        else:
            graph.input.append(ir.serde.serialize_value(value))
            if tensor is not None and not value.is_graph_input():
                tensors[value.name or ""] = ir_large_tensor(tensor)
    for node in piece.nodes:
        if id(node) in large:
            continue
        proto_node = ir.serde.serialize_node(node)
        _name_subgraphs(node, proto_node, names)
        graph.node.append(proto_node)
    graph.output.extend(onnx.ValueInfoProto(name=v.name) for v in piece.targets if v.name)
    proto, defused = weightless_model(
        built,
        ir_version=model.ir_version,
        opset_imports=(
            onnx.OperatorSetIdProto(domain=d, version=v)
            for d, v in piece.opset_imports.items()
        ),
        functions=(ir.serde.serialize_function(f) for f in model.functions.values()),
    )
    # onnx's messages name the slice's graphs; say them as the user's model names them.
    for proto_name, ir_graph in names.items():
        defused.names[proto_name] = ir_graph.name or (
            "main graph" if ir_graph is model.graph else "subgraph"
        )
    return SlicedModel(proto, names, defused, tensors)


def declared_dim_params(proto: onnx.ModelProto) -> set[str]:
    """Every dim name the slice holds before inference (the others, onnx made up)."""
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


def inferred_types(
    proto: onnx.ModelProto, names: dict[str, ir.Graph]
) -> dict[tuple[int, str], onnx.TypeProto]:
    """What onnx inferred, by (``id()`` of the ``ir.Graph``, value name)."""
    found: dict[tuple[int, str], onnx.TypeProto] = {}

    for graph in [proto.graph, *nested_graphs(proto.graph.node)]:
        ir_graph = names.get(graph.name)
        if ir_graph is not None:
            for info in [*graph.value_info, *graph.output]:
                if info.HasField("type"):
                    found[(id(ir_graph), info.name)] = info.type
    return found
