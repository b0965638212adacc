"""The inputs ``--check`` feeds to both models: random, or the user's (``--check-inputs``).

Inputs are random, from a fixed seed, in every graph input's element type. A symbolic or
unknown dim gets its ``--input-shape`` value when pinned (the model's dim is then static),
its ``--check-shape`` size when given, else :data:`DEFAULT_DIM` in the first check and
:func:`second_sizes` in the second (the same value for every use of one symbolic name).
Random inputs cannot run every model (indices out of range for a Gather, say), so
``--check-inputs FILE.npz`` gives one array per graph input name instead; each must have
the input's element type and fit its declared dims. Kept apart from the comparison so
that what a model is fed can be read, and tested, without running it.
"""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir

from eyefold.core.input_shapes import InputShapeError
from eyefold.errors import EyefoldError

__all__ = [
    "DEFAULT_DIM",
    "INPUT_LIMIT_BYTES",
    "inputs_from_file",
    "random_inputs",
    "second_sizes",
    "sized_by_shapes",
    "symbolic_dims",
]

# Symbolic dims without a pinned value get this size: small enough for any model to run
# fast, and above 1 so that broadcasting mistakes still show.
DEFAULT_DIM = 2
# The random inputs may take at most this much memory together; a model declaring huge
# static inputs (2^40 x 2^40) cannot be checked by running it.
INPUT_LIMIT_BYTES = 1 << 30


def _dim_name(value: ir.Value, index: int, dim: object) -> str:
    """The name a symbolic or unknown dim is sized by (one size per symbolic name)."""
    return getattr(dim, "value", None) or f"{value.name}[{index}]"


def _shape_of(value: ir.Value, defaulted: dict[str, int], default: int) -> list[int]:
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
            dims.append(defaulted.setdefault(_dim_name(value, index, dim), default))
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
    model: ir.Model,
    *,
    seed: int = 0,
    sizes: dict[str, int] | None = None,
    default: int = DEFAULT_DIM,
) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Random feeds for every main-graph input that is not an initializer.

    Args:
        model: the model whose graph inputs are fed.
        seed: seed of the random values.
        sizes: sizes of symbolic dims, by name (``x[1]`` for an unnamed dim of ``x``).
        default: the size of a symbolic dim ``sizes`` does not give.

    Returns:
        The feeds, and the size every symbolic dim got (from ``sizes`` or ``default``).

    Raises:
        EyefoldError: an input is not a tensor, or has no known type or rank.
    """
    rng = np.random.default_rng(seed)
    defaulted: dict[str, int] = dict(sizes or {})
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
        shape = _shape_of(value, defaulted, default)
        total += math.prod(shape) * _item_bytes(value.dtype)  # Python ints: no overflow
        if total > INPUT_LIMIT_BYTES:
            raise EyefoldError(
                f"--check would need {total} bytes of random inputs (input {name!r} is"
                f" {value.dtype.name}{shape}), over {INPUT_LIMIT_BYTES}; pin smaller"
                " symbolic dims with --input-shape"
            )
        array = _random_array(rng, value.dtype, shape, name)
        feeds[name] = np.asarray(array)  # a 0-d result comes back as a numpy scalar
    used = {_dim_name(v, i, d) for v in model.graph.inputs for i, d in _symbolic(v)}
    return feeds, {name: size for name, size in defaulted.items() if name in used}


def _symbolic(value: ir.Value) -> list[tuple[int, object]]:
    """The symbolic or unknown dims of a graph input, with their positions."""
    if value.is_initializer() or value.shape is None:
        return []
    return [(i, d) for i, d in enumerate(value.shape.dims) if not isinstance(d, int)]


def symbolic_dims(model: ir.Model) -> list[str]:
    """The names of the graph inputs' symbolic dims, in order of first use."""
    names = (_dim_name(v, i, d) for v in model.graph.inputs for i, d in _symbolic(v))
    return list(dict.fromkeys(names))


def second_sizes(names: list[str], *, square: bool) -> dict[str, int]:
    """The sizes of the second check: distinct per symbolic name, unless ``square``.

    A non-square second size (3, 4, 5, ...) shows what one size cannot: an EyeLike of
    ``[n, m]`` whose fold or offset ``k`` assumed ``n == m``, a shape baked in at the
    first size. Names the model requires to be equal need ``square`` (all 3).
    """
    return {name: 3 if square else 3 + index for index, name in enumerate(names)}


def sized_by_shapes(model: ir.Model, shapes: dict[str, list[int]]) -> dict[str, int]:
    """The symbolic dims the given input shapes (``--check-shape``) size, by name.

    Raises:
        InputShapeError: a shape names no graph input, or does not fit its declaration
            (a usage error, as for ``--input-shape``).
    """
    inputs = {v.name or "": v for v in model.graph.inputs if not v.is_initializer()}
    sizes: dict[str, int] = {}
    for name, dims in shapes.items():
        value = inputs.get(name)
        if value is None:
            raise InputShapeError(
                f"--check-shape {name}: no such graph input (inputs: {', '.join(inputs)})"
            )
        declared = value.shape
        if declared is not None and len(declared) != len(dims):
            raise InputShapeError(
                f"--check-shape {name}: {len(dims)} dims, the model declares {declared}"
            )
        for index, (dim, size) in enumerate(zip(declared or [], dims, strict=True)):
            if isinstance(dim, int):
                if dim != size:
                    raise InputShapeError(
                        f"--check-shape {name}: dim {index} is {size}, the model declares"
                        f" {declared}"
                    )
                continue
            key = _dim_name(value, index, dim)
            if sizes.setdefault(key, size) != size:
                raise InputShapeError(
                    f"--check-shape: symbolic dim {key} is given both {sizes[key]} and {size}"
                )
    return sizes


def _fits(array: np.ndarray, value: ir.Value) -> bool:
    """Whether ``array`` has ``value``'s element type and fits its declared dims."""
    dtype = value.dtype
    if dtype is None or array.dtype != np.dtype(dtype.numpy()):
        return False
    shape = value.shape
    if shape is None:
        return True
    if len(shape) != array.ndim:
        return False
    dims = zip(shape.dims, array.shape, strict=True)
    return all(not isinstance(d, int) or d == n for d, n in dims)


def inputs_from_file(model: ir.Model, path: str) -> dict[str, np.ndarray]:
    """The feeds in ``path`` (``.npz``, one array per graph input name) for ``model``.

    Raises:
        EyefoldError: the file cannot be read, an input has no array or an array no
            input, or an array's type or shape does not fit its input's declaration.
    """
    try:
        with np.load(path, allow_pickle=False) as archive:
            feeds = {name: archive[name] for name in archive.files}
    except (OSError, ValueError) as error:
        raise EyefoldError(f"--check-inputs cannot read {path}: {error}") from None
    inputs = {v.name or "": v for v in model.graph.inputs if not v.is_initializer()}
    missing = [name for name in inputs if name not in feeds]
    extra = [name for name in feeds if name not in inputs]
    if missing or extra:
        raise EyefoldError(
            f"--check-inputs {path} must hold one array per graph input"
            f" ({', '.join(inputs)}): missing {missing or 'none'},"
            f" not inputs {extra or 'none'}"
        )
    for name, value in inputs.items():
        array = feeds[name]
        if not _fits(array, value):
            declared = f"{value.dtype.name if value.dtype else '?'}{value.shape}"
            raise EyefoldError(
                f"--check-inputs {path}: {name!r} is {array.dtype}{list(array.shape)}, the"
                f" model declares {declared}"
            )
    return feeds
