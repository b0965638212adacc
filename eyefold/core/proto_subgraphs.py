"""Which NodeProtos of a body can hold subgraphs, told from their op type and domain.

In the default domain only If, Loop, Scan and SequenceMap have graph attributes (no other
schema declares one, and onnx's checker refuses a graph attribute on any other op of the
domain); nodes of other domains may hold graphs. Reading a node's op type and domain costs
a fifth of walking its attributes, so walks over large bodies look into these nodes only.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import onnx

from eyefold.core.domains import DEFAULT_DOMAINS

__all__ = ["SUBGRAPH_OPS", "may_hold_subgraphs", "node_subgraphs", "subgraph_holders"]

# Default-domain ops that hold subgraphs; other domains may hold them too.
SUBGRAPH_OPS = frozenset({"If", "Loop", "Scan", "SequenceMap"})
_DEFAULT_DOMAINS = frozenset(DEFAULT_DOMAINS)


def node_subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    """The graphs ``node`` holds (If branches, Loop and Scan bodies...)."""
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            yield from attr.graphs


def may_hold_subgraphs(node: onnx.NodeProto) -> bool:
    """Whether ``node`` may hold subgraphs (see the module's note)."""
    return node.op_type in SUBGRAPH_OPS or node.domain not in _DEFAULT_DOMAINS


def subgraph_holders(nodes: Sequence[onnx.NodeProto]) -> list[int]:
    """Positions of the nodes that may hold subgraphs, in order (see the module's note)."""
    ops = [node.op_type for node in nodes]
    domains = [node.domain for node in nodes]
    if SUBGRAPH_OPS.isdisjoint(ops) and _DEFAULT_DOMAINS.issuperset(domains):
        return []
    return [
        position
        for position, (op, domain) in enumerate(zip(ops, domains, strict=True))
        if op in SUBGRAPH_OPS or domain not in _DEFAULT_DOMAINS
    ]
