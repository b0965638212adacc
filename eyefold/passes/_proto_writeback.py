"""Apply a converted GraphProto back onto the onnx-ir graph it came from, node by node.

Deserializing a whole converted model would cost as much as loading it again, lose the
identity of every value (and the lazy external tensors behind the initializers) and drop
node metadata. Instead, each converted node is matched to the original node with the same
outputs:

* same serialized bytes: the original node is kept as it is;
* same apart from its subgraphs: kept, and the same matching runs inside the subgraphs;
* otherwise (a changed or a new node): built from the proto, inputs resolved by name.

Original nodes left without a match are removed after their uses move to the values that
replace them (same names).
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping, MutableMapping

import onnx
import onnx_ir as ir

from eyefold.passes._version_conversion import BodyConversion

__all__ = ["write_back"]

_GRAPH_TYPES = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)


class WriteBackError(RuntimeError):
    """The converted graph does not map onto the original (a bug, not a user error)."""


def _without_subgraphs(node: onnx.NodeProto) -> bytes:
    stripped = onnx.NodeProto()
    stripped.CopyFrom(node)
    kept = [a for a in stripped.attribute if a.type not in _GRAPH_TYPES]
    del stripped.attribute[:]
    stripped.attribute.extend(kept)
    return stripped.SerializeToString()


def _same_signature(a: onnx.NodeProto, b: onnx.NodeProto) -> bool:
    return (a.op_type, a.domain, list(a.input), list(a.output)) == (
        b.op_type,
        b.domain,
        list(b.input),
        list(b.output),
    )


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


def _build_node(proto: onnx.NodeProto, scope: Mapping[str, ir.Value]) -> ir.Node:
    attributes = []
    for attribute in proto.attribute:
        if attribute.type == onnx.AttributeProto.GRAPH:
            attributes.append(ir.AttrGraph(attribute.name, _build_graph(attribute.g, scope)))
        elif attribute.type == onnx.AttributeProto.GRAPHS:
            graphs = [_build_graph(g, scope) for g in attribute.graphs]
            attributes.append(ir.AttrGraphs(attribute.name, graphs))
        else:
            attributes.append(ir.serde.deserialize_attribute(attribute))
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


def _detach(nodes: Iterable[ir.Node]) -> None:
    """Makes the nodes (and the nodes of their subgraphs) stop using any value."""
    for node in nodes:
        for index in range(len(node.inputs)):
            node.replace_input_with(index, None)
        for attribute in node.attributes.values():
            if attribute.type == ir.AttributeType.GRAPH:
                _detach(attribute.as_graph())
            elif attribute.type == ir.AttributeType.GRAPHS:
                for graph in attribute.as_graphs():
                    _detach(graph)


def _merge_graph(
    body: ir.Graph | ir.Function,
    nodes: list[ir.Node],
    before: onnx.GraphProto,
    after: onnx.GraphProto,
    scope: MutableMapping[str, ir.Value],
    opaque: Mapping[tuple[str, ...], onnx.NodeProto],
) -> int:
    """Makes ``body`` match ``after``; returns the number of nodes built anew."""
    pairs = zip(nodes, before.node, strict=True)
    originals = {tuple(proto.output): (node, proto) for node, proto in pairs}
    kept: dict[int, ir.Node] = {}
    final: list[tuple[ir.Node, bool]] = []
    built = 0
    for proto in after.node:
        key = tuple(proto.output)
        node, old = originals.get(key, (None, None))
        if node is not None and old is not None and id(node) not in kept:
            if (key in opaque and _same_signature(proto, old)) or (
                proto.SerializeToString() == old.SerializeToString()
            ):
                kept[id(node)] = node
            elif _without_subgraphs(proto) == _without_subgraphs(old):
                kept[id(node)] = node
                built += _merge_subgraphs(node, old, proto, scope, opaque)
        if id(node) in kept and node is not None:
            final.append((node, True))
        else:
            node = _build_node(proto, scope)
            final.append((node, False))
            built += 1
        for out in node.outputs:
            scope[out.name or ""] = out
    dropped = [node for node in nodes if id(node) not in kept]
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
    _detach(dropped)
    body.remove(dropped, safe=True)
    _place(body, final)
    outputs = body.outputs
    for index, info in enumerate(after.output):
        if outputs[index].name != info.name:
            raise WriteBackError(f"graph output {index} is {info.name!r} after conversion")
    return built


def _merge_subgraphs(
    node: ir.Node,
    old: onnx.NodeProto,
    new: onnx.NodeProto,
    scope: MutableMapping[str, ir.Value],
    opaque: Mapping[tuple[str, ...], onnx.NodeProto],
) -> int:
    built = 0
    old_graphs = {a.name: a for a in old.attribute if a.type in _GRAPH_TYPES}
    for attribute in new.attribute:
        if attribute.type not in _GRAPH_TYPES:
            continue
        ir_attr = node.attributes[attribute.name]
        pairs = (
            [(ir_attr.as_graph(), old_graphs[attribute.name].g, attribute.g)]
            if attribute.type == onnx.AttributeProto.GRAPH
            else zip(
                ir_attr.as_graphs(),
                old_graphs[attribute.name].graphs,
                attribute.graphs,
                strict=True,
            )
        )
        for graph, before, after in pairs:
            local = collections.ChainMap({}, scope)
            for value in [*graph.inputs, *graph.initializers.values()]:
                local[value.name or ""] = value
            built += _merge_graph(graph, list(graph), before, after, local, opaque)
    return built


def _place(body: ir.Graph | ir.Function, final: list[tuple[ir.Node, bool]]) -> None:
    """Inserts the new nodes between the kept ones, in the converter's order."""
    pending: list[ir.Node] = []
    order_kept = []
    for node, is_kept in final:
        if not is_kept:
            pending.append(node)
            continue
        order_kept.append(node)
        if pending:
            body.insert_before(node, pending)
            pending = []
    if pending:
        body.extend(pending)
    kept_ids = {id(node) for node in order_kept}
    if [node for node in body if id(node) in kept_ids] != order_kept:
        body.sort()


def write_back(conversion: BodyConversion) -> int:
    """Makes the converted body match the converter's output; returns nodes built anew.

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
        conversion.before.graph,
        conversion.after.graph,
        scope,
        conversion.opaque,
    )
