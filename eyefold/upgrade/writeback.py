"""What the upgrade writes back: the rules both write-backs follow, once.

The converter works on a weightless copy of a body and returns a new GraphProto. Writing
that back onto the model it came from is done twice, on an onnx-ir body
(:mod:`eyefold.upgrade.writeback_ir`) and on a ModelProto body
(:mod:`eyefold.upgrade.writeback_proto`), and both must make the same model. What they
share is decided here:

* which original node each converted node stands for (:func:`match_nodes`);
* where each node goes: the kept originals in their places, each node the converter added
  right before the next kept one, the last ones at the end; kept nodes the converter
  reordered are flagged (:func:`place_nodes`);
* what a changed node's patch does: new inputs, then (unless the node is opaque) each
  changed attribute replaced, dropped, or its subgraphs merged node by node, and how many
  nodes that counts as changed (:func:`patch_node`, applied through a :class:`NodeEditor`).

The adapters apply those decisions to their own model, each the way it stays fast there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Generic, Protocol, TypeAlias, TypeVar

import onnx

__all__ = ["NodeEditor", "NodeMatch", "Placement", "match_nodes", "patch_node", "place_nodes"]

_Node = TypeVar("_Node")

_GRAPH_TYPES = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)

# One converted node and the original it stands for: (converted node, the original's
# position in the body handed to the converter or None for a node the converter added,
# that original as handed to the converter or None, whether the converter changed it, the
# converted node's output names). A plain tuple: a body has tens of thousands of them.
NodeMatch: TypeAlias = tuple[
    onnx.NodeProto, int | None, onnx.NodeProto | None, bool, list[str]
]


def match_nodes(
    before: onnx.GraphProto,
    after: onnx.GraphProto,
    old_outputs: list[list[str]] | None = None,
) -> list[NodeMatch]:
    """Each converted node of ``after`` with the node of ``before`` it stands for.

    A converted node stands for the original with the same op, domain, overload and
    outputs (at most one each); "changed" compares the messages (field presence, unknown
    fields and the bits of floats count: equal means the same serialized bytes). Each
    node's outputs are read once, by slicing, and handed on with the match;
    ``old_outputs``: those of ``before``'s nodes, when the caller has read them already.
    """
    old_nodes = list(before.node)
    if old_outputs is None:
        old_outputs = [node.output[:] for node in old_nodes]
    # The first node defining a name wins, as a dict filled in reverse keeps it.
    position_of = {
        outputs[0]: position
        for position, outputs in reversed(list(enumerate(old_outputs)))
        if outputs
    }
    new_nodes = list(after.node)
    kept: set[int] = set()
    matched: list[NodeMatch] = []
    for proto, outputs in zip(new_nodes, [node.output[:] for node in new_nodes], strict=True):
        position = position_of.get(outputs[0]) if outputs else None
        if position is not None and position not in kept and outputs == old_outputs[position]:
            old = old_nodes[position]
            changed = proto != old  # equal messages have the same op, domain and overload
            if not changed or (
                old.op_type == proto.op_type
                and old.domain == proto.domain
                and old.overload == proto.overload
            ):
                kept.add(position)
                matched.append((proto, position, old, changed, outputs))
                continue
        matched.append((proto, None, None, True, outputs))
    return matched


@dataclasses.dataclass
class Placement(Generic[_Node]):
    """Where the written-back nodes go, in an adapter's own nodes.

    Attributes:
        groups: for each kept original, by its position in the body handed to the
            converter, the nodes that take its place: those the converter added right
            before it, then itself; in the converter's order.
        trailing: the nodes the converter added after its last kept one.
        reordered: the converter put kept nodes in another order.
        rebuilt: the nodes changed or added.
    """

    groups: dict[int, list[_Node]]
    trailing: list[_Node]
    reordered: bool
    rebuilt: int


def place_nodes(
    matches: list[NodeMatch],
    add: Callable[[onnx.NodeProto, list[str]], _Node],
    keep: Callable[[onnx.NodeProto, int, onnx.NodeProto, bool, list[str]], tuple[_Node, int]],
    *,
    stop_if_reordered: bool = False,
) -> Placement[_Node]:
    """Each match made a node of the adapter's, in the converter's order, and placed.

    ``add`` makes the node for a converted node with no original (from it and its
    outputs); ``keep`` gives the original of a match (called with the match's fields)
    and the nodes its patch changed (0 when unchanged). With ``stop_if_reordered``, the
    walk ends at the first kept node out of order (the placement is then only good for
    its ``reordered``).
    """
    groups: dict[int, list[_Node]] = {}
    pending: list[_Node] = []
    last, rebuilt, reordered = -1, 0, False
    for proto, position, old, changed, outputs in matches:
        if position is None or old is None:
            pending.append(add(proto, outputs))
            rebuilt += 1
            continue
        if position < last:
            reordered = True
            if stop_if_reordered:
                break
        last = position
        node, count = keep(proto, position, old, changed, outputs)
        pending.append(node)
        rebuilt += count
        groups[position] = pending
        pending = []
    return Placement(groups, pending, reordered, rebuilt)


class NodeEditor(Protocol):
    """Changes one original node of an adapter's model as :func:`patch_node` decides."""

    def set_inputs(self, names: list[str]) -> None:
        """The node now reads the values of these names."""

    def set_attribute(self, attribute: onnx.AttributeProto) -> None:
        """``attribute`` replaces the node's attribute of its name, or is added last."""

    def remove_attribute(self, name: str) -> None:
        """The node loses its attribute ``name``."""

    def merge_subgraphs(self, old: onnx.AttributeProto, new: onnx.AttributeProto) -> int:
        """Merges ``new``'s subgraphs into the node's (converted from ``old``'s).

        Node by node; returns the number of their nodes changed or added.
        """


def patch_node(
    old: onnx.NodeProto,
    new: onnx.NodeProto,
    is_opaque: bool,
    editor: NodeEditor,
    previous: Mapping[str, onnx.AttributeProto] | None = None,
) -> int:
    """Makes the original (handed to the converter as ``old``) match ``new`` via ``editor``.

    An opaque node (an EyeLike placeholder, a node with attribute references) gets its new
    inputs only: its attributes stay as they were. ``previous``: ``old``'s attributes by
    name, when the caller has read them already. Returns the nodes changed: 1 for the node
    itself, plus those changed inside its subgraphs.
    """
    changed = 0
    inputs = new.input[:]
    if inputs != old.input[:]:
        editor.set_inputs(inputs)
        changed = 1
    if is_opaque:
        return changed
    remaining = {a.name: a for a in old.attribute} if previous is None else dict(previous)
    for attribute in new.attribute:
        prior = remaining.pop(attribute.name, None)
        if prior is not None and prior == attribute:  # field by field, bits of floats too
            continue
        if prior is not None and prior.type == attribute.type and prior.type in _GRAPH_TYPES:
            changed += editor.merge_subgraphs(prior, attribute)
        else:
            editor.set_attribute(attribute)
            changed = max(changed, 1)
    for prior in remaining.values():
        editor.remove_attribute(prior.name)
        changed = max(changed, 1)
    return changed
