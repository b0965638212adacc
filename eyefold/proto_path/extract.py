"""Which nodes form the EyeLike neighbourhood, and the small onnx_ir model holding them.

The neighbourhood is every node a pass may read or change:

* the EyeLike nodes and the identity-shaped constants' consumers (the rules' roots);
* each Equal of an unsqueezed Range (maybe dynamo's Range/Equal identity), its whole
  backward slice (the rules read its Ranges' constants and sizes) and its consumers, as
  an EyeLike's;
* backward: the producer of each EyeLike input when a rule looks at producers of its
  op, and the whole backward slice when the input's shape or type is not declared
  (shape inference then reads it all);
* forward: the consumers of each EyeLike output whose op a rule looks at, and further
  through those a rewrite may replace (Cast, CastLike, Transpose, Identity, MatMul: what
  takes their place may be an EyeLike, whose consumers are then tried);
* every producer all of whose outputs only removable nodes read (EyeLike, the replaced
  ops above, and such producers in turn): the dead code a fold or a rewrite may leave
  behind, and the producers a rule looks through round after round.

A producer or consumer of another op is only a writer or a reader of the EyeLike's values,
which no pass looks at: it stays outside, as every other node does.

Outside values the neighbourhood reads come from stand-in nodes whose inputs are the
graph inputs the value is computed from (so the fold reports the same ``from_inputs``).
Sink nodes read every value that something outside reads, so a pass sees the same users
(no value looks dead that is not), and after the passes their inputs say which value
each outside reader must now read. A sink reads at most :data:`SINK_WIDTH` values:
onnx-ir rebuilds a node's input tuple on every replaced use, so one sink reading thousands
of values would make a fold of thousands of EyeLike nodes quadratic. Initializers keep
their tensors lazily: the small model holds the original TensorProto (or external-data
reference), never a copy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping

import onnx
import onnx_ir as ir

from eyefold.core.metadata_keys import BAKED_IN_KEY, STAND_IN_DOMAIN
from eyefold.proto_path.scan import GraphIndex
from eyefold.rewriting.reach import LOOKED_AT_OPS, NEIGHBOUR_OPS, REPLACED_OPS

__all__ = ["SINK_WIDTH", "Neighbourhood", "build_neighbourhood", "choose_nodes", "core_nodes"]

# The most values one sink node reads (see the module docstring).
SINK_WIDTH = 64


@dataclasses.dataclass
class Neighbourhood:
    """The small model and what the splice needs to map it back.

    Attributes:
        model: the onnx_ir model the passes run on.
        chosen: positions of the main-graph nodes it holds, ascending.
        positions: ``id()`` of each of its nodes -> position in the main graph.
        sinks: the sink nodes; ``sink_names`` holds the former names of their inputs.
        sink_names: the names outside readers read, in the order the sinks read them.
        stand_ins: ``id()`` of each stand-in's output value -> the outside name.
        initializers: names of the initializers the small model holds.
        output_positions: position in the main graph's outputs of each output.
        values: every value of the small model before the passes (kept alive for ids).
        names: the names of those values before the passes.
    """

    model: ir.Model
    chosen: list[int]
    positions: dict[int, int]
    sinks: list[ir.Node]
    sink_names: list[str]
    stand_ins: dict[int, str]
    initializers: set[str]
    output_positions: list[int]
    values: list[ir.Value]
    names: set[str]

    def new_tensor_bytes(self) -> int:
        """Bytes of the initializers the passes added (folded EyeLike outputs)."""
        graph = self.model.graph
        return sum(
            value.const_value.nbytes
            for name, value in graph.initializers.items()
            if name not in self.initializers and value.const_value is not None
        )

    def sink_inputs(self) -> list[ir.Value | None]:
        """What the sinks read now, in the order of :attr:`sink_names`."""
        return [value for sink in self.sinks for value in sink.inputs]

    def written_nodes(self) -> list[ir.Node]:
        """The small model's nodes the splice writes into the main graph."""
        return [n for n in self.model.graph if n.domain != STAND_IN_DOMAIN]


def _declared_static(index: GraphIndex, name: str) -> bool:
    """True when ``name`` has a declared element type and fully static shape."""
    if name in index.initializers or name in index.inputs:
        return True
    graph = index.graph
    where = index.value_info.get(name)
    if where is not None:
        info = graph.value_info[where]
    elif name in index.outputs:
        info = graph.output[index.outputs.index(name)]
    else:
        return False
    tensor = info.type.tensor_type
    if not tensor.elem_type or not tensor.HasField("shape"):
        return False
    return all(d.HasField("dim_value") for d in tensor.shape.dim)


