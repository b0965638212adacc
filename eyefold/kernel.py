"""The bundled EyeLike kernel: a numpy identity-like matrix for every EyeLike type.

It is numpy-only on purpose, so it can be tested against ``np.eye`` and onnx's reference
evaluator without building a graph. The array is a zeroed allocation (``np.zeros`` maps fresh
zero pages, so untouched pages cost nothing) plus one strided write along the diagonal:
no Python loop over elements.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from eyefold.errors import SizeLimitError, UnsupportedDtypeError
from eyefold.eyelike_types import EYELIKE_TYPES_OPSET_22, to_data_type

__all__ = ["MAX_DIM", "diagonal_length", "eye", "output_nbytes"]

# ONNX dims are int64; numpy cannot address more elements than a signed 64-bit index.
MAX_DIM = 2**63 - 1


def _check_dims(rows: int, cols: int) -> None:
    for name, dim in (("rows", rows), ("cols", cols)):
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
            raise TypeError(f"{name} must be an int, got {type(dim).__name__}")
        if not 0 <= int(dim) <= MAX_DIM:
            raise SizeLimitError(f"{name}={dim} is outside 0..2^63-1")


def _eyelike_data_type(dtype: int | ir.DataType) -> ir.DataType:
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
    _check_dims(rows, cols)
    item_bytes = np.dtype(_eyelike_data_type(dtype).numpy()).itemsize
    return int(rows) * int(cols) * item_bytes


def diagonal_length(rows: int, cols: int, k: int) -> int:
    """Number of ones in a ``rows x cols`` EyeLike with diagonal offset ``k``."""
    if k >= 0:
        return max(0, min(rows, cols - k))
    return max(0, min(rows + k, cols))


def eye(
    rows: int,
    cols: int,
    k: int = 0,
    dtype: int | ir.DataType = ir.DataType.FLOAT,
    *,
    max_bytes: int | None = None,
) -> np.ndarray:
    """Returns the EyeLike output for a ``rows x cols`` input: ones at [i, i + k].

    Args:
        rows: first input dimension (>= 0).
        cols: second input dimension (>= 0).
        k: diagonal offset, any int64; an offset past the matrix gives all zeros.
        dtype: output element type, as a TensorProto code or an ``ir.DataType``.
        max_bytes: refuse (before allocating) outputs larger than this many bytes.

    Returns:
        A C-contiguous array of shape (rows, cols) in the numpy dtype of ``dtype``
        (ml_dtypes.bfloat16 for BFLOAT16).

    Raises:
        UnsupportedDtypeError: ``dtype`` is not an EyeLike type.
        SizeLimitError: the output exceeds ``max_bytes`` or cannot be allocated.

    >>> eye(2, 3, k=1, dtype=ir.DataType.INT32).tolist()
    [[0, 1, 0], [0, 0, 1]]
    """
    data_type = _eyelike_data_type(dtype)
    nbytes = output_nbytes(rows, cols, data_type)
    if max_bytes is not None and nbytes > max_bytes:
        raise SizeLimitError(
            f"a {rows}x{cols} {data_type.name} EyeLike output is {nbytes} bytes,"
            f" over the limit of {max_bytes} bytes"
        )
    rows, cols, k = int(rows), int(cols), int(k)
    try:
        out = np.zeros((rows, cols), dtype=data_type.numpy())
    except (MemoryError, ValueError) as error:
        raise SizeLimitError(
            f"cannot allocate a {rows}x{cols} {data_type.name} EyeLike output"
            f" ({nbytes} bytes): {error}"
        ) from None
    count = diagonal_length(rows, cols, k)
    if count:
        first = (-k if k < 0 else 0) * cols + (k if k > 0 else 0)
        out.reshape(-1)[first : first + count * (cols + 1) : cols + 1] = 1
    return out
