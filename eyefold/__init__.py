"""eyefold: fold, infer, upgrade and legalize ONNX EyeLike nodes.

>>> import eyefold
>>> optimized = eyefold.optimize(model)  # doctest: +SKIP

The public names are loaded on first use (PEP 562): ``import eyefold.cli`` must not pay
for onnx, onnx-ir and numpy before the command line knows it needs them (``eyefold
--version`` imports none of them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eyefold.core.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from eyefold import kernel, passes
    from eyefold._optimize import OptimizeResult, optimize, optimize_with_report
    from eyefold.batch import FileResult, optimize_files
    from eyefold.errors import EyefoldError
    from eyefold.options import PipelineOptions
    from eyefold.report import NodeOutcome, Report

__version__ = "0.1.0"

# Public name -> the module that defines it (a submodule is its own entry).
_LAZY: dict[str, str] = {
    "EyefoldError": "eyefold.errors",
    "FileResult": "eyefold.batch",
    "NodeOutcome": "eyefold.report",
    "OptimizeResult": "eyefold._optimize",
    "PipelineOptions": "eyefold.options",
    "Report": "eyefold.report",
    "kernel": "eyefold.kernel",
    "optimize": "eyefold._optimize",
    "optimize_files": "eyefold.batch",
    "optimize_with_report": "eyefold._optimize",
    "passes": "eyefold.passes",
}

__all__ = [
    "EyefoldError",
    "FileResult",
    "NodeOutcome",
    "OptimizeResult",
    "PipelineOptions",
    "Report",
    "__version__",
    "kernel",
    "optimize",
    "optimize_files",
    "optimize_with_report",
    "passes",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
