"""What eyefold knows about one EyeLike node, and what it will do with it.

Both the fold pass and ``eyefold inspect`` classify nodes here, so the reason a user reads in
``inspect`` is the same one ``optimize`` acts on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, Literal

import onnx_ir as ir

from eyefold.core.declarations import check_output_declaration
from eyefold.core.eyelike_types import EYELIKE_MIN_OPSET, check_eyelike_type
from eyefold.core.metadata_keys import SHAPE_LOST_KEY
from eyefold.core.output_size import output_nbytes
from eyefold.core.scopes import Scope, is_eyelike, iter_scopes
from eyefold.errors import InvalidModelError, UnsupportedDtypeError

__all__ = ["Action", "EyeLikeAnalysis", "analyze_all", "analyze_eyelike", "dim_to_json"]

Action = Literal["folded", "inferred", "kept"]

_EYELIKE_ATTRIBUTES = frozenset({"k", "dtype"})


@dataclasses.dataclass
class EyeLikeAnalysis:
    """What is statically known of one EyeLike node, and the action decided for it.

    Attributes:
        node: the EyeLike node.
        scope: where it sits.
        k: diagonal offset.
        input_dtype: element type of the input, None when unknown.
        dtype: output element type (the ``dtype`` attribute, else the input's), or None.
        shape: input shape as ints / symbolic names / None per dim; None when unknown.
        nbytes: output size in bytes when the shape is static and the type known.
        action: "folded" (replaced by a constant), "inferred" (stays, output type and
            shape known) or "kept" (stays, output type unknown).
        reason: why, in words a user can act on.
        from_inputs: graph inputs whose declared shapes a fold rests on.
        shape_lost: for an input shape that is not static, where it was lost (an
            ``eyefold.shape_facts.lost.ShapeLoss``), when the inference step found it.
    """

    node: ir.Node
    scope: Scope
    k: int
    input_dtype: ir.DataType | None
    dtype: ir.DataType | None
    shape: list[int | str | None] | None
    nbytes: int | None
    action: Action = "kept"
    reason: str = ""
    from_inputs: list[str] = dataclasses.field(default_factory=list)
    shape_lost: Any = None

    @property
    def static_dims(self) -> tuple[int, int] | None:
        """(rows, cols) when both dims are known integers."""
        if self.shape is None or not all(isinstance(d, int) for d in self.shape):
            return None
        rows, cols = self.shape
        assert isinstance(rows, int) and isinstance(cols, int)
        return rows, cols


def dim_to_json(dim: int | ir.SymbolicDim) -> int | str | None:
    """An ir dimension as an int, its symbolic name, or None when unnamed."""
    if isinstance(dim, int):
        return dim
    return dim.value


def node_label(node: ir.Node) -> str:
    """The node's name, or a description when it has none."""
    return repr(node.name) if node.name else f"(unnamed {node.op_type})"


def _check_structure(node: ir.Node, scope: Scope) -> ir.Value:
    where = f"EyeLike node {node_label(node)} in {scope.path}"
    if len(node.inputs) != 1:
        raise InvalidModelError(f"{where} has {len(node.inputs)} inputs; EyeLike takes one")
    if node.inputs[0] is None:
        raise InvalidModelError(f"{where} has an empty input name; its input is required")
    if len(node.outputs) != 1:
        raise InvalidModelError(f"{where} has {len(node.outputs)} outputs; EyeLike has one")
    if scope.opset is not None and scope.opset < EYELIKE_MIN_OPSET:
        raise InvalidModelError(
            f"{where}: EyeLike exists from opset {EYELIKE_MIN_OPSET}, the model has opset"
            f" {scope.opset}"
        )
    unknown = sorted(set(node.attributes) - _EYELIKE_ATTRIBUTES)
    if unknown:
        raise InvalidModelError(
            f"{where} has the unknown attribute(s) {', '.join(map(repr, unknown))};"
            " EyeLike takes k and dtype"
        )
    k_attr = node.attributes.get("k")
    if k_attr is not None and k_attr.type != ir.AttributeType.INT:
        raise InvalidModelError(f"{where}: attribute k must be an int, got {k_attr.type}")
    return node.inputs[0]


def _read_dtypes(
    node: ir.Node, scope: Scope, source: ir.Value
) -> tuple[ir.DataType | None, ir.DataType | None]:
    where = f"EyeLike node {node_label(node)} in {scope.path}"
    input_dtype = source.dtype
    try:
        if input_dtype is not None:
            check_eyelike_type(input_dtype, opset=scope.opset, what="input type")
        dtype_attr = node.attributes.get("dtype")
        if dtype_attr is None:
            return input_dtype, input_dtype
        if dtype_attr.type != ir.AttributeType.INT:
            raise UnsupportedDtypeError(
                f"dtype attribute must be an int, got {dtype_attr.type}"
            )
        if dtype_attr.is_ref():  # a function attribute: known per call only
            return input_dtype, None
        return input_dtype, check_eyelike_type(dtype_attr.as_int(), opset=scope.opset)
    except UnsupportedDtypeError as error:
        raise UnsupportedDtypeError(f"{where}: {error}") from None


def analyze_eyelike(
    node: ir.Node, scope: Scope, *, size_limit_bytes: int, fold: bool = True
) -> EyeLikeAnalysis:
    """Validates one EyeLike node and decides whether it folds.

    Raises:
        InvalidModelError: wrong input/output count, known rank != 2, opset below 9, an
            invalid input type or ``dtype`` attribute, or an output declared with another
            type or shape than EyeLike gives; the message names the node.
    """
    source = _check_structure(node, scope)
    input_dtype, dtype = _read_dtypes(node, scope, source)
    k_attr = node.attributes.get("k")
    k = k_attr.as_int() if k_attr is not None and not k_attr.is_ref() else 0
    shape = None if source.shape is None else [dim_to_json(d) for d in source.shape.dims]
    if shape is not None and len(shape) != 2:
        raise InvalidModelError(
            f"EyeLike node {node_label(node)} in {scope.path}: input has rank {len(shape)}"
            f" (shape {shape}); EyeLike needs a rank-2 input"
        )
    negative = next((d for d in shape or () if isinstance(d, int) and d < 0), None)
    if negative is not None:
        raise InvalidModelError(
            f"EyeLike node {node_label(node)} in {scope.path}: its input {source.name!r} is"
            f" declared with the negative dim {negative} (shape {shape}); a dim is 0 or more"
        )
    check_output_declaration(node, scope, dtype, shape)
    analysis = EyeLikeAnalysis(node, scope, k, input_dtype, dtype, shape, nbytes=None)
    static = analysis.static_dims
    if static is not None and dtype is not None:
        analysis.nbytes = output_nbytes(*static, dtype)
    analysis.action, analysis.reason = _decide(
        analysis, size_limit_bytes=size_limit_bytes, fold=fold
    )
    if analysis.static_dims is None and (loss := source.meta.get(SHAPE_LOST_KEY)) is not None:
        analysis.shape_lost = loss
        analysis.reason += f"; {loss.describe()}"
    refs = [a for a in node.attributes.values() if a.is_ref()]
    if refs:
        # k or dtype names a function attribute: the node can only be folded per call.
        analysis.action = "inferred" if analysis.dtype is not None else "kept"
        analysis.reason = ", ".join(
            f"{a.name} refers to the function attribute {a.ref_attr_name!r}" for a in refs
        )
    return analysis


def _decide(
    analysis: EyeLikeAnalysis, *, size_limit_bytes: int, fold: bool
) -> tuple[Action, str]:
    if analysis.dtype is None:
        return "kept", "output type unknown: the input has no known type and no dtype is set"
    if analysis.shape is None:
        return "inferred", "input shape unknown"
    dynamic = [
        f"dim {i} is {d!r}" if d else f"dim {i} is unknown"
        for i, d in enumerate(analysis.shape)
        if not isinstance(d, int)
    ]
    if dynamic:
        return "inferred", "input shape is dynamic (" + ", ".join(dynamic) + ")"
    assert analysis.nbytes is not None
    if analysis.nbytes > size_limit_bytes:
        return "inferred", (
            f"output is {analysis.nbytes} bytes, over the size limit of "
            f"{size_limit_bytes} bytes"
        )
    if not fold:
        return "inferred", "folding disabled"
    return "folded", f"static {analysis.shape[0]}x{analysis.shape[1]} input"


def analyze_all(
    model: ir.Model, *, size_limit_bytes: int, fold: bool = True
) -> Iterator[EyeLikeAnalysis]:
    """Validates and classifies every EyeLike of every scope, in scope order."""
    for scope in iter_scopes(model):
        for node in scope.graph:
            if is_eyelike(node):
                yield analyze_eyelike(
                    node, scope, size_limit_bytes=size_limit_bytes, fold=fold
                )
