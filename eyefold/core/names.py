"""Fresh value and node names, unique in the whole model and the same on every run.

ONNX wants value names unique model-wide (a subgraph may read an outer value by name), so a
pass that adds values must know every name already taken, in every scope. Names derived
from what a node replaces, with a counter only on a clash, keep a second run's output
byte-identical to the first's.
"""

from __future__ import annotations

import onnx_ir as ir

from eyefold.core.scopes import iter_scopes

__all__ = ["ModelNames"]


def _first_free(stem: str, taken: set[str]) -> str:
    """``stem`` when free, else the first free ``"{stem}_1"``, ``"{stem}_2"``..., taken."""
    candidate, suffix = stem, 0
    while candidate in taken:
        suffix += 1
        candidate = f"{stem}_{suffix}"
    taken.add(candidate)
    return candidate


class ModelNames:
    """Every value and node name of a model, handing out new ones that clash with none.

    Values and nodes are named apart, as in ONNX: a node may share its output's name. The
    names are collected on the first request: a pass that ends up adding nothing (the
    common case on a big model) never walks the whole graph for them.
    """

    def __init__(self, model: ir.Model) -> None:
        self._model: ir.Model | None = model
        self._values: set[str] = set()
        self._nodes: set[str] = set()

    def _collect(self) -> None:
        """Collects the names of every scope: inputs, initializers, node outputs, nodes."""
        model, self._model = self._model, None
        if model is None:
            return
        for scope in iter_scopes(model):
            graph = scope.graph
            self._values.update(v.name for v in graph.inputs if v.name)
            if isinstance(graph, ir.Graph):
                self._values.update(graph.initializers)
            for node in graph:
                if node.name:
                    self._nodes.add(node.name)
                self._values.update(v.name for v in node.outputs if v.name)

    def new_value(self, stem: str) -> str:
        """A value name unused in the model: ``stem``, else ``"{stem}_1"``, ``"{stem}_2"``."""
        self._collect()
        return _first_free(stem, self._values)

    def new_node(self, stem: str) -> str:
        """A node name unused in the model: ``stem``, else ``"{stem}_1"``, ``"{stem}_2"``."""
        self._collect()
        return _first_free(stem, self._nodes)
