"""The one walk into the subgraphs of NodeProtos, and which nodes can hold them.

Every walk over a proto's graphs reaches subgraphs here: :func:`subgraph_attributes`
(with their attributes), :func:`node_subgraphs`, :func:`nested_graphs` (depth first, at
any depth) and :func:`outer_reads` (what a subgraph reads from the scopes around it).

In the default domain only If, Loop, Scan and SequenceMap have graph attributes (no other
schema declares one, and onnx's checker refuses a graph attribute on any other op of the
domain); nodes of other domains may hold graphs. Reading a node's op type and domain costs
a fifth of walking its attributes, so walks over large bodies look into these nodes only.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Iterator, Sequence

import onnx

from eyefold.core.domains import DEFAULT_DOMAINS

__all__ = [
    "SUBGRAPH_OPS",
    "BodyColumns",
    "body_columns",
    "holder_positions",
    "may_hold_subgraphs",
    "nested_graphs",
    "node_subgraphs",
    "outer_reads",
    "subgraph_attributes",
    "subgraph_holders",
]

# Default-domain ops that hold subgraphs; other domains may hold them too.
SUBGRAPH_OPS = frozenset({"If", "Loop", "Scan", "SequenceMap"})
_DEFAULT_DOMAINS = frozenset(DEFAULT_DOMAINS)


def subgraph_attributes(
    node: onnx.NodeProto,
) -> Iterator[tuple[onnx.AttributeProto, Sequence[onnx.GraphProto]]]:
    """Each graph attribute of ``node`` with the graphs it holds (one, or a list)."""
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr, (attr.g,)
        elif attr.type == onnx.AttributeProto.GRAPHS:
            yield attr, attr.graphs


def node_subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    """The graphs ``node`` holds (If branches, Loop and Scan bodies...)."""
    for _, graphs in subgraph_attributes(node):
        yield from graphs


def nested_graphs(nodes: Iterable[onnx.NodeProto]) -> Iterator[onnx.GraphProto]:
    """Every graph ``nodes`` hold, at any depth: each before the graphs inside it."""
    for node in nodes:
        for graph in node_subgraphs(node):
            yield graph
            yield from nested_graphs(graph.node)


def outer_reads(graph: onnx.GraphProto) -> set[str]:
    """Names a subgraph reads that it does not define itself (outer-scope values)."""
    defined = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    read: set[str] = set()
    for node in graph.node:
        read.update(name for name in node.input if name)
        for sub in node_subgraphs(node):
            read |= outer_reads(sub)
        defined.update(node.output)
    return read - defined


def may_hold_subgraphs(node: onnx.NodeProto) -> bool:
    """Whether ``node`` may hold subgraphs (see the module's note)."""
    return node.op_type in SUBGRAPH_OPS or node.domain not in _DEFAULT_DOMAINS


def subgraph_holders(nodes: Sequence[onnx.NodeProto]) -> list[int]:
    """Positions of the nodes that may hold subgraphs, in order (see the module's note)."""
    return holder_positions([node.op_type for node in nodes], [node.domain for node in nodes])


def holder_positions(ops: list[str], domains: list[str]) -> list[int]:
    """Positions of the nodes that may hold subgraphs, given a body's op types and domains."""
    if SUBGRAPH_OPS.isdisjoint(ops) and _DEFAULT_DOMAINS.issuperset(domains):
        return []
    return [
        position
        for position, (op, domain) in enumerate(zip(ops, domains, strict=True))
        if op in SUBGRAPH_OPS or domain not in _DEFAULT_DOMAINS
    ]


@dataclasses.dataclass(frozen=True)
class BodyColumns:
    """A graph body's nodes with their op types and domains, each read once.

    The upgrade walks each body several times (EyeLike placeholders, the legacy fixes, the
    subgraphs): on a body of tens of thousands of nodes each walk reading the op types
    costs milliseconds, so the walks share these columns. They describe the body as it
    was read: a walk that changes op types reads them before.
    """

    graph: onnx.GraphProto
    nodes: list[onnx.NodeProto]
    op_types: list[str]
    domains: list[str]

    @classmethod
    def of(cls, graph: onnx.GraphProto) -> BodyColumns:
        """The columns of ``graph``'s nodes, as they are now."""
        nodes = list(graph.node)
        return cls(graph, nodes, [n.op_type for n in nodes], [n.domain for n in nodes])

    @functools.cached_property
    def outputs(self) -> list[list[str]]:
        """Each node's output names (read when first asked for)."""
        return [node.output[:] for node in self.nodes]

    def holders(self) -> list[int]:
        """Positions of the nodes that may hold subgraphs, in order."""
        return holder_positions(self.op_types, self.domains)

    def with_op(self, op_type: str) -> list[onnx.NodeProto]:
        """The nodes of op ``op_type`` (of any domain), in order."""
        if op_type not in self.op_types:
            return []
        return [self.nodes[i] for i, op in enumerate(self.op_types) if op == op_type]

    def subgraphs(self) -> list[onnx.GraphProto]:
        """The graphs the body's nodes hold, in node and attribute order."""
        held = [self.nodes[position] for position in self.holders()]
        return [graph for node in held for graph in node_subgraphs(node)]


def body_columns(graph: onnx.GraphProto) -> list[BodyColumns]:
    """The columns of ``graph`` and of every subgraph in it, depth first."""
    found = [BodyColumns.of(graph)]
    for subgraph in found[0].subgraphs():
        found.extend(body_columns(subgraph))
    return found
