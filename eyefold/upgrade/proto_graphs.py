"""Walk a GraphProto and its If/Loop/Scan bodies, as the version converters see them."""

from __future__ import annotations

from collections.abc import Iterator

import onnx

__all__ = ["iter_proto_graphs"]


def iter_proto_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """Yields ``graph`` and every subgraph in it, depth first."""
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                yield from iter_proto_graphs(attribute.g)
            elif attribute.type == onnx.AttributeProto.GRAPHS:
                for subgraph in attribute.graphs:
                    yield from iter_proto_graphs(subgraph)
