"""Metadata keys eyefold writes on nodes, namespaced so they never clash with others'.

Kept in a module of their own so the rules (``eyefold.rules``) and the passes can both read
them without importing each other.
"""

from __future__ import annotations

__all__ = ["LEGALIZED_FOR_KEY"]

# On the nodes the legalization made or changed: the runtime they were made for. The
# rewrite rules leave such an EyeLike alone, since folding its Casts back would undo it.
LEGALIZED_FOR_KEY = "pkg.eyefold.legalized_for"
