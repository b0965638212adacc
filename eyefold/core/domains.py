"""The default ONNX domain, the opset in force in a scope, and how scopes are named.

Kept free of heavy imports (no onnx, no onnx-ir at import time): proto-level modules use
it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnx
    import onnx_ir as ir

__all__ = ["DEFAULT_DOMAINS", "default_opset", "function_label", "is_default_domain"]

# The default ONNX domain has two spellings in opset_import and node.domain.
DEFAULT_DOMAINS = ("", "ai.onnx")


def is_default_domain(domain: str) -> bool:
    """True for either spelling of the default ONNX domain."""
    return domain in DEFAULT_DOMAINS


def default_opset(*opset_tables: Mapping[str, int]) -> int | None:
    """The default-domain version from the first opset_import table that has it.

    Pass a function's own table before the model's: a function may import its own version.
    """
    for table in opset_tables:
        for domain in DEFAULT_DOMAINS:
            if domain in table:
                return table[domain]
    return None


def function_label(function: ir.Function | onnx.FunctionProto) -> str:
    """How reports name a model-local function: ``function domain::Name[::overload]``."""
    overload = f"::{function.overload}" if function.overload else ""
    return f"function {function.domain}::{function.name}{overload}"
