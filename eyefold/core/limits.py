"""Size limits shared across layers, each named with its unit."""

from __future__ import annotations

__all__ = ["DEFAULT_SIZE_LIMIT_BYTES", "WEIGHTLESS_TENSOR_LIMIT_BYTES"]

# Largest folded EyeLike output by default (``--size-limit``, ``size_limit=``).
DEFAULT_SIZE_LIMIT_BYTES = 1 << 20

# Tensors up to this size stay in the weightless copies of a model that onnx's C++ code
# (shape inference, version converter, checker) is handed: a shape or axes constant must
# stay readable, a weight need not be copied.
WEIGHTLESS_TENSOR_LIMIT_BYTES = 4096
