"""Write a converted weightless body back onto the ModelProto body it was made from.

The rules are those of :mod:`eyefold.upgrade.writeback`, shared with the onnx-ir
write-back, on NodeProtos: a converted node stands for the original with the same op and
outputs (:func:`match_nodes`); the original is kept as it is where the converter left it
unchanged, else it gets a patch (:func:`patch_node`) collected here and applied only by
:func:`write_body`; nodes the converter added go right before the next kept node. Large
Constant nodes the converter never saw keep their places.

Where the onnx-ir write-back would sort the body (the converter reordered kept nodes) or
fail, :class:`MergeError` says so; nothing has been changed by then.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, MutableSequence, Sequence
from typing import TypeVar

import onnx

from eyefold.core.proto_subgraphs import may_hold_subgraphs
from eyefold.errors import WriteBackError
from eyefold.upgrade.writeback import match_nodes, patch_node, place_nodes

__all__ = ["MergeError", "MergedBody", "merge_body", "write_body"]

_Opaque = Mapping[tuple[str, ...], onnx.NodeProto | None]
_Message = TypeVar("_Message", onnx.AttributeProto, onnx.NodeProto, onnx.GraphProto)


def _copy(message: _Message) -> _Message:
    """A copy of ``message`` to patch: the model's own is changed only by the write-back."""
    copy = type(message)()
    copy.CopyFrom(message)
    return copy


_OPTIONAL_FIELDS = ("name", "doc_string", "domain", "overload")
_GRAPH_TYPES = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)


class MergeError(WriteBackError):
    """The converted body cannot be written back as the onnx-ir write-back would."""


@dataclasses.dataclass(slots=True)
class NodePatch:
    """What the write-back changes in one original node; None leaves that field as it is.

    A patch, not a patched copy: the original is changed once, in place, when the whole
    model is written back (a copy, then copying it over the original, doubled the work).

    Attributes:
        inputs: the node's new inputs.
        attributes: the node's new attributes, in order (its own ones among them).
    """

    inputs: list[str] | None = None
    attributes: list[onnx.AttributeProto] | None = None

    def apply(self, node: onnx.NodeProto) -> None:
        """Makes ``node`` (the original this patch was made for) what the converter made."""
        if self.inputs is not None:
            node.input[:] = self.inputs
        if self.attributes is not None:
            del node.attribute[:]
            if self.attributes:
                node.attribute.extend(self.attributes)


@dataclasses.dataclass
class MergedBody:
    """A body's nodes after the write-back.

    Attributes:
        nodes: the body's nodes in their new order: originals (patched ones too) and the
            new nodes of ``added``.
        patches: (original, its patch) for each node the converter changed.
        added: nodes the converter added, not yet in the body.
        dropped: names of the values no node defines any more.
        rebuilt: nodes changed or added, counted as the onnx-ir write-back counts them.
    """

    nodes: list[onnx.NodeProto]
    patches: list[tuple[onnx.NodeProto, NodePatch]]
    added: list[onnx.NodeProto]
    dropped: set[str]
    rebuilt: int


class _NodeNames:
    """Names unnamed new nodes as an onnx-ir graph does when they are added to it.

    ``node_<op>_<n>``, ``n`` counting the nodes named so far in the body, skipping names
    taken (``onnx_ir._name_authority``). The names taken are read from the body only once
    a node needs one.
    """

    def __init__(self, body: Sequence[onnx.NodeProto]) -> None:
        self.body = body
        self.taken: set[str] | None = None
        self.counter = 0

    def new_node(self, proto: onnx.NodeProto) -> onnx.NodeProto:
        """The converter-made ``proto`` (changed in place), named, empty optional fields unset.

        The converter's result is the merge's own: nothing else reads its nodes after it.
        """
        for field in _OPTIONAL_FIELDS:
            if proto.HasField(field) and not getattr(proto, field):
                proto.ClearField(field)
        if self.taken is None:
            self.taken = {node.name for node in self.body}
        name = proto.name
        if not name:
            op_type = proto.op_type
            name = f"node_{op_type}_{self.counter}"
            while name in self.taken:
                self.counter += 1
                name = f"node_{op_type}_{self.counter}"
            proto.name = name
            self.counter += 1
        self.taken.add(name)
        return proto


