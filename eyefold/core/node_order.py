"""Graphs put in topological order, as real tools' output needs: one stable sort.

The ONNX spec wants every graph's nodes sorted (a node after the producers of what it
reads), and onnx's checker and inference refuse or misread graphs that are not; but
onnxruntime sorts on load, so tools write such graphs and users have them: onnxruntime's
own float16 converter (``onnxruntime.transformers.float16``) appends the Cast nodes it
puts after the graph inputs at the end of the node list. eyefold sorts such a graph before
anything else reads it, and the report says so; a graph with a cycle cannot be sorted and
is left for the checks that name it.

The sort is stable: a node moves only as far as the values it reads require, so a sorted
graph is left exactly as it is and an unsorted one changes as little as it can. It works
on what each node reads and which node produces what, so the file path runs it on a
proto's name columns (:mod:`eyefold.proto_path.node_order`) and :func:`sort_unsorted_graphs`
on an onnx-ir model's values: both give a graph the same order.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Mapping, Sequence

import onnx_ir as ir

from eyefold.core.scopes import iter_scopes, read_values, subgraphs_of

__all__ = [
    "SORTED_NOTE",
    "graph_in_order",
    "in_order",
    "sort_unsorted_graphs",
    "stable_order",
]

# What the summary and the report's notes say of a model that was sorted first.
SORTED_NOTE = (
    "not in topological order (the ONNX spec requires it; onnxruntime sorts on load, and"
    " its float16 converter writes such graphs): sorted first"
)


def in_order(reads: Sequence[Sequence[Hashable]], producer: Mapping[Hashable, int]) -> bool:
    """Whether every node comes after the producers of what it reads.

    Args:
        reads: what each node reads, by position (its subgraphs' outer reads included).
        producer: value -> position of the node that outputs it, among these nodes
            (values read from elsewhere are not in it).
    """
    return all(
        producer.get(key, -1) < position for position, keys in enumerate(reads) for key in keys
    )


def stable_order(
    reads: Sequence[Sequence[Hashable]], producer: Mapping[Hashable, int]
) -> list[int] | None:
    """A stable topological order of the nodes, as positions, or None for a cycle.

    Of the nodes whose producers are placed, the first in the given order goes next.
    ``reads`` and ``producer`` as for :func:`in_order`.
    """
    waiting = [0] * len(reads)
    readers: list[list[int]] = [[] for _ in reads]
    for position, keys in enumerate(reads):
        needed = {producer[k] for k in keys if producer.get(k, position) != position}
        waiting[position] = len(needed)
        for source in needed:
            readers[source].append(position)
    ready = [position for position, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        position = heapq.heappop(ready)
        order.append(position)
        for reader in readers[position]:
            waiting[reader] -= 1
            if waiting[reader] == 0:
                heapq.heappush(ready, reader)
    return order if len(order) == len(reads) else None


def _columns(
    nodes: Sequence[ir.Node],
) -> tuple[list[list[Hashable]], dict[Hashable, int]]:
    """What each node reads and who produces what, keyed by the values' identities.

    Only the nodes holding subgraphs read more than their inputs.
    """
    reads: list[list[Hashable]] = [
        [id(v) for v in read_values(node)]
        if node.attributes.data and subgraphs_of(node)
        else [id(v) for v in node.inputs if v is not None]
        for node in nodes
    ]
    producer: dict[Hashable, int] = {
        id(value): position for position, node in enumerate(nodes) for value in node.outputs
    }
    return reads, producer


def graph_in_order(graph: ir.Graph | ir.Function) -> bool:
    """Whether every node of ``graph`` comes after the producers (in it) of what it reads."""
    return in_order(*_columns(list(graph)))


def sort_unsorted_graphs(model: ir.Model) -> list[str]:
    """Sorts, in place, every graph of ``model`` that is out of order.

    A graph with a cycle is left as it is (the structure checks name the cycle).

    Returns:
        The scopes that were out of order (``main``, ``function ...``); empty when every
        graph was in order, and then the model is left untouched.
    """
    unsorted: list[str] = []
    for scope in iter_scopes(model):
        nodes = list(scope.graph)
        reads, producer = _columns(nodes)
        if in_order(reads, producer):
            continue
        order = stable_order(reads, producer)
        if order is None:
            continue
        unsorted.append(scope.path)
        # Extending a graph with its own nodes moves them (as onnx-ir's own sort does).
        scope.graph.extend(nodes[position] for position in order)
    return unsorted
