"""Removing what a rewrite left without users: nodes and initializers, never graph I/O.

The fold pass and the rules pass both leave dead producers behind (the chain that only
fed a folded EyeLike, a bypassed identity); both clean up with this one function.
"""

from __future__ import annotations

import onnx_ir as ir

__all__ = ["remove_dead_producers"]


def remove_dead_producers(values: list[ir.Value]) -> list[ir.Node]:
    """Removes what only fed ``values`` (nodes and initializers), never graph inputs/outputs.

    Called once per scope with each folded node's input listed once: ``Value.uses()``
    copies the use list, so asking it once per fold of a value feeding thousands of EyeLike
    nodes would make the pass quadratic. Returns the nodes removed, so the report can
    account for an EyeLike among them.
    """
    removed: list[ir.Node] = []
    work = list(values)
    while work:
        current = work.pop()
        if current.is_graph_input() or current.is_graph_output() or current.uses():
            continue
        owner = current.graph
        if current.is_initializer() and owner is not None and current.name:
            owner.initializers.pop(current.name)
            continue
        producer = current.producer()
        if producer is None or producer.graph is None:
            continue
        if any(out.uses() or out.is_graph_output() for out in producer.outputs):
            continue
        work.extend(v for v in producer.inputs if v is not None)
        producer.graph.remove(producer, safe=True)
        removed.append(producer)
    return removed
