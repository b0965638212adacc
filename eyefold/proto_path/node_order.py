"""The stable sort of :mod:`eyefold.core.node_order`, run on a proto's columns.

The file path sorts a ModelProto before it scans it, and only the graphs out of order are
touched: what each node reads (its inputs, and the outer values its subgraphs read) and
which node outputs each name are read from the proto, then the nodes are put in the order
:func:`~eyefold.core.node_order.stable_order` gives, the order onnx-ir models get.
"""

from __future__ import annotations

import onnx

from eyefold.core.node_order import in_order, stable_order
from eyefold.core.proto_subgraphs import (
    BodyColumns,
    node_subgraphs,
    outer_reads,
    subgraph_attributes,
    subgraph_holders,
)

__all__ = ["graph_is_sorted", "sort_graph", "sort_model_graphs"]


def _reads(nodes: list[onnx.NodeProto], holders: list[int] | None = None) -> list[list[str]]:
    """What each node reads: its inputs, and the outer values its subgraphs read.

    Read by slicing each node's inputs (cheaper than iterating the repeated field); only
    the nodes that may hold subgraphs (``holders``, found if None) are looked into.
    """
    reads = [node.input[:] for node in nodes]
    for position in subgraph_holders(nodes) if holders is None else holders:
        for sub in node_subgraphs(nodes[position]):
            reads[position].extend(outer_reads(sub))
    return reads


def _producers(
    nodes: list[onnx.NodeProto], outputs: list[list[str]] | None = None
) -> dict[str, int]:
    outputs = [node.output[:] for node in nodes] if outputs is None else outputs
    return {name: i for i, names in enumerate(outputs) for name in names if name}


def graph_is_sorted(
    body: onnx.GraphProto | onnx.FunctionProto, columns: BodyColumns | None = None
) -> bool:
    """Whether every node of ``body`` comes after the producers of what it reads.

    ``columns``: the body's, when the caller has read them already.
    """
    if columns is None:
        nodes, holders, outputs = list(body.node), None, None
    else:
        nodes, holders, outputs = columns.nodes, columns.holders(), columns.outputs
    return in_order(_reads(nodes, holders), _producers(nodes, outputs))


def sort_graph(
    body: onnx.GraphProto | onnx.FunctionProto, columns: BodyColumns | None = None
) -> bool:
    """Sorts the nodes of ``body`` in place; True when they were out of order.

    A cycle leaves the nodes as they are (and returns False): onnx's checker names it.
    ``columns``: the body's, when the caller has read them already (stale once sorted).
    """
    if graph_is_sorted(body, columns):
        return False
    nodes = list(body.node)
    order = stable_order(_reads(nodes), _producers(nodes))
    if order is None:
        return False
    reordered = [nodes[position] for position in order]
    del body.node[:]
    body.node.extend(reordered)
    return True


def _sort_subgraphs(
    graph: onnx.GraphProto,
    path: str,
    sorted_paths: list[str],
    columns: BodyColumns | None = None,
) -> None:
    columns = BodyColumns.of(graph) if columns is None else columns
    for position in columns.holders():
        node = columns.nodes[position]
        for attribute, bodies in subgraph_attributes(node):
            for sub in bodies:
                inner = f"{path}/{node.name or node.op_type}.{attribute.name}"
                if sort_graph(sub):
                    sorted_paths.append(inner)
                _sort_subgraphs(sub, inner, sorted_paths)


def sort_model_graphs(model: onnx.ModelProto, main: BodyColumns | None = None) -> list[str]:
    """Sorts every graph of ``model`` in place (main, subgraphs, functions).

    Args:
        model: the model.
        main: the main graph's columns, when the caller has read them already.

    Returns:
        The graphs that were out of order, as paths (``main``, ``main/loop.body``,
        ``function f``); empty for a sorted model, which is left untouched.
    """
    sorted_paths: list[str] = []
    if sort_graph(model.graph, main):
        sorted_paths.append("main")
        main = None  # read before the sort
    _sort_subgraphs(model.graph, "main", sorted_paths, main)
    for function in model.functions:
        path = f"function {function.name}"
        if sort_graph(function):
            sorted_paths.append(path)
        for node in function.node:
            for sub in node_subgraphs(node):
                if sort_graph(sub):
                    sorted_paths.append(f"{path}/{node.name or node.op_type}")
                _sort_subgraphs(sub, path, sorted_paths)
    return sorted_paths
