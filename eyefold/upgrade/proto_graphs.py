"""Walk a GraphProto and its If/Loop/Scan bodies, as the version converters see them."""

from __future__ import annotations

from collections.abc import Iterator

import onnx

from eyefold.core.proto_subgraphs import BodyColumns

__all__ = ["iter_proto_graphs"]


def iter_proto_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """Yields ``graph`` and every subgraph in it, depth first.

    Only the nodes that may hold subgraphs are looked into (``BodyColumns.subgraphs``).
    """
    yield graph
    for subgraph in BodyColumns.of(graph).subgraphs():
        yield from iter_proto_graphs(subgraph)
