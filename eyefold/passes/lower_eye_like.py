"""Lower the EyeLike nodes folding left into primitive ops every runtime has.

Some runtimes cannot run EyeLike as it is: TensorRT's parser takes it only with static input
dims, and onnxruntime implements 37 of its 182 type combinations. What folding leaves has a
shape known only at run time, so this pass writes the matrix out of ops they all have::

    rows, cols = Gather(Shape(x), 0), Gather(Shape(x), 1)
    i = Range(0, rows, 1)  (+ k when k < 0)     j = Range(0, cols, 1)  (- k when k > 0)
    y = Cast(Equal(Unsqueeze(i, [1]), Unsqueeze(j, [0])), to=dtype)

(an int64 result is ``Where(Equal(...), 1, 0)`` over the int64 constants instead, which
tract returns as int64 where its Cast to int64 gives its internal shape type).

``i + k == j`` is tested as ``i + k == j`` for ``k < 0`` and ``i == j - k`` for ``k > 0``:
both sides stay within int64 for every ``k`` (``0 <= i, j < 2**63``), so no clamp of ``k``
is needed and a ``k`` beyond the matrix gives the all-zero matrix, as EyeLike does. The
result is bit-exact in every type: Equal gives exactly False/True, and Cast maps them to
exactly 0 and 1 (bool: the Equal is the output itself; int64: Where picks the constants).

The lowered form is written to run everywhere, so a ConstantOfShape without ``value`` that
fed the EyeLike (torch.onnx's dynamo diagonal mask; its Shape is still read) gets the
spec's default spelled out, which tract needs (``eyefold/passes/explicit_fill.py``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from eyefold.core.eyelike_types import to_data_type
from eyefold.core.names import ModelNames
from eyefold.core.run_findings import RunFindings
from eyefold.core.scopes import Scope, is_eyelike, iter_scopes
from eyefold.passes.explicit_fill import (
    IMPLICIT_FILL_NOTE,
    implicit_fill_producer,
    spell_out_fill,
)

__all__ = [
    "MIN_LOWERING_OPSET",
    "LowerEyeLikePass",
    "LowerOutcome",
    "LowerResult",
    "lower_node",
    "lowering_blocker",
]

logger = logging.getLogger(__name__)

# Range exists from opset 11; every other op used is older.
MIN_LOWERING_OPSET = 11
# From opset 13, Unsqueeze takes its axes as an input rather than an attribute.
_UNSQUEEZE_AXES_INPUT_OPSET = 13


@dataclasses.dataclass(frozen=True)
class LowerOutcome:
    """What the pass did with one EyeLike node.

    Attributes:
        node: the EyeLike node (removed from its graph when lowered).
        name: the node's name (or its output's, when unnamed).
        scope: where it sat, e.g. ``main`` or ``function pkg::F``.
        lowered: whether it was replaced.
        note: why not, or what it became.
    """

    node: ir.Node
    name: str
    scope: str
    lowered: bool
    note: str


@dataclasses.dataclass
class LowerResult(ir.passes.PassResult):
    """The pass result.

    Attributes:
        outcomes: one per EyeLike node seen, in scope order.
    """

    outcomes: list[LowerOutcome] = dataclasses.field(default_factory=list)

    def report_into(self, findings: RunFindings) -> None:
        """What was lowered, per node."""
        findings.lowering = self.outcomes


def _output_type(node: ir.Node) -> ir.DataType | None:
    attribute = node.attributes.get("dtype")
    if attribute is not None:
        return to_data_type(attribute.as_int())
    source = node.inputs[0] if node.inputs else None
    return source.dtype if source is not None else None


class _Emitter:
    """Builds the lowered nodes in front of one EyeLike, with names derived from it."""

    def __init__(self, scope: Scope, node: ir.Node, names: ModelNames) -> None:
        self.scope, self.node, self.names = scope, node, names
        self.stem = node.outputs[0].name or node.name or "eyelike"

    def op(self, op_type: str, inputs: list[ir.Value], role: str, **attrs) -> ir.Value:
        """Inserts ``op_type(inputs, attrs)`` before the EyeLike; returns its output."""
        output = ir.Value(name=self.names.new_value(f"{self.stem}__lowered_{role}"))
        node = ir.node(
            op_type,
            inputs,
            attributes=attrs,
            outputs=[output],
            name=self.names.new_node(f"{self.node.name or self.stem}__lowered_{role}"),
        )
        self.scope.graph.insert_before(self.node, node)
        return output

    def const(self, value: int, role: str) -> ir.Value:
        """A scalar int64 Constant node (functions cannot hold initializers)."""
        tensor = ir.tensor(np.array(value, dtype=np.int64))
        return self.op("Constant", [], role, value=tensor)

    def unsqueeze(self, value: ir.Value, axis: int, role: str) -> ir.Value:
        if self.scope.opset is not None and self.scope.opset >= _UNSQUEEZE_AXES_INPUT_OPSET:
            axes = self.op("Constant", [], f"{role}_axes", value=ir.tensor([axis]))
            return self.op("Unsqueeze", [value, axes], role)
        return self.op("Unsqueeze", [value], role, axes=[axis])


def _lower(emit: _Emitter, k: int, dtype: ir.DataType) -> tuple[ir.Value, str]:
    """Emits the primitive-op matrix.

    Returns:
        The value that replaces the EyeLike output, and the ops written, in words.
    """
    source = emit.node.inputs[0]
    assert source is not None
    shape = emit.op("Shape", [source], "shape")
    zero, one = emit.const(0, "zero"), emit.const(1, "one")
    rows = emit.op("Gather", [shape, zero], "rows", axis=0)
    cols = emit.op("Gather", [shape, one], "cols", axis=0)
    row_index = emit.op("Range", [zero, rows, one], "row_index")
    col_index = emit.op("Range", [zero, cols, one], "col_index")
    if k < 0:
        row_index = emit.op("Add", [row_index, emit.const(k, "k")], "row_index_plus_k")
    elif k > 0:
        col_index = emit.op("Sub", [col_index, emit.const(k, "k")], "col_index_minus_k")
    row = emit.unsqueeze(row_index, 1, "row")
    col = emit.unsqueeze(col_index, 0, "col")
    mask = emit.op("Equal", [row, col], "equal")
    written = "Range/" + ("Add/" if k < 0 else "Sub/" if k > 0 else "") + "Equal"
    if dtype == ir.DataType.BOOL:
        return mask, written
    if dtype == ir.DataType.INT64:
        # Not Cast(mask, to=INT64): tract (0.23.9) types every Cast to int64 as its shape
        # type TDim, which it cannot return ("Unsupported DatumType in the public API
        # TDim"). Where over the int64 constants gives the same bits on every runtime.
        return emit.op("Where", [mask, one, zero], "where"), f"{written}/Where(int64 1, 0)"
    return emit.op("Cast", [mask], "cast", to=dtype), f"{written}/Cast(to={dtype.name})"


def _replace(scope: Scope, node: ir.Node, lowered: ir.Value, dtype: ir.DataType) -> None:
    """Moves every use, graph-output slot, name, type and shape of the EyeLike's output."""
    result = node.outputs[0]
    ir.convenience.replace_all_uses_with(result, lowered, replace_graph_outputs=True)
    lowered.type = result.type or ir.TensorType(dtype)
    lowered.shape = result.shape or ir.Shape([None, None])  # EyeLike's output is 2-D
    name = result.name
    scope.graph.remove(node, safe=True)
    lowered.name = name


