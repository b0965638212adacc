"""Hand onnx's C++ shape inference only models it cannot crash on.

onnx 1.23's EyeLike type-and-shape inference segfaults (it kills the whole process, no
exception) when a node has a ``dtype`` attribute and its input has no known type, e.g. when
the input comes from a custom-domain op. onnx-ir's ShapeInferencePass and
``onnx.checker.check_model(full_check=True)`` inherit the crash. Whether the input type is
known at that point depends on what onnx itself infers upstream, so every EyeLike with a
``dtype`` is rewritten, in a throwaway copy only, as ``Cast(EyeLike(x), to=dtype)``: the
same output type and shape, and no code path that reads a missing input type.

onnx's messages about such a copy name the Cast (``op_type:Cast``) and the renamed value;
:class:`DefusedEyeLikes` says them again in the user's terms.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, MutableSequence

import onnx

from eyefold.core.domains import DEFAULT_DOMAINS
from eyefold.core.proto_subgraphs import node_subgraphs

__all__ = ["DefusedEyeLikes", "defuse_eyelike_dtype", "replacement_ops", "restore_names"]

# How onnx's checker and shape inference name a node: "(op_type:Cast, node name: n)",
# "(op_type:Cast)" when it has no name, and "Name: n OpType: Cast" (the checker's context).
_NODE_IN_MESSAGE = re.compile(
    r"op_type:(?P<op>\w+)(?:, node name: (?P<name>[^)]*))?\)"
    r"|Name: (?P<name2>.*?) OpType: (?P<op2>\w+)"
)


def restore_names(
    text: str, ops: Mapping[tuple[str, str], str], names: Mapping[str, str]
) -> str:
    """``text`` with EyeLike replacements and renamed values as the user's model names them.

    Args:
        text: a message from onnx about a copy in which nodes replace EyeLike nodes.
        ops: (replacing op type, node name) -> the op type the user's node has.
        names: replacing value or node names -> the user's names.
    """

    def node(found: re.Match[str]) -> str:
        if found.group("op") is not None:
            op, name = found.group("op"), found.group("name") or ""
            real, name = ops.get((op, name), op), names.get(name, name)
            return f"op_type:{real}, node name: {name})" if name else f"op_type:{real})"
        op, name = found.group("op2"), found.group("name2")
        return f"Name: {names.get(name, name)} OpType: {ops.get((op, name), op)}"

    text = _NODE_IN_MESSAGE.sub(node, text)
    if names:
        pattern = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
        text = re.sub(pattern, lambda m: names[m.group(0)], text)
    return text


def replacement_ops(
    nodes: Iterable[onnx.NodeProto], replacements: set[tuple[str, ...]]
) -> dict[tuple[str, str], str]:
    """(op type, name) of the nodes among ``nodes`` that replace an EyeLike -> "EyeLike".

    ``replacements``: the output names of each such node.

    A pair that a real node of the same op also has is left out: a message naming it may
    be about the real node, and saying EyeLike then would be the untruth.
    """
    found: dict[tuple[str, str], str] = {}
    real: set[tuple[str, str]] = set()
    for node in nodes:
        key = (node.op_type, node.name)
        if tuple(node.output) in replacements:
            found[key] = "EyeLike"
        else:
            real.add(key)
    return {key: op for key, op in found.items() if key not in real}


@dataclasses.dataclass
class DefusedEyeLikes:
    """What :func:`defuse_eyelike_dtype` renamed, to map onnx's messages back.

    Attributes:
        ops: (the Cast's op type, its node name) -> "EyeLike".
        names: the Cast's node name and the renamed value -> the EyeLike's node and output
            names.
    """

    ops: dict[tuple[str, str], str] = dataclasses.field(default_factory=dict)
    names: dict[str, str] = dataclasses.field(default_factory=dict)

    def __len__(self) -> int:
        """The number of EyeLike nodes rewritten."""
        return len(self.ops)

    def restore(self, text: str) -> str:
        """``text`` naming the user's EyeLike nodes and values instead of the defused ones."""
        return restore_names(text, self.ops, self.names)


def _rewrite_nodes(
    nodes: list[onnx.NodeProto], defused: DefusedEyeLikes
) -> list[onnx.NodeProto]:
    rewritten: list[onnx.NodeProto] = []
    for node in nodes:
        for graph in node_subgraphs(node):
            _rewrite_graph(graph, defused)
        dtype = None
        if node.op_type == "EyeLike" and node.domain in DEFAULT_DOMAINS:
            dtype = next((a for a in node.attribute if a.name == "dtype"), None)
        if dtype is None:
            rewritten.append(node)
            continue
        number = len(defused) + 1
        final_name = node.output[0] if node.output else ""
        untyped = f"{final_name}__eyefold_untyped_{number}"
        kept = [a for a in node.attribute if a.name != "dtype"]
        del node.attribute[:]
        node.attribute.extend(kept)
        if node.output:
            node.output[0] = untyped
        cast_name = f"{node.name}__eyefold_dtype_{number}"
        cast = onnx.helper.make_node("Cast", [untyped], [final_name], name=cast_name)
        defused.ops[("Cast", cast_name)] = "EyeLike"
        defused.names.update({cast_name: node.name, untyped: final_name})
        if dtype.ref_attr_name:  # in a function body, dtype may name a function attribute
            cast.attribute.add(name="to", ref_attr_name=dtype.ref_attr_name, type=dtype.type)
        else:
            cast.attribute.add(name="to", i=dtype.i, type=onnx.AttributeProto.INT)
        rewritten.extend([node, cast])
    return rewritten


def _rewrite_graph(graph: onnx.GraphProto, defused: DefusedEyeLikes) -> None:
    _replace_nodes(graph.node, defused)


def _replace_nodes(field: MutableSequence[onnx.NodeProto], defused: DefusedEyeLikes) -> None:
    """Rewrites a node list in place; left as it is (no copy) when no EyeLike changed."""
    before = len(defused)
    nodes = _rewrite_nodes(list(field), defused)
    if len(defused) != before:
        del field[:]
        field.extend(nodes)


def defuse_eyelike_dtype(model: onnx.ModelProto) -> DefusedEyeLikes:
    """Rewrites, in place, every EyeLike with ``dtype`` into ``Cast(EyeLike(x))``.

    Only call this on a copy made for onnx's checker or shape inference.

    Returns:
        The defused EyeLikes (``len()``: how many), to say onnx's
        messages about the copy in the user's terms with :meth:`DefusedEyeLikes.restore`.
    """
    defused = DefusedEyeLikes()
    _rewrite_graph(model.graph, defused)
    for function in model.functions:
        _replace_nodes(function.node, defused)
    return defused
