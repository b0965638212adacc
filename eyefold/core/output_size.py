"""The size of an EyeLike output, checked before anything is allocated.

Shared by the kernel (which allocates) and the analysis (which decides what folds), so a
declared 2^40 x 2^40 shape is refused the same way by both.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from eyefold.core.eyelike_types import EYELIKE_TYPES_OPSET_22, to_data_type
from eyefold.errors import SizeLimitError, UnsupportedDtypeError

__all__ = ["MAX_DIM", "check_dims", "eyelike_data_type", "output_nbytes"]

# ONNX dims are int64; numpy cannot address more elements than a signed 64-bit index.
MAX_DIM = 2**63 - 1


def check_dims(rows: int, cols: int) -> None:
    """Raises unless both dims are ints an ONNX (int64) dim can hold."""
    for name, dim in (("rows", rows), ("cols", cols)):
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
            raise TypeError(f"{name} must be an int, got {type(dim).__name__}")
        if not 0 <= int(dim) <= MAX_DIM:
            raise SizeLimitError(f"{name}={dim} is outside 0..2^63-1")


def eyelike_data_type(dtype: int | ir.DataType) -> ir.DataType:
    """``dtype`` as a DataType, if it is one EyeLike can output at all (opset 22)."""
    data_type = to_data_type(dtype)
    if data_type not in EYELIKE_TYPES_OPSET_22:
        raise UnsupportedDtypeError(
            f"dtype {data_type.name} ({data_type.value}) is not a valid EyeLike type"
        )
    return data_type


def output_nbytes(rows: int, cols: int, dtype: int | ir.DataType) -> int:
    """Bytes of a ``rows x cols`` EyeLike output, in exact (arbitrary-precision) integers.

    Python integers do not overflow, so a declared 2^40 x 2^40 shape gives its true size
    instead of wrapping around to something small.
    """
    check_dims(rows, cols)
    item_bytes = np.dtype(eyelike_data_type(dtype).numpy()).itemsize
    return int(rows) * int(cols) * item_bytes
