"""Upgrade a ModelProto's opset in place, converting weightless copies of its bodies.

The conversion is ``UpgradeOpsetPass``'s: each body (the main graph with its subgraphs,
each model-local function below the target) goes through :func:`convert_graph` as a
weightless GraphProto, and onnx's full checker validates the converted model (functions
included; :mod:`eyefold.upgrade.validation`) before the model is touched. Only the ends
differ: the weightless body is built from the proto's own fields, large initializers and
Constant tensors declared as typed graph inputs (their TensorProtos are neither copied
nor moved), and the converted nodes replace the body's
(:mod:`eyefold.upgrade.writeback_proto`), the original NodeProtos kept wherever the
converter left them as they were.

Whatever the onnx-ir upgrade would refuse, or might do otherwise (an error of any kind,
an EyeLike in a scope older than EyeLike, sparse initializers, a result the onnx-ir
write-back would reorder), makes :func:`upgrade_proto` raise, saying why, the model
unchanged: the whole-model path then gives the result or the precise error.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, MutableSequence, Sequence

import onnx

from eyefold.core.domains import DEFAULT_DOMAINS, default_opset, function_label
from eyefold.core.eyelike_types import EYELIKE_MIN_OPSET
from eyefold.core.gc_pause import cyclic_gc_paused
from eyefold.core.proto_subgraphs import BodyColumns
from eyefold.core.weightless import is_large, proto_large_constant, proto_nbytes, typed_input
from eyefold.errors import (
    EyefoldError,
    FallbackKind,
    WholeModelNeeded,
    WriteBackError,
    error_text,
)
from eyefold.upgrade.conversion import (
    BodyUpgrade,
    GraphConversion,
    convert_graph,
    function_upgrade,
)
from eyefold.upgrade.proto_graphs import iter_proto_graphs
from eyefold.upgrade.target import min_ir_version
from eyefold.upgrade.validation import (
    FunctionBody,
    checkable_model,
    checker_problem,
    set_default_opset,
)
from eyefold.upgrade.writeback_proto import MergedBody, merge_body, write_body

__all__ = ["ConverterTypes", "upgrade_proto"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ConverterTypes:
    """The types onnx's converter inferred for the main graph's values, once upgraded.

    The C++ converter runs onnx's inference on the weightless body before converting it,
    and its result declares every value it typed (``value_info``). Where that body held
    the same facts an inference of the upgraded model would start from, those types spare
    the second inference (:mod:`eyefold.proto_path.infer_inputs` says when).

    Attributes:
        value_info: the converted main graph's ``value_info``.
        declared: whether the body handed to the converter declared value_info of its own
            (which onnx's inference starts from).
    """

    value_info: Sequence[onnx.ValueInfoProto]
    declared: bool


@dataclasses.dataclass
class _Weightless:
    """A body's weightless model and the positions of the Constant nodes left out.

    The model is the one handed to the converter: its graph is the body.
    """

    model: onnx.ModelProto
    hidden: list[int]


def _weightless(
    name: str,
    nodes: MutableSequence[onnx.NodeProto],
    io: tuple[Iterable[onnx.ValueInfoProto], Iterable[onnx.ValueInfoProto]],
    value_info: Iterable[onnx.ValueInfoProto],
    initializers: Iterable[onnx.TensorProto] = (),
    op_types: list[str] | None = None,
) -> _Weightless:
    """A model of the body with its large tensors declared as typed graph inputs.

    ``op_types``: the nodes' op types, when the caller has read them already.
    """
    model = onnx.ModelProto()
    graph = model.graph
    graph.name = name or "eyefold_upgrade"
    graph.input.extend(io[0])
    graph.output.extend(io[1])
    graph.value_info.extend(value_info)
    declared = {value.name for value in graph.input}
    small = []
    for tensor in initializers:
        if not is_large(proto_nbytes(tensor)):
            small.append(tensor)
        elif tensor.name not in declared:
            graph.input.append(typed_input(tensor.name, tensor))
    graph.initializer.extend(small)
    hidden = []
    op_types = [node.op_type for node in nodes] if op_types is None else op_types
    for position in [i for i, op in enumerate(op_types) if op == "Constant"]:
        node = nodes[position]
        tensor = proto_large_constant(node)
        if tensor is not None:
            hidden.append(position)
            graph.input.append(typed_input(node.output[0], tensor))
    if hidden:
        skip = set(hidden)
        graph.node.extend(n for i, n in enumerate(nodes) if i not in skip)
    else:
        graph.node.extend(nodes)
    return _Weightless(model, hidden)


def _function_weightless(function: onnx.FunctionProto) -> _Weightless:
    names = (
        [onnx.ValueInfoProto(name=n) for n in function.input],
        [onnx.ValueInfoProto(name=n) for n in function.output],
    )
    return _weightless(function.name, function.node, names, function.value_info)


def _imports(entries: Iterable[onnx.OperatorSetIdProto]) -> dict[str, int]:
    return {entry.domain: entry.version for entry in entries}


def _raise_imports(entries: Iterable[onnx.OperatorSetIdProto], target: int) -> None:
    entries = list(entries)
    versions = _imports(entries)
    set_default_opset(versions, target)
    for entry in entries:
        entry.version = versions[entry.domain]


def _eyelike_predates(model: onnx.ModelProto, source: int) -> bool:
    """Whether some scope with an EyeLike has an opset older than EyeLike (conservative)."""
    opsets = [default_opset(_imports(f.opset_import)) or source for f in model.functions]
    opsets.append(source)
    if min(opsets) >= EYELIKE_MIN_OPSET:
        return False
    bodies = [n for g in iter_proto_graphs(model.graph) for n in g.node]
    bodies += [n for f in model.functions for g in _function_graphs(f) for n in g.node]
    return any(n.op_type == "EyeLike" and n.domain in DEFAULT_DOMAINS for n in bodies)


def _function_graphs(function: onnx.FunctionProto) -> Iterable[onnx.GraphProto]:
    return iter_proto_graphs(onnx.GraphProto(node=function.node))


@dataclasses.dataclass
class _Converted:
    """One converted body: its weightless form, conversion and merged nodes."""

    weightless: _Weightless
    conversion: GraphConversion
    merged: MergedBody | None = None


def _convert_functions(
    model: onnx.ModelProto, main: BodyUpgrade
) -> list[tuple[onnx.FunctionProto, _Converted | None]]:
    converted: list[tuple[onnx.FunctionProto, _Converted | None]] = []
    for function in model.functions:
        imports = _imports(function.opset_import)
        upgrade = function_upgrade(imports, main, function_label(function))
        if upgrade is None:
            converted.append((function, None))
            continue
        weightless = _function_weightless(function)
        conversion = convert_graph(weightless.model, upgrade, in_function=True)
        converted.append((function, _Converted(weightless, conversion)))
    return converted


def _check(
    model: onnx.ModelProto,
    main: _Converted,
    functions: list[tuple[onnx.FunctionProto, _Converted | None]],
    target: int,
    ir_version: int,
) -> str | None:
    """What onnx's full checker finds in the converted model (None: it accepts it)."""
    bodies = []
    for function, converted in functions:
        copy = onnx.FunctionProto()
        copy.CopyFrom(function)
        body = FunctionBody(copy)
        if converted is not None:
            body.conversion = converted.conversion
            body.hidden = [function.node[i] for i in converted.weightless.hidden]
        bodies.append(body)
    conversions = [main.conversion] + [c.conversion for _, c in functions if c is not None]
    placeholders = set().union(*(c.placeholders for c in conversions))
    proto = checkable_model(
        main.conversion,
        bodies,
        _imports(model.opset_import),
        target=target,
        ir_version=ir_version,
    )
    return checker_problem(proto, placeholders)


def _merge(
    originals: MutableSequence[onnx.NodeProto],
    converted: _Converted,
    columns: BodyColumns | None = None,
) -> MergedBody:
    """The write-back of one body; ``columns``: the originals', when read already."""
    conversion = converted.conversion
    hidden = converted.weightless.hidden
    old_outputs = None
    if columns is not None:  # the converter's copy has the originals' outputs
        skip = set(hidden)
        old_outputs = [o for i, o in enumerate(columns.outputs) if i not in skip]
    return merge_body(
        columns.nodes if columns is not None else list(originals),
        hidden,
        conversion.before.graph,
        conversion.after.graph,
        conversion.opaque,
        old_outputs,
    )


def upgrade_proto(
    model: onnx.ModelProto, source: int, target: int, main: BodyColumns | None = None
) -> ConverterTypes:
    """Upgrades ``model`` in place from ``source`` to ``target`` as ``UpgradeOpsetPass`` does.

    Args:
        model: the model; its default-domain opset is ``source``.
        source: the opset it upgrades from, below ``target`` (whether an upgrade is due
            is the caller's decision: :func:`eyefold.proto_path.optimize_proto`'s).
        target: the opset it upgrades to.
        main: the main graph's columns, when the caller has read them already.

    Returns:
        The types the converter inferred for the upgraded main graph.

    Raises:
        WholeModelNeeded: why the upgrade is left to the whole-model path (which gives
            the result or the precise error); the model is unchanged.
    """
    assert source < target, "no upgrade is due"
    with cyclic_gc_paused():
        return _upgrade(model, source, target, main)


def _refused(
    source: int, target: int, why: str, kind: FallbackKind = FallbackKind.UPGRADE
) -> WholeModelNeeded:
    """The whole-model path's turn, the upgrade named as the report names it."""
    return WholeModelNeeded(kind, f"the opset {source} -> {target} upgrade: {why}")


def _upgrade(
    model: onnx.ModelProto, source: int, target: int, columns: BodyColumns | None
) -> ConverterTypes:
    graph = model.graph
    if graph.sparse_initializer:
        # The scan names them by the same kind: the file path does not take such a graph
        # apart, whether it upgrades it or not.
        sparse = "the graph holds sparse initializers"
        raise _refused(source, target, sparse, FallbackKind.INDIVISIBLE_GRAPH)
    if _eyelike_predates(model, source):
        why = f"an EyeLike sits in a scope older than opset {EYELIKE_MIN_OPSET}"
        raise _refused(source, target, why)
    ir_version = max(model.ir_version, min_ir_version(target))
    declared = len(graph.value_info) > 0
    try:
        weightless = _weightless(
            graph.name,
            graph.node,
            (graph.input, graph.output),
            graph.value_info,
            graph.initializer,
            None if columns is None else columns.op_types,
        )
        imports = _imports(model.opset_import)
        upgrade = BodyUpgrade(imports, source, target, model.ir_version, "main graph")
        main = _Converted(
            weightless, convert_graph(weightless.model, upgrade, in_function=False)
        )
        functions = _convert_functions(model, upgrade)
        problem = _check(model, main, functions, target, ir_version)
        if problem is not None:
            why = f"the converted model fails onnx's checker{problem}"
            raise _refused(source, target, why)
        main.merged = _merge(graph.node, main, columns)
        for function, converted in functions:
            if converted is not None:
                converted.merged = _merge(function.node, converted)
    except (EyefoldError, WriteBackError) as error:
        why = f"the upgrade failed ({error_text(error)})"
        raise _refused(source, target, why) from None
    # Nothing below can fail: the model is changed only now.
    write_body(graph.node, graph.value_info, main.merged)
    rebuilt = main.merged.rebuilt
    for function, converted in functions:
        if converted is not None and converted.merged is not None:
            write_body(function.node, function.value_info, converted.merged)
            rebuilt += converted.merged.rebuilt
        _raise_imports(function.opset_import, target)
    _raise_imports(model.opset_import, target)
    model.ir_version = ir_version
    logger.info("opset %d -> %d: %d nodes changed or added", source, target, rebuilt)
    return ConverterTypes(main.conversion.after.graph.value_info, declared)
