"""Check what a model declares about an EyeLike output against what the spec fixes.

The spec leaves nothing open about an EyeLike output: it has rank 2, its input's dims and
the ``dtype`` attribute's type (else its input's). Exporters still get this wrong: tf2onnx's
``tf.eye(n, batch_shape=[2])`` emits a rank-2 EyeLike and declares the graph output with the
batch dim. onnx's checker rejects such a model, but from a throwaway copy in which another op
replaces EyeLike, so its message would name an op the user does not have. eyefold
checks the declaration itself and names the value, the node, both shapes and what to do.

A declaration is never "fixed" by guessing: folding would replace the value and drop the
wrong declaration silently, so the check runs before any fold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import onnx_ir as ir

from eyefold.core.scopes import Scope, is_eyelike, iter_scopes
from eyefold.errors import InvalidModelError

__all__ = [
    "check_eyelike_declarations",
    "check_output_declaration",
    "format_tensor_type",
]

Dim = int | str | None


def format_tensor_type(dtype: ir.DataType | None, dims: Sequence[Dim] | None) -> str:
    """``float[2,n,n]``; ``?`` for an unknown type or dim, no brackets for unknown rank."""
    name = dtype.name.lower() if dtype is not None else "?"
    if dims is None:
        return name
    return name + "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


def _dims(shape: ir.Shape | None) -> list[Dim] | None:
    if shape is None:
        return None
    return [d if isinstance(d, int) else d.value for d in shape.dims]


def _declared_as(value: ir.Value, scope: Scope) -> str:
    """How the user finds the declaration: a graph output, or a value_info entry."""
    outputs = scope.graph.outputs
    if any(output is value for output in outputs):
        if scope.top_node is None and scope.function is None:
            return f"graph output {value.name!r}"
        return f"output {value.name!r} of {scope.path}"
    return f"value {value.name!r} (value_info)"


def _problem(
    declared_dtype: ir.DataType | None,
    declared: list[Dim] | None,
    dtype: ir.DataType | None,
    dims: list[Dim],
    dtype_from: str,
) -> tuple[str, str] | None:
    """(what the node produces, what to do), or None when the declaration fits."""
    produced = format_tensor_type(dtype, dims)
    if declared is not None and len(declared) != 2:
        known = any(d is not None for d in dims)
        return (
            f"rank 2 ({produced})",
            f"fix the output shape the exporter declares to {produced if known else 'rank 2'}"
            " (EyeLike keeps its input's shape), then export again",
        )
    if dtype is not None and declared_dtype is not None and declared_dtype != dtype:
        return (
            f"{dtype.name.lower()} ({dtype_from})",
            f"fix the exporter's output type to {dtype.name.lower()}, then export again",
        )
    clashes = [
        i
        for i, (have, want) in enumerate(zip(declared or [], dims, strict=False))
        if isinstance(have, int) and isinstance(want, int) and have != want
    ]
    if clashes:
        return (
            f"{produced}, its input's shape (dim {clashes[0]} differs)",
            f"fix the output shape the exporter declares to {produced}, or the input"
            " shape it comes from if that is the wrong one, then export again",
        )
    return None


def check_output_declaration(
    node: ir.Node, scope: Scope, dtype: ir.DataType | None, dims: Sequence[Dim] | None
) -> None:
    """Raises when the declared type or shape of ``node``'s output contradicts the spec.

    Args:
        node: an EyeLike node with one output.
        scope: where it sits.
        dtype: the type it produces, None when unknown.
        dims: its input's dims (None per unknown dim), None when unknown.

    Raises:
        InvalidModelError: one line naming the declaration, the node, both types and
            shapes, and what the user can do about it.
    """
    output = node.outputs[0]
    declared = _dims(output.shape)
    dtype_from = "its dtype attribute" if "dtype" in node.attributes else "its input's type"
    produced_dims = list(dims) if dims else [None, None]
    found = _problem(output.dtype, declared, dtype, produced_dims, dtype_from)
    if found is None:
        return
    produces, remedy = found
    rank_note = f" (rank {len(declared)})" if declared and len(declared) != 2 else ""
    label = repr(node.name) if node.name else f"(unnamed, output {output.name!r})"
    raise InvalidModelError(
        f"{_declared_as(output, scope)} is declared"
        f" {format_tensor_type(output.dtype, declared)}"
        f"{rank_note},"
        f" but EyeLike {label} in {scope.path} produces {produces}; {remedy}"
    )


def _produced_dtype(node: ir.Node) -> ir.DataType | None:
    """The literal ``dtype`` attribute when valid, else the input's type (None: unknown)."""
    attribute = node.attributes.get("dtype")
    if attribute is None:
        source = node.inputs[0] if node.inputs else None
        return None if source is None else source.dtype
    if attribute.is_ref() or attribute.type != ir.AttributeType.INT:
        return None
    try:
        return ir.DataType(attribute.as_int())
    except ValueError:
        return None  # eyefold's EyeLike analysis names the invalid code


def check_eyelike_declarations(
    model: ir.Model, input_dims: Mapping[int, Sequence[Dim]] | None = None
) -> None:
    """Checks the output declaration of every EyeLike in ``model`` (no other validation).

    Args:
        model: the model, unchanged.
        input_dims: dims learned for EyeLike inputs, by ``id()`` of the input value (the
            declared shape is used for the others), so the message can show them.

    Raises:
        InvalidModelError: from :func:`check_output_declaration`, for the first EyeLike
            whose output declaration contradicts the spec.
    """
    learned = input_dims or {}
    for scope in iter_scopes(model):
        for node in scope.graph:
            if not is_eyelike(node) or len(node.inputs) != 1 or len(node.outputs) != 1:
                continue
            source = node.inputs[0]
            dims = None if source is None else learned.get(id(source), _dims(source.shape))
            if dims is not None and len(dims) != 2:
                continue  # a rank error of the input, which the analysis reports
            check_output_declaration(node, scope, _produced_dtype(node), dims)
