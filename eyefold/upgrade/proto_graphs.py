"""Walk a GraphProto and its If/Loop/Scan bodies, as the version converters see them."""

from __future__ import annotations

from collections.abc import Iterator

import onnx

from eyefold.core.proto_subgraphs import node_subgraphs, subgraph_holders

__all__ = ["iter_proto_graphs"]


def iter_proto_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """Yields ``graph`` and every subgraph in it, depth first.

    Only the nodes that may hold subgraphs are looked into (``subgraph_holders``).
    """
    yield graph
    nodes = list(graph.node)
    for position in subgraph_holders(nodes):
        for subgraph in node_subgraphs(nodes[position]):
            yield from iter_proto_graphs(subgraph)
