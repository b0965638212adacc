"""One cheap walk over a ModelProto: where the EyeLike nodes are, and who reads what.

The neighbourhood path (:mod:`eyefold.proto_path`) deserializes only the nodes around the
EyeLike nodes. To choose them it needs, for the main graph, each value's producer and
consumers, and to know it may skip the rest, that nothing the passes act on lives
elsewhere. This walk reads only names and op types (attributes only of the few nodes that
can hold subgraphs), so it costs a fraction of a protobuf parse, not an onnx-ir
deserialization. Anything unusual (an EyeLike in a subgraph or function, a graph that is
not in topological order, a value defined twice) is recorded as an ``obstacle``: the
caller then takes the whole-model path, whose checks give the proper error or result.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import onnx

__all__ = ["GraphIndex", "free_names", "scan_model"]

_DEFAULT_DOMAINS = ("", "ai.onnx")
_GRAPH_TYPES = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
# Default-domain ops that hold subgraphs; other domains may hold them too.
_SUBGRAPH_OPS = frozenset({"If", "Loop", "Scan", "SequenceMap"})


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
        holders: indices of nodes that hold subgraphs.
        obstacle: why the neighbourhood path cannot be taken, or None.
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
    holders: set[int] = dataclasses.field(default_factory=set)
    obstacle: str | None = None
    node_inputs: list[tuple[str, ...]] = dataclasses.field(default_factory=list)
    _feeding: dict[str, frozenset[str]] = dataclasses.field(default_factory=dict)

    def inputs_feeding(self, name: str) -> frozenset[str]:
        """Graph inputs ``name`` is computed from (through node inputs, as the fold asks).

        Computed for every value at the first call, in one pass in graph order (sets are
        shared, so a graph fed by one input holds one set), then looked up.
        """
        if not self._feeding:
            self._feeding = _feeding_sets(self)
        return self._feeding.get(name, frozenset())


def _feeding_sets(index: GraphIndex) -> dict[str, frozenset[str]]:
    empty: frozenset[str] = frozenset()
    feeding = {name: frozenset((name,)) for name in index.inputs}
    get = feeding.get
    for position, names in enumerate(index.node_inputs):
        found: frozenset[str] | None = None
        for name in names:
            parent = get(name, empty)
            found = parent if found is None or found is parent else found | parent
        for output in index.graph.node[position].output:
            feeding[output] = found or empty
    return feeding


def _subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            yield from attr.graphs


def _is_identity_candidate(tensor: onnx.TensorProto, dtypes: frozenset[int]) -> bool:
    dims = tensor.dims
    return tensor.data_type in dtypes and len(dims) == 2 and dims[0] == dims[1]


def _constant_candidate(node: onnx.NodeProto, dtypes: frozenset[int]) -> bool:
    return any(
        attr.name == "value" and attr.HasField("t") and _is_identity_candidate(attr.t, dtypes)
        for attr in node.attribute
    )


def free_names(graph: onnx.GraphProto, dtypes: frozenset[int]) -> tuple[set[str], str | None]:
    """Outer-scope names a subgraph reads, and why the neighbourhood path must not be taken.

    A subgraph matters to the passes only if it holds an EyeLike or an identity candidate;
    otherwise its nodes are copied as they are and only the outer values it reads count.
    """
    defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    used: set[str] = set()
    obstacle = None
    if any(_is_identity_candidate(t, dtypes) for t in graph.initializer):
        obstacle = "an identity-shaped constant sits in a subgraph"
    for node in graph.node:
        if node.op_type == "EyeLike" and node.domain in _DEFAULT_DOMAINS:
            obstacle = "an EyeLike sits in a subgraph"
        elif dtypes and node.op_type == "Constant" and _constant_candidate(node, dtypes):
            obstacle = "an identity-shaped constant sits in a subgraph"
        used.update(n for n in node.input if n)
        for sub in _subgraphs(node):
            inner, inner_obstacle = free_names(sub, dtypes)
            used |= inner
            obstacle = obstacle or inner_obstacle
        defined.update(node.output)
    return used - defined, obstacle


def _function_obstacle(model: onnx.ModelProto) -> str | None:
    for function in model.functions:
        for node in function.node:
            if node.op_type == "EyeLike" and node.domain in _DEFAULT_DOMAINS:
                return "an EyeLike sits in a model-local function"
            if any(True for _ in _subgraphs(node)):
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
            t.name for t in graph.initializer if _is_identity_candidate(t, dtypes)
        ]
    if set(index.inputs) & index.initializers.keys():
        index.obstacle = "an initializer is also a graph input"
    elif len(index.initializers) != len(graph.initializer):
        index.obstacle = "two initializers share a name"
    if graph.sparse_initializer:
        index.obstacle = "the graph holds sparse initializers"


def _index_node(
    index: GraphIndex, position: int, node: onnx.NodeProto, dtypes: frozenset[int]
) -> None:
    """Records a node holding subgraphs or an identity candidate (the uncommon cases)."""
    reads: set[str] = set()
    for sub in _subgraphs(node):
        index.holders.add(position)
        inner, obstacle = free_names(sub, dtypes)
        reads |= inner
        index.obstacle = index.obstacle or obstacle
    for name in reads - set(node.input):
        index.consumers.setdefault(name, []).append(position)
    if dtypes and node.op_type == "Constant" and _constant_candidate(node, dtypes):
        index.identity_candidates.extend(node.output)


def _index_nodes(index: GraphIndex, dtypes: frozenset[int]) -> None:
    """Producers, consumers, EyeLike positions; an obstacle for an unsorted graph."""
    nodes = index.graph.node
    index.node_inputs = ins = [tuple(n.input) for n in nodes]
    outs = [tuple(n.output) for n in nodes]
    producer = index.producer = {o: i for i, names in enumerate(outs) for o in names if o}
    if len(producer) != sum(len([o for o in names if o]) for names in outs):
        index.obstacle = index.obstacle or "a value is defined twice"
    known = set(index.inputs) | index.initializers.keys()
    if known & producer.keys():
        index.obstacle = index.obstacle or "a node redefines a graph input or initializer"
    consumers, get, unsorted = index.consumers, producer.get, None
    for position, names in enumerate(ins):
        for name in names:
            found = consumers.get(name)
            if found is None:
                consumers[name] = [position]
            else:
                found.append(position)
            at = get(name)
            if (at is None and name not in known and name) or (
                at is not None and at >= position
            ):
                unsorted = name
    if unsorted is not None:
        index.obstacle = index.obstacle or f"{unsorted!r} is read before it is defined"
    for position, (op_type, domain) in enumerate((n.op_type, n.domain) for n in nodes):
        if op_type == "EyeLike" and domain in _DEFAULT_DOMAINS:
            index.eyelike.append(position)
        elif (
            op_type in _SUBGRAPH_OPS or domain not in _DEFAULT_DOMAINS or op_type == "Constant"
        ):
            _index_node(index, position, nodes[position], dtypes)


def scan_model(model: onnx.ModelProto, dtypes: frozenset[int] = frozenset()) -> GraphIndex:
    """Indexes the main graph of ``model`` in one walk (see :class:`GraphIndex`).

    Args:
        model: the model; it is read, never changed.
        dtypes: element types (TensorProto codes) of the constants the selected rules
            treat as identity matrices.
    """
    index = GraphIndex(model.graph)
    _index_io(index, dtypes)
    index.obstacle = index.obstacle or _function_obstacle(model)
    _index_nodes(index, dtypes)
    known = set(index.inputs) | index.initializers.keys() | index.producer.keys()
    missing = [name for name in index.outputs if name not in known]
    if missing:
        index.obstacle = index.obstacle or f"graph output {missing[0]!r} is never defined"
    return index
