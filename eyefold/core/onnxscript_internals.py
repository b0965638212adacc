"""onnxscript's private API, reached from this module alone, for the releases pyproject allows.

onnxscript 0.7 has no public way to do three things eyefold needs:

- forget what a rule's matcher keeps of the last graph and node it tried (the rule's
  ``_matcher``, its ``_init_match`` and ``_graph``): eyefold's rules are module-level
  objects, so they would keep the last model, and its folded tensors, alive;
- run the version converter itself (``onnxscript.version_converter._version_converter``):
  the public ``ConvertVersionPass`` first inlines every model-local function;
- list the ops of a rule's compiled pattern (``_target_pattern``), which the registry's
  tests check against onnx's op schemas.

A new minor release may rename any of these, so pyproject caps onnxscript below the next
one; ``tests/core/test_onnxscript_internals.py`` tells whether this module still holds on
the release installed. onnxscript is imported on first use, never at import.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from onnxscript.rewriter import RewriteRule

__all__ = ["forget_last_match", "pattern_op_types", "version_converter"]


def forget_last_match(rule: RewriteRule) -> None:
    """Clears what ``rule``'s matcher keeps of its last match: the graph, node and bindings.

    A matcher holds them until its next match. Where a release lays its matcher out
    otherwise, nothing is cleared: the run is right either way, only its memory is held
    longer.
    """
    matcher = getattr(rule, "_matcher", None)
    if hasattr(matcher, "_init_match"):
        matcher._init_match(0)
    if hasattr(matcher, "_graph"):
        matcher._graph = None


def version_converter() -> types.ModuleType:
    """The version converter module of onnxscript, imported on first use.

    It holds ``convert_version``, the adapter ``registry`` and the opsets it converts
    (``SUPPORTED_MIN_ONNX_OPSET``, ``SUPPORTED_MAX_ONNX_OPSET``).
    """
    from onnxscript.version_converter import _version_converter

    return _version_converter


def pattern_op_types(rule: RewriteRule) -> frozenset[str]:
    """The op types of the nodes ``rule``'s pattern matches (an any-op node has none)."""
    pattern = rule._target_pattern
    return frozenset(node.op_type for node in pattern if node.op_identifier() is not None)
