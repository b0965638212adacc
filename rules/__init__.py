"""eyefold's rewrite rules, one per module, collected in an explicit, ordered tuple."""

from __future__ import annotations

__all__ = ["ALL_RULES"]

ALL_RULES: tuple = ()
