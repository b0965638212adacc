"""Which EyeLike of the input model a node stands for, so the report accounts for each.

The census step numbers every EyeLike node before any rewrite (``node.meta``, in memory
only, never saved). A rule that replaces an EyeLike by a new one passes the number on; a
node that disappears (merged into another by a rule, or left without users by a fold) is
reported as removed, with the step that removed it. So ``total`` is what the input had.
"""

from __future__ import annotations

from collections.abc import Iterable

import onnx_ir as ir

from eyefold.core.metadata_keys import ORIGIN_KEY
from eyefold.core.scopes import is_eyelike, subgraphs_of

__all__ = ["inherit_origins", "origin_of", "removed_origins"]


def origin_of(node: ir.Node) -> int | None:
    """The census number of the input EyeLike ``node`` stands for (None: not counted)."""
    return node.meta.get(ORIGIN_KEY)


def inherit_origins(old_nodes: Iterable[ir.Node], new_nodes: Iterable[ir.Node]) -> list[int]:
    """Passes census numbers from replaced EyeLike nodes to their replacements.

    A new EyeLike takes the number of the replaced EyeLike of the same name (rules keep the
    name of the node they rewrite), else of the first one not yet taken.

    Returns:
        The numbers no replacement took: those EyeLike nodes are gone.
    """
    pending = [n for n in old_nodes if is_eyelike(n) and origin_of(n) is not None]
    for new in (n for n in new_nodes if is_eyelike(n)):
        if not pending:
            break
        same = [old for old in pending if old.name and old.name == new.name]
        chosen = same[0] if same else pending[0]
        pending.remove(chosen)
        new.meta[ORIGIN_KEY] = origin_of(chosen)
    return [number for node in pending if (number := origin_of(node)) is not None]


def removed_origins(nodes: Iterable[ir.Node]) -> list[int]:
    """Census numbers of the EyeLike nodes among removed ``nodes`` and their subgraphs."""
    found: list[int] = []
    work = list(nodes)
    while work:
        node = work.pop()
        if is_eyelike(node) and (number := origin_of(node)) is not None:
            found.append(number)
        for _, subgraph in subgraphs_of(node):
            work.extend(subgraph)
    return sorted(found)
