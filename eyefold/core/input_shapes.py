"""``--input-shape NAME:D0,D1,...``: pin graph input shapes before optimizing.

A dim is a non-negative integer or a symbolic name (``batch``). Pinning a symbolic dim to an
integer lets every EyeLike whose shape follows from it fold. The name is everything before
the last ``:``, so TensorFlow-style names such as ``input:0`` work (``input:0:1,3``).
``NAME:`` with no dims pins a scalar.

Mistakes in what the user typed (syntax, unknown input, wrong rank, a static dim that
disagrees with the model) raise :class:`InputShapeError`, which the CLI reports as a usage
error (exit status 2).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

import onnx_ir as ir

from eyefold.core.output_size import MAX_DIM
from eyefold.errors import EyefoldError

__all__ = [
    "InputShape",
    "InputShapeError",
    "apply_input_shapes",
    "input_shape_from",
    "parse_input_shape",
]

_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")


class InputShapeError(EyefoldError):
    """A malformed input shape (``input_shapes``), or one that does not fit the model."""


@dataclasses.dataclass(frozen=True)
class InputShape:
    """One pinned graph input shape.

    Attributes:
        name: graph input name.
        dims: integers and symbolic names, one per dimension.
    """

    name: str
    dims: tuple[int | str, ...]

    def __str__(self) -> str:
        return f"{self.name}:{','.join(str(d) for d in self.dims)}"


def _parse_dim(text: str, spec: str) -> int | str:
    dim = text.strip()
    if dim.isdigit():
        _check_dim_range(int(dim), f"--input-shape {spec!r}")
        return int(dim)
    if _SYMBOL.match(dim):
        return dim
    raise InputShapeError(
        f"input_shapes {spec!r}: dim {dim!r} is neither a non-negative integer nor a"
        " symbolic name"
    )


def _check_dim_range(dim: int, where: str) -> None:
    """Refuses a dim no ONNX (int64) dim can hold: a typo, not a shape."""
    if dim > MAX_DIM:
        raise InputShapeError(f"{where}: dim {dim} is larger than an ONNX dim can be (2^63-1)")


def parse_input_shape(spec: str) -> InputShape:
    """Parses ``NAME:D0,D1,...`` (``NAME:`` alone is a scalar).

    Raises:
        InputShapeError: no ``:``, an empty name, or a dim that is not an integer >= 0 or
            a name.
    """
    name, colon, dims_text = spec.rpartition(":")
    if not colon or not name:
        raise InputShapeError(
            f"input_shapes {spec!r}: expected NAME:D0,D1,... (e.g. x:1,3,224,224)"
        )
    dims = (
        ()
        if not dims_text.strip()
        else tuple(_parse_dim(d, spec) for d in dims_text.split(","))
    )
    return InputShape(name, dims)


def input_shape_from(name: object, dims: object) -> InputShape:
    """An :class:`InputShape` from a library argument, checked as the command line's is.

    Raises:
        InputShapeError: a name that is not a non-empty string, dims that are not a
            sequence, or a dim that is neither an int >= 0 (not a bool) nor a name.
    """
    if not isinstance(name, str) or not name:
        raise InputShapeError(f"input_shapes: an input name must be a string, got {name!r}")
    if isinstance(dims, (str, bytes)) or not isinstance(dims, Sequence):
        raise InputShapeError(
            f"input_shapes[{name!r}]: expected a sequence of dims (ints and names),"
            f" got {dims!r}"
        )
    for dim in dims:
        integer = isinstance(dim, int) and not isinstance(dim, bool) and dim >= 0
        if not integer and not (isinstance(dim, str) and _SYMBOL.match(dim)):
            raise InputShapeError(
                f"input_shapes[{name!r}]: dim {dim!r} is neither a non-negative integer"
                " nor a symbolic name"
            )
        if integer:
            _check_dim_range(dim, f"input_shapes[{name!r}]")
    return InputShape(name, tuple(dims))


def _check_fits(value: ir.Value, pinned: InputShape) -> None:
    if value.shape is None:
        return
    declared = list(value.shape.dims)
    if len(declared) != len(pinned.dims):
        raise InputShapeError(
            f"input_shapes {pinned}: input {pinned.name!r} has rank {len(declared)}"
            f" (shape {value.shape}), not {len(pinned.dims)}"
        )
    for index, (have, want) in enumerate(zip(declared, pinned.dims, strict=True)):
        if isinstance(have, int) and have != want:
            raise InputShapeError(
                f"input_shapes {pinned}: dim {index} of input {pinned.name!r} is {have} in"
                f" the model; only symbolic or unknown dims can be pinned"
            )


def apply_input_shapes(model: ir.Model, shapes: Sequence[InputShape]) -> list[str]:
    """Sets the shapes of main-graph inputs in place.

    Args:
        model: the model to change.
        shapes: the shapes to pin, at most one per input.

    Returns:
        The names of the inputs whose shape changed.

    Raises:
        InputShapeError: an unknown or repeated input name, an input that is an
            initializer, a rank mismatch, or an integer that contradicts a static dim.
    """
    inputs = {value.name: value for value in model.graph.inputs if value.name}
    seen: set[str] = set()
    changed: list[str] = []
    for pinned in shapes:
        if pinned.name in seen:
            raise InputShapeError(f"input_shapes: input {pinned.name!r} is given twice")
        seen.add(pinned.name)
        value = inputs.get(pinned.name)
        if value is None:
            known = ", ".join(repr(n) for n in inputs) or "none"
            raise InputShapeError(
                f"input_shapes {pinned}: the model has no graph input {pinned.name!r}"
                f" (inputs: {known})"
            )
        if value.is_initializer():
            raise InputShapeError(
                f"input_shapes {pinned}: {pinned.name!r} is an initializer; its shape is"
                " fixed by its data"
            )
        _check_fits(value, pinned)
        shape = ir.Shape([d if isinstance(d, int) else ir.SymbolicDim(d) for d in pinned.dims])
        if value.shape != shape:
            value.shape = shape
            changed.append(pinned.name)
    return changed