def _backward(
    index: GraphIndex,
    chosen: set[int],
    start: int,
    levels: int | None,
    sliced: set[int],
) -> None:
    """Adds the producers of ``start``'s inputs, ``levels`` deep (None: all of them).

    ``sliced`` holds the nodes whose whole backward slice is chosen already: full walks
    share it, so EyeLike nodes along one long chain do not each walk it all again.
    """
    seen = sliced if levels is None else {start}
    seen.add(start)
    work = [(start, 0)]
    while work:
        position, depth = work.pop()
        if levels is not None and depth >= levels:
            continue
        for name in index.node_inputs[position]:
            producer = index.producer.get(name)
            if producer is not None and producer not in seen:
                seen.add(producer)
                chosen.add(producer)
                work.append((producer, depth + 1))


def _forward(
    index: GraphIndex, chosen: set[int], removable: set[int], names: list[str]
) -> None:
    """Adds the consumers of ``names`` a rule looks at, and on through those it rewrites."""
    nodes = index.graph.node
    work = list(names)
    while work:
        for consumer in index.consumers.get(work.pop(), ()):
            op_type = index.op_types[consumer]
            if consumer in chosen or op_type not in LOOKED_AT_OPS:
                continue
            chosen.add(consumer)
            if op_type in REPLACED_OPS:
                removable.add(consumer)
                work.extend(o for o in nodes[consumer].output if o)


def _add_dead_code(index: GraphIndex, chosen: set[int], removable: set[int]) -> None:
    """Adds every producer whose outputs only removable nodes read (the fixpoint)."""
    nodes = index.graph.node
    outputs = set(index.outputs)
    work = list(removable)
    while work:
        for name in index.node_inputs[work.pop()]:
            producer = index.producer.get(name)
            if producer is None or producer in removable:
                continue
            produced = [o for o in nodes[producer].output if o]
            if all(
                o not in outputs and all(c in removable for c in index.consumers.get(o, ()))
                for o in produced
            ):
                removable.add(producer)
                chosen.add(producer)
                work.append(producer)


def _producer_op(index: GraphIndex, name: str) -> str | None:
    producer = index.producer.get(name)
    return None if producer is None else index.op_types[producer]


def core_nodes(index: GraphIndex) -> set[int]:
    """The neighbourhood as if every EyeLike input's shape were known (no whole slices).

    Every neighbourhood :func:`choose_nodes` gives holds these nodes, whatever the
    inference of undeclared inputs finds: it only decides which whole backward slices
    are added. So a way out the core shows is known before that inference runs.
    """
    chosen: set[int] = set(index.eyelike)
    removable: set[int] = set(index.eyelike)
    nodes = index.graph.node
    sliced: set[int] = set()
    for position in index.eyelike:
        inputs = index.node_inputs[position]
        if inputs and _producer_op(index, inputs[0]) in NEIGHBOUR_OPS:
            _backward(index, chosen, position, 1, sliced)
        _forward(index, chosen, removable, [o for o in nodes[position].output if o])
    for position in index.range_identities:
        chosen.add(position)
        _backward(index, chosen, position, None, sliced)
        _forward(index, chosen, removable, [o for o in nodes[position].output if o])
    for name in index.identity_candidates:
        for consumer in index.consumers.get(name, ()):
            chosen.add(consumer)
            if nodes[consumer].op_type in REPLACED_OPS:
                removable.add(consumer)
    _add_dead_code(index, chosen, removable)
    return chosen


def choose_nodes(
    index: GraphIndex, inferred: Collection[str] = (), core: set[int] | None = None
) -> list[int]:
    """Positions of the neighbourhood's nodes (see the module docstring), ascending.

    ``inferred`` names EyeLike inputs known static though undeclared: like declared ones,
    they need at most their producer (:mod:`eyefold.proto_path.infer_inputs`); every
    other EyeLike input brings its whole backward slice. ``core``: :func:`core_nodes`,
    when computed already.
    """
    chosen = set(core_nodes(index) if core is None else core)
    sliced: set[int] = set()
    for position in index.eyelike:
        inputs = index.node_inputs[position]
        if inputs and not (inputs[0] in inferred or _declared_static(index, inputs[0])):
            _backward(index, chosen, position, None, sliced)
    return sorted(chosen)


def _read_names(index: GraphIndex, chosen: list[int]) -> list[str]:
    """Names the chosen nodes read, first use first."""
    found: dict[str, None] = {}
    for position in chosen:
        found.update(dict.fromkeys(n for n in index.node_inputs[position] if n))
    return list(found)


def _stand_in(names: list[str], feeding: frozenset[str]) -> onnx.NodeProto:
    return onnx.helper.make_node(
        "StandIn", sorted(feeding), names, domain=STAND_IN_DOMAIN, name=f"stand_in/{names[0]}"
    )


def _add_stand_in(
    runs: list[tuple[frozenset[str], list[str], bool]],
    name: str,
    feeding: frozenset[str],
    read_outside: bool,
) -> None:
    """Adds ``name`` to the stand-ins, sharing the last one's node where nothing changes.

    A run of values computed from the same graph inputs and read outside the neighbourhood
    (so a sink keeps each one used: no pass can leave one dead) shares one stand-in node;
    the fold reports the same ``from_inputs`` for each, and the graph has one node where
    it had thousands (an EyeLike per block of a long model, each reading the block's
    value). A value no sink reads keeps a node of its own, which dead-code removal can
    take away alone.
    """
    if runs and read_outside and runs[-1][2] and runs[-1][0] == feeding:
        runs[-1][1].append(name)
    else:
        runs.append((feeding, [name], read_outside))


