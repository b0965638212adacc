"""The random inputs ``--check`` feeds to both models.

Inputs are random, from a fixed seed, in every graph input's element type. A symbolic or
unknown dim gets its ``--input-shape`` value when pinned, else :data:`DEFAULT_DIM` (the same
value for every use of one symbolic name). Kept apart from the comparison so that what a
model is fed can be read, and tested, without running it.
"""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir

from eyefold.errors import EyefoldError

__all__ = ["DEFAULT_DIM", "INPUT_LIMIT_BYTES", "random_inputs"]

# Symbolic dims without a pinned value get this size: small enough for any model to run
# fast, and above 1 so that broadcasting mistakes still show.
DEFAULT_DIM = 2
# The random inputs may take at most this much memory together; a model declaring huge
# static inputs (2^40 x 2^40) cannot be checked by running it.
INPUT_LIMIT_BYTES = 1 << 30


def _shape_of(value: ir.Value, defaulted: dict[str, int]) -> list[int]:
    if value.shape is None:
        raise EyefoldError(
            f"--check cannot make an input for {value.name!r}: its rank is unknown"
            " (give it with --input-shape)"
        )
    dims = []
    for index, dim in enumerate(value.shape.dims):
        if isinstance(dim, int):
            dims.append(dim)
        else:
            name = dim.value or f"{value.name}[{index}]"
            dims.append(defaulted.setdefault(name, DEFAULT_DIM))
    return dims


def _random_array(
    rng: np.random.Generator, dtype: ir.DataType, shape: list[int], name: str
) -> np.ndarray:
    if dtype == ir.DataType.BOOL:
        return rng.random(shape) < 0.5
    if dtype == ir.DataType.STRING:
        return rng.choice(np.array(["a", "bc", ""], dtype=object), size=shape)
    np_dtype = np.dtype(dtype.numpy())
    if dtype.is_floating_point():
        return rng.standard_normal(shape).astype(np_dtype)
    if np_dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np_dtype)
    if dtype.is_integer():
        low = -4 if dtype.is_signed() else 0
        return rng.integers(low, 5, size=shape).astype(np_dtype)
    raise EyefoldError(f"--check cannot make an input for {name!r} of type {dtype.name}")


def _item_bytes(dtype: ir.DataType) -> int:
    try:
        return math.ceil(dtype.itemsize)
    except TypeError:  # STRING has no fixed size; the generated strings are short
        return 8


def random_inputs(
    model: ir.Model, *, seed: int = 0
) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Random feeds for every main-graph input that is not an initializer.

    Returns:
        The feeds, and the symbolic dims that got :data:`DEFAULT_DIM`.

    Raises:
        EyefoldError: an input is not a tensor, or has no known type or rank.
    """
    rng = np.random.default_rng(seed)
    defaulted: dict[str, int] = {}
    feeds: dict[str, np.ndarray] = {}
    total = 0
    for value in model.graph.inputs:
        if value.is_initializer():
            continue
        name = value.name or ""
        if not isinstance(value.type, ir.TensorType) or value.dtype is None:
            raise EyefoldError(
                f"--check cannot make an input for {name!r}: not a typed tensor"
            )
        shape = _shape_of(value, defaulted)
        total += math.prod(shape) * _item_bytes(value.dtype)  # Python ints: no overflow
        if total > INPUT_LIMIT_BYTES:
            raise EyefoldError(
                f"--check would need {total} bytes of random inputs (input {name!r} is"
                f" {value.dtype.name}{shape}), over {INPUT_LIMIT_BYTES}; pin smaller"
                " symbolic dims with --input-shape"
            )
        array = _random_array(rng, value.dtype, shape, name)
        feeds[name] = np.asarray(array)  # a 0-d result comes back as a numpy scalar
    return feeds, defaulted
