"""Check a converted model with onnx's full checker before the model itself is touched.

Both ways of upgrading (an onnx-ir model, ``eyefold.passes.upgrade_opset``; a ModelProto,
``eyefold.upgrade.on_proto``) hand the same pieces here: the converter's weightless
main graph, each model-local function's converted body and the opset imports. The
checked model is assembled from the converter's own protos, so no weight is serialized.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import MutableMapping

import onnx
import onnx.defs

from eyefold.core.domains import DEFAULT_DOMAINS, default_opset
from eyefold.core.onnx_safety import replacement_ops, restore_names
from eyefold.errors import one_line
from eyefold.upgrade.conversion import GraphConversion, iter_proto_graphs

__all__ = [
    "FunctionBody",
    "checkable_model",
    "checker_problem",
    "restore_references",
    "set_default_opset",
]

_OP_IN_MESSAGE = re.compile(r"(?:OpType: |op_type:|for operator )(\w+)")


def set_default_opset(opset_imports: MutableMapping[str, int], version: int) -> None:
    """Raises the default-domain entry (either spelling, both when both exist)."""
    for domain in DEFAULT_DOMAINS:
        if domain in opset_imports and opset_imports[domain] < version:
            opset_imports[domain] = version


def restore_references(graph: onnx.GraphProto, conversion: GraphConversion) -> None:
    """Puts the nodes with attribute references (the converter drops them) back in a proto.

    EyeLike placeholders stay: they check as the same types and shapes, never crash onnx's
    inference, and eyefold's own analysis validates the EyeLike nodes afterwards.
    """
    references = {k: v for k, v in conversion.opaque.items() if v is not None}
    if not references:
        return
    for subgraph in iter_proto_graphs(graph):
        for node in subgraph.node:
            original = references.get(tuple(node.output))
            if original is not None:
                node.CopyFrom(original)


def checker_problem(proto: onnx.ModelProto, placeholders: set[tuple[str, ...]]) -> str | None:
    """None if onnx's full checker accepts ``proto``, else " at op X: <first line>".

    ``placeholders`` (output names) mark the EyeLike placeholders: the message names EyeLike.
    """
    try:
        onnx.checker.check_model(proto, full_check=True)
    except Exception as error:  # ValidationError, InferenceError and others
        nodes = [n for g in iter_proto_graphs(proto.graph) for n in g.node]
        nodes += [n for f in proto.functions for n in f.node]
        ops = replacement_ops(nodes, placeholders)
        text = restore_names(str(error), ops, {}).strip()
        found = _OP_IN_MESSAGE.search(text)
        op = f" at op {found.group(1)}" if found else ""
        return f"{op}: {one_line(text) or type(error).__name__}"
    return None


def unregistered_op(model: onnx.ModelProto) -> str | None:
    """The checker's complaint about a main-graph op its opset lacks, or None.

    A cheap substitute for onnx's checker where eyefold does not run it (``--no-upgrade``):
    the first thing the checker refuses in an exporter's output is an op written at an
    opset that does not have it yet (jax2onnx's BitwiseXor at opset 17). Reading the op
    types costs a tenth of the checker's walk of a large model.
    """
    opset = default_opset({o.domain: o.version for o in model.opset_import})
    if opset is None:
        return None
    ops = {(n.domain, n.op_type) for n in model.graph.node}
    for domain, op_type in sorted(ops):
        if domain in DEFAULT_DOMAINS and not onnx.defs.has(op_type, opset, ""):
            return (
                f"the model is invalid at opset {opset} at op {op_type}: onnx's checker"
                f" refuses it (No Op registered for {op_type} with domain_version of"
                f" {opset})"
            )
    return None


@dataclasses.dataclass
class FunctionBody:
    """A model-local function as the checker gets it.

    Attributes:
        proto: the function (a copy the checked model may own).
        conversion: its body's conversion, None when it was not converted.
        hidden: its large Constant nodes, which the converter never saw.
    """

    proto: onnx.FunctionProto
    conversion: GraphConversion | None = None
    hidden: list[onnx.NodeProto] = dataclasses.field(default_factory=list)


def checkable_model(
    main: GraphConversion,
    functions: list[FunctionBody],
    opset_imports: dict[str, int],
    *,
    target: int | None,
    ir_version: int,
) -> onnx.ModelProto:
    """The converted model (or with ``target`` None, the original) for onnx's checker.

    Built in the protos handed to and returned by the converter (the main graph is not
    copied); the function protos are changed in place.
    """
    proto = main.before if target is None else main.after
    del proto.functions[:]
    proto.ir_version = ir_version
    restore_references(proto.graph, main)
    del proto.opset_import[:]
    imports = dict(opset_imports)
    if target is not None:
        set_default_opset(imports, target)
    for domain, version in imports.items():
        proto.opset_import.add(domain=domain, version=version)
    for function in functions:
        conversion = function.conversion
        if conversion is not None:
            body = onnx.GraphProto()
            body.CopyFrom(
                conversion.before.graph if target is None else conversion.after.graph
            )
            restore_references(body, conversion)
            del function.proto.node[:]
            function.proto.node.extend(function.hidden)
            function.proto.node.extend(body.node)
            for opset in function.proto.opset_import:
                if opset.domain in DEFAULT_DOMAINS and target is not None:
                    opset.version = max(opset.version, target)
        proto.functions.append(function.proto)
    return proto