def _merged_attribute(
    original: onnx.AttributeProto,
    old: onnx.AttributeProto,
    new: onnx.AttributeProto,
    opaque: _Opaque,
) -> tuple[onnx.AttributeProto, int]:
    merged = _copy(original)
    rebuilt = 0
    if new.type == onnx.AttributeProto.GRAPH:
        graph, rebuilt = merge_graph(original.g, old.g, new.g, opaque)
        merged.g.CopyFrom(graph)
        return merged, rebuilt
    if not len(original.graphs) == len(old.graphs) == len(new.graphs):
        raise MergeError(f"attribute {new.name!r} holds another number of subgraphs")
    del merged.graphs[:]
    for triple in zip(original.graphs, old.graphs, new.graphs, strict=True):
        graph, count = merge_graph(*triple, opaque)
        merged.graphs.append(graph)
        rebuilt += count
    return merged, rebuilt


class _PatchEditor:
    """Collects one original node's patch as :func:`patch_node` decides it.

    Attributes:
        patch: the patch so far.
        attributes: the node's attributes so far, by name, in order.
    """

    def __init__(self, attributes: dict[str, onnx.AttributeProto], opaque: _Opaque) -> None:
        self.patch = NodePatch()
        self.attributes = attributes
        self.opaque = opaque

    def set_inputs(self, names: list[str]) -> None:
        self.patch.inputs = names

    def set_attribute(self, attribute: onnx.AttributeProto) -> None:
        if attribute.type in _GRAPH_TYPES:
            raise MergeError(f"the converter made new subgraphs for {attribute.name!r}")
        self.attributes[attribute.name] = attribute

    def remove_attribute(self, name: str) -> None:
        del self.attributes[name]

    def merge_subgraphs(self, old: onnx.AttributeProto, new: onnx.AttributeProto) -> int:
        merged, count = _merged_attribute(self.attributes[old.name], old, new, self.opaque)
        self.attributes[old.name] = merged
        return count


def _patch(
    original: onnx.NodeProto,
    old: onnx.NodeProto,
    new: onnx.NodeProto,
    is_opaque: bool,
    opaque: _Opaque,
) -> tuple[NodePatch, int]:
    """The patch making ``original`` (converted from ``old``) match ``new``, and its count.

    ``old`` is the copy of ``original`` handed to the converter: but for the EyeLike
    placeholders in its subgraphs, the same messages. So the patched attribute list is built
    from its attributes (the patch copies them), unless it may hold subgraphs.
    """
    if is_opaque:  # new inputs at most: the attributes stay as they were
        editor = _PatchEditor({}, opaque)
        return editor.patch, patch_node(old, new, True, editor)
    previous = {a.name: a for a in old.attribute}
    if may_hold_subgraphs(old):
        editor = _PatchEditor({a.name: a for a in original.attribute}, opaque)
    else:
        editor = _PatchEditor(dict(previous), opaque)
    changed = patch_node(old, new, False, editor, previous)
    editor.patch.attributes = list(editor.attributes.values())
    return editor.patch, changed


