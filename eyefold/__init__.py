"""eyefold: fold, infer, upgrade and legalize ONNX EyeLike nodes."""

from __future__ import annotations

__version__ = "0.1.0"
