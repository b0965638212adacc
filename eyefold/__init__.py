"""eyefold: fold, infer, upgrade and legalize ONNX EyeLike nodes.

>>> import eyefold
>>> optimized = eyefold.optimize(model)  # doctest: +SKIP
"""

from __future__ import annotations

from eyefold import kernel, passes
from eyefold._optimize import OptimizeResult, optimize, optimize_with_report
from eyefold.errors import EyefoldError
from eyefold.options import PipelineOptions
from eyefold.report import NodeOutcome, Report

__version__ = "0.1.0"

__all__ = [
    "EyefoldError",
    "NodeOutcome",
    "OptimizeResult",
    "PipelineOptions",
    "Report",
    "__version__",
    "kernel",
    "optimize",
    "optimize_with_report",
    "passes",
]