def _small_graph(
    index: GraphIndex, chosen: list[int], declared: Mapping[str, onnx.ValueInfoProto]
) -> tuple[onnx.GraphProto, list[str], list[int]]:
    """The small GraphProto (initializers as dataless placeholders), sink names, outputs."""
    graph, source = onnx.GraphProto(name=index.graph.name), index.graph
    inside = set(chosen)
    produced = {o for p in chosen for o in source.node[p].output if o}
    inputs: dict[str, None] = {}
    runs: list[tuple[frozenset[str], list[str], bool]] = []
    sink: list[str] = []
    for name in _read_names(index, chosen):
        if name in produced:
            continue
        outside = any(c not in inside for c in index.consumers.get(name, ()))
        if name in index.initializers:
            tensor = source.initializer[index.initializers[name]]
            graph.initializer.add(name=name, data_type=tensor.data_type, dims=tensor.dims)
        elif name in index.producer:
            feeding = index.inputs_feeding(name)
            inputs.update(dict.fromkeys(sorted(feeding)))
            _add_stand_in(runs, name, feeding, outside)
        else:
            inputs[name] = None
        if outside and (name in index.producer or name in index.initializers):
            sink.append(name)
    stand_ins = [_stand_in(names, feeding) for feeding, names, _ in runs]
    sink.extend(
        o
        for o in sorted(produced, key=index.producer.__getitem__)
        if any(c not in inside for c in index.consumers.get(o, ()))
    )
    graph.input.extend(source.input[index.inputs.index(n)] for n in inputs)
    graph.node.extend(stand_ins)
    graph.node.extend(source.node[p] for p in chosen)
    graph.node.extend(
        onnx.helper.make_node("Sink", sink[i : i + SINK_WIDTH], [], domain=STAND_IN_DOMAIN)
        for i in range(0, len(sink), SINK_WIDTH)
    )
    known = produced | {t.name for t in graph.initializer}
    known.update(o for n in stand_ins for o in n.output)
    graph.value_info.extend(
        source.value_info[index.value_info[n]] for n in known if n in index.value_info
    )
    graph.value_info.extend(declared[n] for n in known if n in declared)
    outputs = [i for i, name in enumerate(index.outputs) if name in known or name in inputs]
    graph.output.extend(source.output[i] for i in outputs)
    return graph, sink, outputs


def build_neighbourhood(
    model: onnx.ModelProto,
    index: GraphIndex,
    chosen: list[int],
    base_dir: str = "",
    declared: Mapping[str, onnx.ValueInfoProto] | None = None,
    baked_in: Mapping[str, list[str]] | None = None,
) -> Neighbourhood:
    """The onnx_ir model of the chosen nodes (see the module docstring).

    Args:
        model: the whole model (read only).
        index: its scan.
        chosen: :func:`choose_nodes`'s positions.
        base_dir: folder external data is read from (lazily), as onnx-ir's loader uses.
        declared: value_info for values the model leaves undeclared (inferred static).
        baked_in: for those, the graph inputs with a static dim their shapes were
            computed from (in each value's ``meta``, for the fold's report).
    """
    graph, sink_names, output_positions = _small_graph(index, chosen, declared or {})
    small = onnx.ModelProto(
        ir_version=model.ir_version,
        graph=graph,
        producer_name=model.producer_name,
        producer_version=model.producer_version,
        domain=model.domain,
        model_version=model.model_version,
    )
    small.opset_import.extend(model.opset_import)
    small.functions.extend(model.functions)
    result = ir.serde.deserialize_model(small)
    for value in result.graph.initializers.values():
        original = index.graph.initializer[index.initializers[value.name or ""]]
        value.const_value = ir.serde.deserialize_tensor(original, base_dir)
    nodes = list(result.graph)
    sinks = [n for n in nodes if n.domain == STAND_IN_DOMAIN and n.op_type == "Sink"]
    stand_in_count = len(nodes) - len(chosen) - len(sinks)
    inner = nodes[stand_in_count : len(nodes) - len(sinks)]
    values = [v for n in nodes for v in n.outputs]
    values += [*result.graph.inputs, *result.graph.initializers.values()]
    for value in values:
        if baked_in and value.name in baked_in:
            value.meta[BAKED_IN_KEY] = baked_in[value.name]
    return Neighbourhood(
        model=result,
        chosen=chosen,
        positions={id(n): p for n, p in zip(inner, chosen, strict=True)},
        sinks=sinks,
        sink_names=sink_names,
        stand_ins={id(v): v.name or "" for n in nodes[:stand_in_count] for v in n.outputs},
        initializers=set(result.graph.initializers),
        output_positions=output_positions,
        values=values,
        names={v.name for v in values if v.name},
    )
