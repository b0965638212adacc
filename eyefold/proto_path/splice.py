"""Write what the passes did to the neighbourhood back into the whole ModelProto.

The chosen nodes are replaced by the small model's nodes (stand-ins and sinks
dropped); a node that survived keeps its place, a new one goes right after the last node
it reads from. Initializers the passes removed are dropped, new ones appended (as onnx-ir
appends them), each serialized once: into its place or, when large, by the save, straight
from its array (:mod:`eyefold.model_files.deferred_tensors`). The value_info of every
value the small model held is replaced by what onnx-ir writes for it; graph outputs it
held are rewritten. Outside readers of a value the passes replaced (the sinks' inputs say
which) read the new name. If the result would not be in topological order,
:class:`SpliceError` says so and nothing has been changed: the caller then takes the
whole-model path. So it does when a pass made up a name (legalization's Cast outputs)
that a node outside the neighbourhood already uses.
"""

from __future__ import annotations

import dataclasses

import onnx
import onnx_ir as ir

from eyefold.core.metadata_keys import STAND_IN_DOMAIN
from eyefold.errors import WriteBackError
from eyefold.model_files.deferred_tensors import DeferredTensors
from eyefold.proto_path.extract import Neighbourhood
from eyefold.proto_path.scan import GraphIndex

__all__ = ["SpliceError", "splice"]


class SpliceError(WriteBackError):
    """The neighbourhood's result cannot be written back in place."""


@dataclasses.dataclass
class _Edits:
    """Keyed result nodes and the renames outside readers need."""

    nodes: list[tuple[tuple[int, int, int], onnx.NodeProto]]
    renames: dict[str, str]
    producer_renames: dict[str, str]


def _renames(hood: Neighbourhood) -> tuple[dict[str, str], dict[str, str]]:
    """(old -> new name for outside readers, old -> new name of outside producers)."""
    readers = {
        old: value.name or ""
        for old, value in zip(hood.sink_names, hood.sink_inputs(), strict=True)
        if value is not None and value.name != old
    }
    producers = {
        hood.stand_ins[id(v)]: v.name or ""
        for v in hood.values
        if id(v) in hood.stand_ins and v.name != hood.stand_ins[id(v)]
    }
    return readers, producers


def _edits(hood: Neighbourhood, index: GraphIndex) -> _Edits:
    """Orders the result nodes by the main-graph position they belong at."""
    readers, producers = _renames(hood)
    keys: dict[int, tuple[int, int, int]] = {}
    keyed = []
    for seq, node in enumerate(hood.written_nodes()):
        position = hood.positions.get(id(node))
        if position is not None:
            key = (position, 0, 0)
        else:
            after = max((_key_of(v, keys, index, hood) for v in node.inputs), default=-1)
            key = (after, 1, seq)
        for value in node.inputs:
            if value is not None and _key_of(value, keys, index, hood) >= key[0] + key[1]:
                raise SpliceError(f"{node.op_type} would read a value defined after it")
        keys.update((id(v), key) for v in node.outputs)
        keyed.append((key, ir.serde.serialize_node(node)))
    return _Edits(keyed, readers, producers)


def _key_of(
    value: ir.Value | None, keys: dict[int, tuple[int, int, int]], index: GraphIndex, hood
) -> int:
    """Position of the node that defines ``value`` (-1 for inputs and initializers)."""
    if value is None:
        return -1
    if id(value) in keys:
        return keys[id(value)][0]
    name = hood.stand_ins.get(id(value))
    return index.producer.get(name, -1) if name is not None else -1


def _check_names(edits: _Edits, index: GraphIndex, hood: Neighbourhood) -> None:
    """A name a pass made up must not be one the small model could not see."""
    defined = {o for _, proto in edits.nodes for o in proto.output if o}
    defined |= set(hood.model.graph.initializers) - hood.initializers
    outside = defined - hood.names
    taken = [
        n
        for n in outside
        if n in index.producer or n in index.initializers or n in index.inputs
    ]
    if taken:
        raise SpliceError(f"the name {sorted(taken)[0]!r} is taken outside the neighbourhood")


def _check_readers(edits: _Edits, index: GraphIndex, hood: Neighbourhood) -> None:
    """Outside readers of a renamed value must come after its (new) producer."""
    keyed = {o: key for key, proto in edits.nodes for o in proto.output}
    inside = set(hood.chosen)
    for old, new in edits.renames.items():
        at = keyed.get(new, (index.producer.get(new, -1), 0, 0))
        readers = [c for c in index.consumers.get(old, ()) if c not in inside]
        if any(c <= at[0] for c in readers):
            raise SpliceError(f"{new!r} would be read before it is defined")
        if any(c in index.holders for c in readers):
            raise SpliceError(f"a subgraph reads {old!r}, which the passes replaced")


def _rename_outside(graph: onnx.GraphProto, index: GraphIndex, edits: _Edits, chosen) -> None:
    inside = set(chosen)
    for old, new in edits.renames.items():
        for position in index.consumers.get(old, ()):
            if position not in inside:
                node = graph.node[position]
                node.input[:] = [new if n == old else n for n in node.input]
    for old, new in edits.producer_renames.items():
        node = graph.node[index.producer[old]]
        node.output[:] = [new if n == old else n for n in node.output]