def merge_body(
    originals: Sequence[onnx.NodeProto],
    hidden: Collection[int],
    before: onnx.GraphProto,
    after: onnx.GraphProto,
    opaque: _Opaque,
    old_outputs: list[list[str]] | None = None,
) -> MergedBody:
    """The body's nodes once ``after`` is written back; ``originals`` are not changed.

    Args:
        originals: the body's nodes as they are.
        hidden: positions in ``originals`` of the large Constant nodes left out of
            ``before`` (whose nodes are the others, in order).
        before: the weightless body handed to the converter.
        after: the converter's result; the nodes it added are named in place and become
            the body's (nothing else reads them afterwards).
        opaque: the conversion's opaque nodes.
        old_outputs: the output names of ``before``'s nodes, when read already.

    Raises:
        MergeError: the onnx-ir write-back would reorder or reject the result.
    """
    if [v.name for v in after.output] != [v.name for v in before.output]:
        raise MergeError(f"the converter renamed the outputs of graph {before.name!r}")
    hidden_set = set(hidden)
    serialized = [i for i in range(len(originals)) if i not in hidden_set]
    names = _NodeNames(originals)
    patches: list[tuple[onnx.NodeProto, NodePatch]] = []
    added: list[onnx.NodeProto] = []
    defined: set[str] = set()

    def add(proto: onnx.NodeProto, outputs: list[str]) -> onnx.NodeProto:
        if opaque and tuple(outputs) in opaque:
            raise MergeError(f"the converter replaced the opaque {proto.op_type} node")
        added.append(names.new_node(proto))
        defined.update(outputs)
        return proto

    def keep(
        proto: onnx.NodeProto,
        position: int,
        old: onnx.NodeProto,
        changed: bool,
        outputs: list[str],
    ) -> tuple[onnx.NodeProto, int]:
        original = originals[serialized[position]]
        if not changed:
            return original, 0
        is_opaque = bool(opaque) and tuple(outputs) in opaque
        patch, count = _patch(original, old, proto, is_opaque, opaque)
        patches.append((original, patch))
        return original, count

    matches = match_nodes(before, after, old_outputs)
    placement = place_nodes(matches, add, keep, stop_if_reordered=True)
    if placement.reordered:
        raise MergeError("the converter reordered the nodes it kept")
    nodes, dropped = _in_order(originals, hidden_set, placement.groups)
    nodes.extend(placement.trailing)
    return MergedBody(nodes, patches, added, dropped - defined, placement.rebuilt)


def _in_order(
    originals: Sequence[onnx.NodeProto],
    hidden: Collection[int],
    replacements: dict[int, list[onnx.NodeProto]],
) -> tuple[list[onnx.NodeProto], set[str]]:
    """The body's nodes, converted ones in their originals' places, and the dropped outputs.

    ``replacements`` maps a position among the converted (non-hidden) nodes to the nodes
    that take its place; hidden Constant nodes keep theirs.
    """
    nodes: list[onnx.NodeProto] = []
    dropped: set[str] = set()
    position = 0
    for index, original in enumerate(originals):
        if index in hidden:
            nodes.append(original)
            continue
        found = replacements.get(position)
        if found is None:
            dropped.update(original.output)
        else:
            nodes.extend(found)
        position += 1
    return nodes, dropped


def merge_graph(
    original: onnx.GraphProto, old: onnx.GraphProto, new: onnx.GraphProto, opaque: _Opaque
) -> tuple[onnx.GraphProto, int]:
    """A copy of the subgraph ``original`` (converted from ``old``) matching ``new``."""
    graph = _copy(original)
    body = merge_body(list(graph.node), (), old, new, opaque)
    write_body(graph.node, graph.value_info, body)
    return graph, body.rebuilt


def write_body(
    nodes: MutableSequence[onnx.NodeProto],
    value_info: MutableSequence[onnx.ValueInfoProto],
    body: MergedBody,
) -> None:
    """Makes ``nodes`` (the body ``body`` was merged from) hold ``body``'s nodes.

    Kept NodeProtos are neither copied nor moved in memory: patched ones are changed in
    place, new ones appended, and the field is sorted into the new order (protobuf sorts
    a repeated message field by reordering pointers), the dropped ones cut off its end.
    """
    for original, patch in body.patches:
        patch.apply(original)
    start = len(nodes)
    nodes.extend(body.added)
    appended = nodes[start:]  # held, so that sorting sees these very wrappers
    rank = {id(node): position for position, node in enumerate(body.nodes)}
    for proto, copy in zip(body.added, appended, strict=True):
        rank[id(copy)] = rank.pop(id(proto))
    end = len(body.nodes)
    nodes.sort(key=lambda node: rank.get(id(node), end))  # type: ignore[attr-defined]
    del nodes[end:]
    prune_value_info(value_info, body.dropped)


def prune_value_info(value_info: Sequence[onnx.ValueInfoProto], dropped: set[str]) -> None:
    """Removes the entries of values no node defines any more (onnx-ir drops them)."""
    if not dropped:
        return
    kept = [v for v in value_info if v.name not in dropped]
    if len(kept) == len(value_info):
        return
    del value_info[:]  # type: ignore[attr-defined]
    value_info.extend(kept)  # type: ignore[attr-defined]
