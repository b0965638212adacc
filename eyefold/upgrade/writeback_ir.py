"""Apply a converted GraphProto back onto the onnx-ir graph it came from, node by node.

Deserializing a whole converted model would cost as much as loading it again, lose the
identity of every value (and the lazy external tensors behind the initializers) and drop
node metadata. Instead, each converted node is matched to the original node with the same
op and the same outputs:

* an equal message (protobuf's comparison: field presence, unknown fields and the bits of
  floats count, so equal means the same serialized bytes): the original node is kept;
* otherwise the original node is patched in place: inputs resolved by name, changed
  attributes replaced, subgraphs matched the same way, recursively;
* a converted node with no such original (a Constant the adapter added, the Reshape after a
  flattened Softmax...) is built from the proto.

Original nodes left without a match are removed after their uses move to the values that
replace them (same names).
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping, MutableMapping
from typing import TypeAlias

import onnx
import onnx_ir as ir

from eyefold.errors import WriteBackError
from eyefold.upgrade.conversion import BodyConversion
from eyefold.upgrade.writeback import Placement, match_nodes, patch_node, place_nodes

__all__ = ["write_back"]

# The values in scope by name, and the converter's opaque nodes by path.
_Names: TypeAlias = MutableMapping[str, ir.Value]
_Opaque: TypeAlias = Mapping[tuple[str, ...], onnx.NodeProto | None]


def _lookup(scope: Mapping[str, ir.Value], name: str, reader: str) -> ir.Value | None:
    if not name:
        return None
    if name not in scope:
        raise WriteBackError(f"converted {reader} reads unknown value {name!r}")
    return scope[name]


def _build_graph(proto: onnx.GraphProto, outer: Mapping[str, ir.Value]) -> ir.Graph:
    """A new ir.Graph from a converted subgraph, outer-scope names resolved in ``outer``."""
    local: dict[str, ir.Value] = {}
    scope = collections.ChainMap(local, dict(outer))
    inputs = [ir.serde.deserialize_value_info_proto(info, None) for info in proto.input]
    local.update((value.name or "", value) for value in inputs)
    initializers = []
    for tensor_proto in proto.initializer:
        tensor = ir.serde.deserialize_tensor(tensor_proto)
        value = ir.Value(name=tensor_proto.name, const_value=tensor)
        local[tensor_proto.name] = value
        initializers.append(value)
    nodes = []
    for node_proto in proto.node:
        node = _build_node(node_proto, scope)
        local.update((out.name or "", out) for out in node.outputs)
        nodes.append(node)
    outputs = []
    for info in proto.output:
        value = _lookup(scope, info.name, f"subgraph {proto.name!r} output")
        if value is None:
            raise WriteBackError(f"converted subgraph {proto.name!r} has an unnamed output")
        if value.type is None and info.HasField("type"):
            ir.serde.deserialize_value_info_proto(info, value)
        outputs.append(value)
    return ir.Graph(
        inputs, outputs, nodes=nodes, initializers=initializers, name=proto.name or None
    )


def _attribute(proto: onnx.AttributeProto, scope: Mapping[str, ir.Value]) -> ir.Attr:
    if proto.type == onnx.AttributeProto.GRAPH:
        return ir.AttrGraph(proto.name, _build_graph(proto.g, scope))
    if proto.type == onnx.AttributeProto.GRAPHS:
        return ir.AttrGraphs(proto.name, [_build_graph(g, scope) for g in proto.graphs])
    return ir.serde.deserialize_attribute(proto)


def _build_node(proto: onnx.NodeProto, scope: Mapping[str, ir.Value]) -> ir.Node:
    attributes = [_attribute(attribute, scope) for attribute in proto.attribute]
    return ir.Node(
        proto.domain,
        proto.op_type,
        [_lookup(scope, name, f"{proto.op_type} node") for name in proto.input],
        attributes,
        overload=proto.overload,
        outputs=[ir.Value(name=name) for name in proto.output],
        name=proto.name or None,
        doc_string=proto.doc_string or None,
    )


def _detach_subgraphs(nodes: Iterable[ir.Node]) -> None:
    """Makes the nodes inside the subgraphs of ``nodes`` stop using any value."""
    for node in nodes:
        for attribute in node.attributes.values():
            if attribute.type == ir.AttributeType.GRAPH:
                graphs = [attribute.as_graph()]
            elif attribute.type == ir.AttributeType.GRAPHS:
                graphs = list(attribute.as_graphs())
            else:
                continue
            for graph in graphs:
                for inner in graph:
                    for index in range(len(inner.inputs)):
                        inner.replace_input_with(index, None)
                _detach_subgraphs(graph)


def _merge_subgraph_attribute(
    node: ir.Node,
    old: onnx.AttributeProto,
    new: onnx.AttributeProto,
    scope: _Names,
    opaque: _Opaque,
) -> int:
    ir_attr = node.attributes[new.name]
    if new.type == onnx.AttributeProto.GRAPH:
        triples = [(ir_attr.as_graph(), old.g, new.g)]
    else:
        triples = list(zip(ir_attr.as_graphs(), old.graphs, new.graphs, strict=True))
    rebuilt = 0
    for graph, before, after in triples:
        local = collections.ChainMap({}, scope)
        for value in [*graph.inputs, *graph.initializers.values()]:
            local[value.name or ""] = value
        rebuilt += _merge_graph(graph, list(graph), before, after, local, opaque)
    return rebuilt


class _NodeEditor:
    """Changes one onnx-ir node in place as :func:`patch_node` decides."""

    def __init__(self, node: ir.Node, scope: _Names, opaque: _Opaque) -> None:
        self.node = node
        self.scope = scope
        self.opaque = opaque

    def set_inputs(self, names: list[str]) -> None:
        node = self.node
        values = [_lookup(self.scope, name, f"{node.op_type} node") for name in names]
        node.resize_inputs(len(values))
        for index, value in enumerate(values):
            if node.inputs[index] is not value:
                node.replace_input_with(index, value)

    def set_attribute(self, attribute: onnx.AttributeProto) -> None:
        self.node.attributes[attribute.name] = _attribute(attribute, self.scope)

    def remove_attribute(self, name: str) -> None:
        del self.node.attributes[name]

    def merge_subgraphs(self, old: onnx.AttributeProto, new: onnx.AttributeProto) -> int:
        return _merge_subgraph_attribute(self.node, old, new, self.scope, self.opaque)


def _merge_graph(
    body: ir.Graph | ir.Function,
    nodes: list[ir.Node],
    before: onnx.GraphProto,
    after: onnx.GraphProto,
    scope: MutableMapping[str, ir.Value],
    opaque: Mapping[tuple[str, ...], onnx.NodeProto | None],
) -> int:
    """Makes ``body`` match ``after``; returns the number of nodes changed or added."""

    def add(proto: onnx.NodeProto, outputs: list[str]) -> ir.Node:
        node = _build_node(proto, scope)
        scope.update((out.name or "", out) for out in node.outputs)
        return node

    def keep(
        proto: onnx.NodeProto,
        position: int,
        old: onnx.NodeProto,
        changed: bool,
        outputs: list[str],
    ) -> tuple[ir.Node, int]:
        node = nodes[position]
        count = 0
        if changed:
            is_opaque = tuple(outputs) in opaque
            count = patch_node(old, proto, is_opaque, _NodeEditor(node, scope, opaque))
        scope.update((out.name or "", out) for out in node.outputs)
        return node, count

    placement = place_nodes(match_nodes(before, after), add, keep)
    groups = placement.groups
    dropped = [node for position, node in enumerate(nodes) if position not in groups]
    for node in dropped:
        for out in node.outputs:
            replacement = scope.get(out.name or "")
            if replacement is not None and replacement is not out:
                # Same name, same tensor: keep what the model declared about it.
                if replacement.type is None:
                    replacement.type = out.type
                if replacement.shape is None:
                    replacement.shape = out.shape
                out.replace_all_uses_with(replacement, replace_graph_outputs=True)
    _detach_subgraphs(dropped)
    body.remove(dropped, safe=True)
    _place(body, placement)
    outputs = body.outputs
    for index, info in enumerate(after.output):
        if outputs[index].name != info.name:
            raise WriteBackError(f"graph output {index} is {info.name!r} after conversion")
    return placement.rebuilt


def _place(body: ir.Graph | ir.Function, placement: Placement[ir.Node]) -> None:
    """Inserts the new nodes between the kept ones, in the converter's order."""
    for group in placement.groups.values():
        if len(group) > 1:
            body.insert_before(group[-1], group[:-1])
    if placement.trailing:
        body.extend(placement.trailing)
    if placement.reordered:
        body.sort()


def write_back(conversion: BodyConversion) -> int:
    """Makes the body match the converter's output; returns the nodes changed or added.

    Raises:
        WriteBackError: the converted graph does not map onto the original.
    """
    body = conversion.body
    scope: dict[str, ir.Value] = {}
    graph = body if isinstance(body, ir.Graph) else body.graph
    for value in [*body.inputs, *graph.initializers.values()]:
        scope[value.name or ""] = value
    serialized = {id(node) for node in conversion.nodes}
    for node in body:
        if id(node) not in serialized:  # large Constant nodes the converter never saw
            scope.update((out.name or "", out) for out in node.outputs)
    return _merge_graph(
        body,
        conversion.nodes,
        conversion.proto.before.graph,
        conversion.proto.after.graph,
        scope,
        conversion.proto.opaque,
    )
