"""Graphs in topological order, on onnx-ir models: what the file path does on the proto.

The ONNX spec wants nodes sorted, onnx's checker and inference need it, and onnxruntime
sorts on load, so tools write unsorted graphs (onnxruntime's own float16 converter does).
A model given to the library as an ``onnx_ir.Model``, or taken whole by the file path, is
checked here and sorted with onnx-ir's own stable sort before any step reads it.
"""

from __future__ import annotations

import onnx_ir as ir
from onnx_ir.passes.common import TopologicalSortPass

from eyefold.core.scopes import iter_scopes

__all__ = ["SORTED_NOTE", "sort_unsorted_graphs"]

# What the summary and the report's notes say of a model that was sorted first.
SORTED_NOTE = (
    "not in topological order (the ONNX spec requires it; onnxruntime sorts on load, and"
    " its float16 converter writes such graphs): sorted first"
)


def _in_order(graph: ir.Graph | ir.Function) -> bool:
    """Whether every node comes after the producers (in its own graph) of its inputs."""
    seen: set[int] = set()
    for node in graph:
        for value in node.inputs:
            producer = None if value is None else value.producer()
            if producer is None or id(producer) in seen:
                continue
            if producer.graph is node.graph:
                return False
        seen.add(id(node))
    return True


def sort_unsorted_graphs(model: ir.Model) -> list[str]:
    """Sorts ``model`` in place when some graph is out of order.

    Returns:
        The scopes that were out of order (``main``, ``function ...``); empty when every
        graph was in order, and then the model is left untouched.
    """
    unsorted = [scope.path for scope in iter_scopes(model) if not _in_order(scope.graph)]
    if unsorted:
        TopologicalSortPass()(model)
    return unsorted
