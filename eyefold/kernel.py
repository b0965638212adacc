"""The bundled EyeLike kernel: a numpy identity-like matrix for every EyeLike type.

It is numpy-only on purpose, so it can be tested against ``np.eye`` and onnx's reference
evaluator without building a graph. The array is a zeroed allocation (``np.zeros`` maps fresh
zero pages, so untouched pages cost nothing) plus one strided write along the diagonal:
no Python loop over elements.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from eyefold.core.output_size import (
    MAX_DIM,
    eyelike_data_type,
    output_nbytes,
)
from eyefold.errors import SizeLimitError

__all__ = ["MAX_DIM", "diagonal_length", "eye", "output_nbytes"]


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
    data_type = eyelike_data_type(dtype)
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