def _rewrite_nodes(graph: onnx.GraphProto, edits: _Edits, chosen: list[int]) -> None:
    """Survivors in place; removed nodes deleted; new nodes inserted after their key."""
    survivors = {key[0]: proto for key, proto in edits.nodes if key[1] == 0}
    inserts: dict[int, list[onnx.NodeProto]] = {}
    for key, proto in sorted(edits.nodes, key=lambda item: item[0]):
        if key[1] == 1:
            inserts.setdefault(key[0], []).append(proto)
    for position, proto in survivors.items():
        graph.node[position].CopyFrom(proto)
    removed = set(chosen) - survivors.keys()
    for position in sorted(removed | inserts.keys(), reverse=True):
        for offset, proto in enumerate(inserts.get(position, ())):
            graph.node.insert(position + 1 + offset, proto)
        if position in removed:
            del graph.node[position]


@dataclasses.dataclass
class _Tables:
    """What onnx-ir would write for the small model, except the nodes and old tensors.

    The new initializers stay values until they are serialized into their place in the
    graph (:func:`_rewrite_tables`): a folded tensor is written once, never copied.
    """

    kept: set[str]
    new_initializers: list[ir.Value]
    value_info: list[onnx.ValueInfoProto]
    outputs: list[onnx.ValueInfoProto]


def _has_info(value: ir.Value) -> bool:
    """onnx-ir writes value_info for a named value with a type, shape, doc or metadata."""
    described = value.shape is not None or value.type is not None
    return bool(value.name) and (described or bool(value.metadata_props or value.doc_string))


def _tables(hood: Neighbourhood) -> _Tables:
    graph = hood.model.graph
    new, infos = [], []
    for name, value in graph.initializers.items():
        if name not in hood.initializers and value.const_value is not None:
            value.const_value.name = name
            new.append(value)
            if _has_info(value):  # onnx-ir describes every initializer in value_info
                infos.append(ir.serde.serialize_value(value))
    infos += [
        ir.serde.serialize_value(v)
        for node in graph
        for v in node.outputs
        if not v.is_graph_output() and _has_info(v)
    ]
    return _Tables(
        kept=set(graph.initializers),
        new_initializers=new,
        value_info=infos,
        outputs=[ir.serde.serialize_value(v) for v in graph.outputs],
    )


def _rewrite_value_info(
    graph: onnx.GraphProto, touched: set[str], infos: list[onnx.ValueInfoProto]
) -> None:
    """Entries of ``touched`` names: replaced in place, dropped, or appended (new names).

    In place, so a second run that changes nothing leaves the bytes as they were.
    """
    fresh = {info.name: info for info in infos}
    stale = []
    for position, info in enumerate(graph.value_info):
        if info.name in touched:
            replacement = fresh.pop(info.name, None)
            if replacement is None:
                stale.append(position)
            else:
                info.CopyFrom(replacement)
    for position in reversed(stale):
        del graph.value_info[position]
    graph.value_info.extend(info for info in infos if info.name in fresh)


def _rewrite_tables(
    model: onnx.ModelProto, index: GraphIndex, hood: Neighbourhood
) -> DeferredTensors:
    """Initializers, value_info and graph outputs of what the small model held.

    Returns:
        The new initializers whose data is still to be written (see ``splice``).
    """
    graph = model.graph
    tables = _tables(hood)
    dropped = hood.initializers - tables.kept
    for position in sorted((index.initializers[n] for n in dropped), reverse=True):
        del graph.initializer[position]
    deferred = DeferredTensors(model)
    for value in tables.new_initializers:
        deferred.add(value)
    touched = hood.names | {v.name or "" for n in hood.model.graph for v in n.outputs}
    touched |= set(tables.kept)
    # Kept initializers and graph inputs keep their entries, as onnx-ir would write them.
    touched -= (hood.initializers & tables.kept) | set(index.inputs)
    _rewrite_value_info(graph, touched, tables.value_info)
    for position, info in zip(hood.output_positions, tables.outputs, strict=True):
        graph.output[position].CopyFrom(info)
    return deferred


def splice(model: onnx.ModelProto, index: GraphIndex, hood: Neighbourhood) -> DeferredTensors:
    """Writes the passes' result on ``hood`` into ``model`` in place (see module doc).

    Returns:
        ``model`` with its large new initializers' data still to be written: filled in
        (:meth:`~eyefold.model_files.deferred_tensors.DeferredTensors.fill`) or written
        to a file from their arrays.

    Raises:
        SpliceError: the result cannot be placed in topological order; ``model`` is
            unchanged.
    """
    edits = _edits(hood, index)
    _check_names(edits, index, hood)
    _check_readers(edits, index, hood)
    graph = model.graph
    _rename_outside(graph, index, edits, hood.chosen)
    deferred = _rewrite_tables(model, index, hood)
    _rewrite_nodes(graph, edits, hood.chosen)
    opsets = {d: v for d, v in hood.model.opset_imports.items() if d != STAND_IN_DOMAIN}
    if opsets != {o.domain: o.version for o in model.opset_import}:
        del model.opset_import[:]
        model.opset_import.extend(onnx.helper.make_opsetid(d, v) for d, v in opsets.items())
    model.ir_version = hood.model.ir_version
    return deferred
