"""What onnx's checker refuses in an EyeLike NodeProto and onnx-ir's read would hide.

onnx-ir keeps one attribute of a name (the last), reads only the field its type names and
gives an empty output name a value all the same. An EyeLike with ``k`` given twice, with
``k`` typed INT but its float field set, or with an empty output name then loads, folds
and is written out as if it were valid, though onnx's checker and onnxruntime refuse the
input. These checks read the protos before onnx-ir does and name the node as
:mod:`eyefold.core.analysis` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import onnx

from eyefold.core.domains import DEFAULT_DOMAINS, function_label
from eyefold.core.proto_subgraphs import may_hold_subgraphs, subgraph_attributes
from eyefold.errors import InvalidModelError

__all__ = ["check_eyelike_proto", "check_model_eyelikes"]

_A = onnx.AttributeProto
# The value fields of an AttributeProto and the type each belongs to (onnx/checker.cc).
_SINGULAR_FIELDS = {
    "f": _A.FLOAT,
    "i": _A.INT,
    "s": _A.STRING,
    "t": _A.TENSOR,
    "g": _A.GRAPH,
    "sparse_tensor": _A.SPARSE_TENSOR,
    "tp": _A.TYPE_PROTO,
}
_REPEATED_FIELDS = {
    "floats": _A.FLOATS,
    "ints": _A.INTS,
    "strings": _A.STRINGS,
    "tensors": _A.TENSORS,
    "graphs": _A.GRAPHS,
    "sparse_tensors": _A.SPARSE_TENSORS,
    "type_protos": _A.TYPE_PROTOS,
}


def _type_name(attr_type: int) -> str:
    return (
        _A.AttributeType.Name(attr_type)
        if attr_type in _A.AttributeType.values()
        else str(attr_type)
    )


def _disagreeing_field(attr: onnx.AttributeProto) -> tuple[str, int] | None:
    """A value field set on ``attr`` that its type does not name, with that field's type."""
    for field, field_type in _SINGULAR_FIELDS.items():
        if field_type != attr.type and attr.HasField(field):
            return field, field_type
    for field, field_type in _REPEATED_FIELDS.items():
        if field_type != attr.type and len(getattr(attr, field)):
            return field, field_type
    return None


def check_eyelike_proto(node: onnx.NodeProto, path: str) -> None:
    """Refuses what onnx's checker refuses in one EyeLike node of the graph at ``path``.

    Raises:
        InvalidModelError: an attribute given twice, an attribute whose type and value
            fields disagree (an untyped one is left to the structure checks), or an empty
            output name; the message names the node.
    """
    label = repr(node.name) if node.name else "(unnamed EyeLike)"
    where = f"EyeLike node {label} in {path}"
    names = [attr.name for attr in node.attribute]
    for name in dict.fromkeys(names):
        if names.count(name) > 1:
            raise InvalidModelError(
                f"{where}: attribute {name!r} appears {names.count(name)} times; an"
                " attribute is given once"
            )
    for attr in node.attribute:
        if attr.type == _A.UNDEFINED:
            continue
        disagreeing = _disagreeing_field(attr)
        if disagreeing is not None:
            field, field_type = disagreeing
            raise InvalidModelError(
                f"{where}: attribute {attr.name!r} is typed {_type_name(attr.type)} but sets"
                f" its {field} field ({_type_name(field_type)}): its type and data fields"
                " disagree"
            )
    if any(not output for output in node.output):
        raise InvalidModelError(f"{where} has an empty output name; its output is required")


def _graph_nodes(
    nodes: Iterable[onnx.NodeProto], path: str
) -> Iterator[tuple[onnx.NodeProto, str]]:
    """(node, path of its graph) for ``nodes`` and every node of their subgraphs."""
    for index, node in enumerate(nodes):
        yield node, path
        if not may_hold_subgraphs(node):
            continue
        for attr, graphs in subgraph_attributes(node):
            for position, graph in enumerate(graphs):
                label = attr.name if attr.type == _A.GRAPH else f"{attr.name}[{position}]"
                sub = f"{path}/{node.name or f'{node.op_type}_{index}'}.{label}"
                yield from _graph_nodes(graph.node, sub)


def check_model_eyelikes(model: onnx.ModelProto) -> None:
    """:func:`check_eyelike_proto` for every EyeLike of every graph and function.

    Walks every node: the whole-model path runs it, whose read of the model costs far more.
    """
    bodies = [(model.graph.node, "main")]
    bodies.extend((f.node, function_label(f)) for f in model.functions)
    for nodes, path in bodies:
        for node, graph_path in _graph_nodes(nodes, path):
            if node.op_type == "EyeLike" and node.domain in DEFAULT_DOMAINS:
                check_eyelike_proto(node, graph_path)
