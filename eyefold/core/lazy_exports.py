"""Package attributes imported on first use (PEP 562), for light ``__init__`` modules.

``import eyefold.cli`` runs ``eyefold/__init__.py`` first, and ``import
eyefold.passes.apply_rules`` runs ``eyefold/passes/__init__.py``: re-exporting eagerly
there would import onnx, onnx-ir and every pass for ``eyefold --version``, and would tie
the passes and the report into an import cycle.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``.

    Args:
        package: the package's ``__name__``.
        exports: public name -> module defining it (a submodule maps to itself).
        namespace: the package's ``globals()``, where a loaded name is cached so that
            ``__getattr__`` runs once per name.
    """

    def get_attribute(name: str) -> Any:
        module_name = exports.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(module_name)
        value = module if module_name == f"{package}.{name}" else getattr(module, name)
        namespace[name] = value
        return value

    def list_names() -> list[str]:
        return sorted({*namespace, *exports})

    return get_attribute, list_names
