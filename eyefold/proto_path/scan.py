"""One cheap walk over a ModelProto: where the EyeLike nodes are, and who reads what.

The neighbourhood path (:mod:`eyefold.proto_path`) deserializes only the nodes around the
EyeLike nodes. To choose them it needs, for the main graph, each value's producer and
consumers, and to know it may skip the rest, that nothing the passes act on lives
elsewhere. This walk reads only names and op types (attributes only of the few nodes that
can hold subgraphs), so it costs a fraction of a protobuf parse, not an onnx-ir
deserialization. Anything unusual is recorded as an ``obstacle``, of one of two kinds
(:class:`~eyefold.errors.FallbackKind`): what the passes act on lies out of reach (an
EyeLike or identity-shaped constant in a subgraph, an EyeLike in a function), or the graph
is one the file path does not take apart (a value defined twice or never, sparse
initializers). The caller then takes the whole-model path, whose checks give the proper
error or result.

The walk is the file path's largest cost after the protobuf parse, so it is written for
speed: each node's fields are read once, in one comprehension; the cyclic garbage
collector, which would otherwise walk the growing heap again and again while some
hundred thousand tuples are made, is paused (the walk makes no reference cycles); and
which graph inputs a value is computed from is worked out only when asked, only as far
into the graph as the value asked for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import onnx

from eyefold.core.domains import DEFAULT_DOMAINS
from eyefold.core.gc_pause import cyclic_gc_paused
from eyefold.core.proto_subgraphs import (
    holder_positions,
    may_hold_subgraphs,
    node_subgraphs,
    outer_reads,
)
from eyefold.core.weightless import is_large, proto_nbytes
from eyefold.errors import FallbackKind
from eyefold.model_files.tensors import attribute_tensors, body_tensors

__all__ = ["GraphIndex", "scan_model"]

# Default-domain ops with tensor attributes (whose data may be external; Constant's may be
# an identity candidate): the walk looks into them, and into the subgraph holders.
_TENSOR_OPS = frozenset({"Constant", "ConstantOfShape"})
_EXTERNAL = onnx.TensorProto.EXTERNAL
_DEFAULT_DOMAINS_SET = frozenset(DEFAULT_DOMAINS)


@dataclasses.dataclass
class GraphIndex:
    """Names and positions of the main graph, as read from the proto.

    Attributes:
        graph: the main graph.
        producer: value name -> index of the node that outputs it.
        consumers: value name -> indices of the nodes that read it (a node whose subgraphs
            read an outer value counts as reading it), in graph order.
        inputs: graph input names, in order.
        outputs: graph output names, in order.
        initializers: initializer name -> index in ``graph.initializer``.
        value_info: value name -> index in ``graph.value_info``.
        eyelike: indices of the default-domain EyeLike nodes.
        identity_candidates: names of square 2-D constants (initializers or Constant
            outputs) of the element types asked for: the rules may treat them as
            identity matrices, so their consumers belong to the neighbourhood.
        range_identities: indices of the Equal nodes that compare an unsqueezed Range:
            maybe dynamo's Range/Equal identity (:mod:`eyefold.core.range_identity`),
            which the rules read as an identity operand, so its whole chain and its
            consumers belong to the neighbourhood.
        holders: indices of nodes that hold subgraphs.
        outer_reads: the outer values a holder's subgraphs read besides its inputs, by
            the holder's index, sorted.
        obstacle: why the neighbourhood path cannot be taken, as the kind and the
            reason of the :class:`~eyefold.errors.WholeModelNeeded` the caller raises
            once it has sorted what it can (the first found), or None.
        unsorted: whether some node reads a value a later node defines (the graph is not
            in topological order; the file path sorts it and scans it again).
        node_inputs: each node's input names, by position.
        node_outputs: each node's output names, by position.
        op_types: each node's op type, by position.
        domains: each node's domain, by position.
        external_locations: data file locations (as written) of the tensors the walk saw
            keeping their data in a file: main graph initializers, tensor attributes of
            the nodes the walk looks into (the only default-domain ops with tensor
            attributes are among them), and every tensor of subgraphs and functions.
        external_elsewhere: whether any of those is not a main-graph initializer.
        large_constants: positions of the default-domain Constant nodes whose tensor is
            too large for a weightless copy (``eyefold.core.weightless``), ascending.
    """

    graph: onnx.GraphProto
    producer: dict[str, int] = dataclasses.field(default_factory=dict)
    consumers: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    inputs: list[str] = dataclasses.field(default_factory=list)
    outputs: list[str] = dataclasses.field(default_factory=list)
    initializers: dict[str, int] = dataclasses.field(default_factory=dict)
    value_info: dict[str, int] = dataclasses.field(default_factory=dict)
    eyelike: list[int] = dataclasses.field(default_factory=list)
    identity_candidates: list[str] = dataclasses.field(default_factory=list)
    range_identities: list[int] = dataclasses.field(default_factory=list)
    holders: set[int] = dataclasses.field(default_factory=set)
    outer_reads: dict[int, list[str]] = dataclasses.field(default_factory=dict)
    obstacle: tuple[FallbackKind, str] | None = None
    unsorted: bool = False
    node_inputs: list[list[str]] = dataclasses.field(default_factory=list)
    node_outputs: list[list[str]] = dataclasses.field(default_factory=list)
    op_types: list[str] = dataclasses.field(default_factory=list)
    domains: list[str] = dataclasses.field(default_factory=list)
    external_locations: set[str] = dataclasses.field(default_factory=set)
    external_elsewhere: bool = False
    large_constants: list[int] = dataclasses.field(default_factory=list)
    _masks: dict[str, int] = dataclasses.field(default_factory=dict)
    _walked: int = 0

    def inputs_feeding(self, name: str) -> frozenset[str]:
        """Graph inputs ``name`` is computed from (through node inputs, as the fold asks).

        Each value gets a bit mask of graph inputs, propagated in graph order only as far
        as the latest producer asked about so far: the fold asks for a handful of values,
        and most of a big graph is never walked for it.
        """
        if not self._walked and not self._masks:
            self._masks = {n: 1 << i for i, n in enumerate(self.inputs)}
        at = self.producer.get(name)
        if at is not None:
            _propagate(self, at)
        mask = self._masks.get(name, 0)
        return frozenset(n for i, n in enumerate(self.inputs) if mask >> i & 1)


def _propagate(index: GraphIndex, last: int) -> None:
    """Extends the input masks to the outputs of the nodes up to position ``last``."""
    masks, ins, outs = index._masks, index.node_inputs, index.node_outputs
    get = masks.get
    for position in range(index._walked, last + 1):
        mask = 0
        for read in ins[position]:
            mask |= get(read, 0)
        for name in outs[position]:
            masks[name] = mask
    index._walked = max(index._walked, last + 1)


def _note_external(index: GraphIndex, tensors: Iterator[onnx.TensorProto]) -> bool:
    """Adds the data file locations of the external ``tensors`` to the index.

    Returns whether there was any.
    """
    found = False
    for tensor in tensors:
        if tensor.data_location == _EXTERNAL:
            locations = [e.value for e in tensor.external_data if e.key == "location"]
            index.external_locations.update(locations or [""])
            found = True
    return found


def _is_identity_candidate(tensor: onnx.TensorProto, dtypes: frozenset[int]) -> bool:
    dims = tensor.dims
    return tensor.data_type in dtypes and len(dims) == 2 and dims[0] == dims[1]


def _constant_candidate(node: onnx.NodeProto, dtypes: frozenset[int]) -> bool:
    return any(
        attr.name == "value" and attr.HasField("t") and _is_identity_candidate(attr.t, dtypes)
        for attr in node.attribute
    )


def _record_obstacle(index: GraphIndex, kind: FallbackKind, reason: str | None) -> None:
    """Records ``reason`` as the obstacle, unless one was found before it."""
    if index.obstacle is None and reason is not None:
        index.obstacle = (kind, reason)


def _subgraph_obstacle(graph: onnx.GraphProto, dtypes: frozenset[int]) -> str | None:
    """Why a subgraph keeps the neighbourhood path from being taken, or None.

    A subgraph matters to the passes only if it holds an EyeLike or an identity candidate;
    otherwise its nodes are copied as they are and only the outer values it reads count.
    Of several, the last one found in the graph's own nodes is named.
    """
    obstacle = None
    if any(_is_identity_candidate(t, dtypes) for t in graph.initializer):
        obstacle = "an identity-shaped constant sits in a subgraph"
    for node in graph.node:
        if node.op_type == "EyeLike" and node.domain in DEFAULT_DOMAINS:
            obstacle = "an EyeLike sits in a subgraph"
        elif dtypes and node.op_type == "Constant" and _constant_candidate(node, dtypes):
            obstacle = "an identity-shaped constant sits in a subgraph"
        for sub in node_subgraphs(node):
            obstacle = obstacle or _subgraph_obstacle(sub, dtypes)
    return obstacle


def _function_obstacle(model: onnx.ModelProto) -> str | None:
    """Why a model-local function keeps the neighbourhood path from being taken, or None."""
    for function in model.functions:
        for node in function.node:
            if node.op_type == "EyeLike" and node.domain in DEFAULT_DOMAINS:
                return "an EyeLike sits in a model-local function"
            if any(True for _ in node_subgraphs(node)):
                return "a model-local function holds subgraphs"
    return None


def _index_io(index: GraphIndex, dtypes: frozenset[int]) -> None:
    graph = index.graph
    index.inputs = [v.name for v in graph.input]
    index.outputs = [v.name for v in graph.output]
    index.initializers = {t.name: i for i, t in enumerate(graph.initializer)}
    index.value_info = {v.name: i for i, v in enumerate(graph.value_info)}
    if dtypes:
        index.identity_candidates = [
            t.name
            for t in graph.initializer
            if t.data_type in dtypes and _is_identity_candidate(t, dtypes)
        ]
    if graph.sparse_initializer:
        _record_obstacle(
            index, FallbackKind.INDIVISIBLE_GRAPH, "the graph holds sparse initializers"
        )
    if set(index.inputs) & index.initializers.keys():
        _record_obstacle(
            index, FallbackKind.INDIVISIBLE_GRAPH, "an initializer is also a graph input"
        )
    elif len(index.initializers) != len(graph.initializer):
        _record_obstacle(
            index, FallbackKind.INDIVISIBLE_GRAPH, "two initializers share a name"
        )
    _note_external(index, iter(graph.initializer))


def _index_node(
    index: GraphIndex, position: int, node: onnx.NodeProto, dtypes: frozenset[int]
) -> None:
    """Records what a node the walk looks into holds: subgraphs, tensors, constants.

    Its attributes are read in one pass (a graph may hold thousands of Constant nodes);
    only the nodes that may hold subgraphs are looked into again for them.
    """
    tensors: list[onnx.TensorProto] = []
    constant = node.op_type == "Constant"
    candidate, value = False, None
    for attr in node.attribute:
        if attr.HasField("t"):
            tensors.append(attr.t)
            if constant and dtypes and attr.name == "value" and not candidate:
                candidate = _is_identity_candidate(attr.t, dtypes)
        if attr.tensors:
            tensors.extend(attr.tensors)
        if attr.HasField("sparse_tensor"):
            tensors += (attr.sparse_tensor.values, attr.sparse_tensor.indices)
        if attr.type == onnx.AttributeProto.TENSOR and value is None and attr.name == "value":
            value = attr.t
    if tensors and _note_external(index, iter(tensors)):
        index.external_elsewhere = True
    reads: set[str] = set()
    for sub in node_subgraphs(node) if may_hold_subgraphs(node) else ():
        index.holders.add(position)
        if _note_external(index, body_tensors(sub)):
            index.external_elsewhere = True
        reads |= outer_reads(sub)
        if index.obstacle is None:  # the walk below is spared once one is found
            _record_obstacle(index, FallbackKind.OUT_OF_REACH, _subgraph_obstacle(sub, dtypes))
    outer = sorted(reads - set(node.input)) if reads else []
    if outer:
        index.outer_reads[position] = outer
        for name in outer:
            index.consumers.setdefault(name, []).append(position)
    if candidate:
        index.identity_candidates.extend(node.output)
    default_domain = node.domain in _DEFAULT_DOMAINS_SET
    if constant and value is not None and default_domain and is_large(proto_nbytes(value)):
        index.large_constants.append(position)


def _undefined_read(index: GraphIndex, known: set[str]) -> str | None:
    """A name some node reads that no node, graph input or initializer defines."""
    undefined = index.consumers.keys() - index.producer.keys() - known - {""}
    if undefined:
        return min(undefined, key=lambda name: index.consumers[name][0])
    return None


def _index_nodes(index: GraphIndex, dtypes: frozenset[int]) -> None:
    """Producers, consumers, EyeLike positions; an obstacle for an unsorted graph.

    Each field is read once per node, by slicing (cheaper than iterating a repeated
    field); the rest works on those Python lists.
    Consumers are recorded before the uncommon nodes add their subgraphs' outer reads,
    so only node inputs decide whether the graph is in order.
    """
    listed = list(index.graph.node)  # one wrapper per node, reused by every column
    index.node_inputs = ins = [n.input[:] for n in listed]
    ops = index.op_types = [n.op_type for n in listed]
    domains = index.domains = [n.domain for n in listed]
    outs = index.node_outputs = [n.output[:] for n in listed]
    producer = index.producer = {o: i for i, names in enumerate(outs) for o in names if o}
    if len(producer) != sum(map(len, outs)) and len(producer) != len(
        [o for names in outs for o in names if o]
    ):
        _record_obstacle(index, FallbackKind.INDIVISIBLE_GRAPH, "a value is defined twice")
    known = set(index.inputs) | index.initializers.keys()
    if known & producer.keys():
        redefined = "a node redefines a graph input or initializer"
        _record_obstacle(index, FallbackKind.INDIVISIBLE_GRAPH, redefined)
    consumers, at, early = index.consumers, producer.get, None
    for position, names in enumerate(ins):
        for name in names:
            found = consumers.get(name)
            if found is None:  # the first reader: is the value defined before it?
                consumers[name] = [position]
                if at(name, -1) >= position:
                    early = name
            else:
                found.append(position)
    index.unsorted = early is not None
    unsorted = early or _undefined_read(index, known)
    if unsorted is not None:
        _record_obstacle(
            index, FallbackKind.INDIVISIBLE_GRAPH, f"{unsorted!r} is read before it is defined"
        )
    index.eyelike = [i for i, op in enumerate(ops) if op == "EyeLike"]
    if not _DEFAULT_DOMAINS_SET.issuperset(domains):
        index.eyelike = [i for i in index.eyelike if domains[i] in DEFAULT_DOMAINS]
    index.range_identities = _range_equals(index)
    for position in _looked_into(ops, domains):
        node = listed[position]
        if node.attribute:
            _index_node(index, position, node, dtypes)


def _range_equals(index: GraphIndex) -> list[int]:
    """Positions of the Equal nodes that read an Unsqueeze of a Range (the rows)."""
    ops, at = index.op_types, index.producer.get
    if "Equal" not in ops or "Range" not in ops:
        return []

    def unsqueezed_range(name: str) -> bool:
        unsqueeze = at(name)
        if unsqueeze is None or ops[unsqueeze] != "Unsqueeze":
            return False
        source = index.node_inputs[unsqueeze][:1]
        counted = at(source[0]) if source else None
        return counted is not None and ops[counted] == "Range"

    return [
        position
        for position, op in enumerate(ops)
        if op == "Equal"
        and index.domains[position] in DEFAULT_DOMAINS
        and any(unsqueezed_range(name) for name in index.node_inputs[position])
    ]


def _looked_into(op_types: list[str], domains: list[str]) -> list[int]:
    """Positions of the nodes whose attributes the walk reads, given the graph's columns.

    Only these can hold subgraphs or tensors: the nodes that may hold subgraphs (other
    domains' nodes among them) and the default-domain ops with tensor attributes.
    """
    holders = holder_positions(op_types, domains)
    if _TENSOR_OPS.isdisjoint(op_types):
        return holders
    constants = [i for i, op in enumerate(op_types) if op in _TENSOR_OPS]
    return sorted({*holders, *constants})


def scan_model(model: onnx.ModelProto, dtypes: frozenset[int] = frozenset()) -> GraphIndex:
    """Indexes the main graph of ``model`` in one walk (see :class:`GraphIndex`).

    Args:
        model: the model; it is read, never changed.
        dtypes: element types (TensorProto codes) of the constants the selected rules
            treat as identity matrices.
    """
    index = GraphIndex(model.graph)
    with cyclic_gc_paused():
        _index_io(index, dtypes)
        if index.obstacle is None:
            _record_obstacle(index, FallbackKind.OUT_OF_REACH, _function_obstacle(model))
        for function in model.functions:
            for node in function.node:
                if _note_external(index, attribute_tensors(node)):
                    index.external_elsewhere = True
        _index_nodes(index, dtypes)
    known = set(index.inputs) | index.initializers.keys() | index.producer.keys()
    missing = [name for name in index.outputs if name not in known]
    if missing:
        never = f"graph output {missing[0]!r} is never defined"
        _record_obstacle(index, FallbackKind.INDIVISIBLE_GRAPH, never)
    return index
