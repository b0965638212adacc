"""What onnxscript's rule machinery keeps around, undone after each of eyefold's rewrites.

``try_rewrite`` records opset imports eyefold's rules never need, matchers hold the last
graph they tried, and a declined rewrite's nodes still use the values they read: each
would otherwise outlive the rewrite that made it.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx_ir as ir

from eyefold.core import onnxscript_internals
from eyefold.rules import RuleSpec

__all__ = ["discard", "forget_last_match", "restore_opsets", "snapshot_opsets"]


def forget_last_match(specs: Sequence[RuleSpec]) -> None:
    """Clears what onnxscript's matchers keep of the last graph and node they tried.

    A matcher holds them, and the last match's bindings, until its next match; the rules
    are module-level objects, so they would keep the last model (and its folded tensors)
    alive after the run.
    """
    for spec in specs:
        onnxscript_internals.forget_last_match(spec.rule)


def discard(nodes: Sequence[ir.Node]) -> None:
    """Detaches a declined rewrite's nodes: as inputs' users they would block other matches."""
    for node in nodes:
        for index in range(len(node.inputs)):
            node.replace_input_with(index, None)


def snapshot_opsets(
    model: ir.Model, graph_or_function: ir.Graph | ir.Function
) -> list[tuple[dict[str, int], dict[str, int]]]:
    """The opset tables a rewrite may touch, each with a copy of its entries."""
    tables = [model.graph.opset_imports, graph_or_function.opset_imports]
    return [(table, dict(table)) for table in tables]


def restore_opsets(saved: list[tuple[dict[str, int], dict[str, int]]]) -> None:
    """Undoes onnxscript's opset bookkeeping for a rewrite.

    ``try_rewrite`` records the default domain with version 1 in any graph that does not
    import it under the spelling "": every subgraph (which imports nothing) and a model
    that spells it "ai.onnx". eyefold's rules only emit default-domain ops, which the
    model already imports, so the tables stay as they were.
    """
    for table, before in saved:
        if table != before:
            table.clear()
            table.update(before)