class LowerEyeLikePass(ir.passes.InPlacePass):
    """Replaces every EyeLike node with Shape/Gather/Range/Add|Sub/Unsqueeze/Equal/Cast|Where.

    Run it after folding: what folds becomes a constant, which every runtime reads, and
    only what is left (a shape known at run time) needs lowering. It covers the main graph,
    If/Loop/Scan bodies and functions, names the new values after the EyeLike's output
    (unique model-wide), and is idempotent (a second run finds no EyeLike). Its
    :class:`LowerResult` says what it did with each node.

    Attributes:
        select: which EyeLike nodes to lower (None: every one); the others are left as
            they are and get no outcome.
    """

    def __init__(self, select: Callable[[Scope, ir.Node], bool] | None = None) -> None:
        super().__init__()
        self.select = select

    def call(self, model: ir.Model) -> LowerResult:
        """Lowers the (selected) EyeLike nodes of every scope."""
        names = ModelNames(model)
        outcomes = [
            lower_node(scope, node, names)
            for scope in iter_scopes(model)
            for node in list(scope.graph)
            if is_eyelike(node) and (self.select is None or self.select(scope, node))
        ]
        count = sum(outcome.lowered for outcome in outcomes)
        logger.info("EyeLike nodes lowered to primitive ops: %d", count)
        return LowerResult(model, modified=bool(count), outcomes=outcomes)


def lowering_blocker(scope: Scope, node: ir.Node) -> str | None:
    """Why ``node`` cannot be lowered where it is, None when it can."""
    if scope.opset is None or scope.opset < MIN_LOWERING_OPSET:
        return (
            f"opset {scope.opset} has no Range (opset {MIN_LOWERING_OPSET}+); kept (an"
            " opset upgrade makes it lowerable)"
        )
    k_attribute = node.attributes.get("k")
    if k_attribute is not None and k_attribute.type != ir.AttributeType.INT:
        return "k is not an int; kept"
    if _output_type(node) is None or not node.inputs or node.inputs[0] is None:
        return "output type unknown; kept"
    return None


def lower_node(scope: Scope, node: ir.Node, names: ModelNames) -> LowerOutcome:
    """Lowers one EyeLike in place (its output keeps name, type and users), or says why not."""
    label = node.name or node.outputs[0].name or "EyeLike"
    blocker = lowering_blocker(scope, node)
    if blocker is not None:
        return LowerOutcome(node, label, scope.path, False, blocker)
    dtype = _output_type(node)
    assert dtype is not None
    k_attribute = node.attributes.get("k")
    k = k_attribute.as_int() if k_attribute is not None else 0
    fill = implicit_fill_producer(node)
    lowered, written = _lower(_Emitter(scope, node, names), k, dtype)
    _replace(scope, node, lowered, dtype)
    note = f"lowered to {written} with k={k}"
    if fill is not None:
        spell_out_fill(fill)
        note += f"; {IMPLICIT_FILL_NOTE}: value 0.0 (float) spelled out"
    return LowerOutcome(node, label, scope.path, True, note)
