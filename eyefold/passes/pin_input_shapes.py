"""Pin graph input shapes (``--input-shape``, ``input_shapes=``) as the first step.

A pinned symbolic dim is a name the rest of the model may use too: exporters declare
intermediate shapes and graph outputs with the inputs' dim names (dynamo's ``B``, ``s0``)
or expressions of them (``s0*4``). Left as they were, those shapes contradict the pinned
inputs, and a runtime that checks them refuses the model (tract: ``Impossible to unify
Sym(B) with Val(8)``) though it ran it unpinned. So every dim of the main graph's values
(value_info, graph outputs and the other graph inputs, in every subgraph) that names a
pinned dim is rewritten: to the pinned integer, or to the value of its expression, or,
where that cannot be worked out (a name pinned to two values, an expression not of
integers and + - * // % and parentheses), to an unknown dim.
"""

from __future__ import annotations

import ast
import dataclasses
import logging
import operator
import re
from collections.abc import Callable, Mapping, Sequence

import onnx_ir as ir

from eyefold.core.input_shapes import InputShape, apply_input_shapes

__all__ = ["PinInputShapesPass", "PinInputShapesResult"]

logger = logging.getLogger(__name__)

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_OPERATORS: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}


@dataclasses.dataclass
class PinInputShapesResult(ir.passes.PassResult):
    """The pass result, with the names of the inputs whose shape changed.

    Attributes:
        pinned: the inputs whose shape changed.
        rewritten: how many dims of other values that named a pinned dim were rewritten.
    """

    pinned: list[str] = dataclasses.field(default_factory=list)
    rewritten: int = 0


def _pinned_names(
    before: Mapping[str, ir.Shape | None], model: ir.Model
) -> dict[str, int | None]:
    """Each dim name a pin replaced, with its integer (None: pinned to two values)."""
    found: dict[str, int | None] = {}
    for value in model.graph.inputs:
        old = before.get(value.name or "")
        if old is None or value.shape is None or len(old) != len(value.shape):
            continue
        for was, now in zip(old.dims, value.shape.dims, strict=True):
            if isinstance(was, ir.SymbolicDim) and was.value and isinstance(now, int):
                known = found.get(was.value, now)
                found[was.value] = now if known == now else None
    return found


def _evaluate(node: ast.AST) -> int:
    """An integer expression of + - * // % and parentheses (anything else raises)."""
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    raise ValueError("not an integer expression")


def _rewritten(name: str, pins: Mapping[str, int | None]) -> int | str | None:
    """The dim ``name`` stands for once the pins hold.

    An int, ``name`` itself when it names no pinned dim, or None (unknown) when its value
    cannot be worked out.
    """
    tokens = set(_NAME.findall(name))
    if not tokens & pins.keys():
        return name
    if name in pins:
        return pins[name]
    if tokens - pins.keys() or any(pins[t] is None for t in tokens):
        return None
    text = _NAME.sub(lambda m: str(pins[m.group(0)]), name)
    try:
        result = _evaluate(ast.parse(text, mode="eval"))
    except (SyntaxError, ValueError, ZeroDivisionError, RecursionError):
        return None
    return result if result >= 0 else None


def _rewrite_stale_dims(
    model: ir.Model, pins: Mapping[str, int | None], pinned: Sequence[str]
) -> int:
    """Rewrites the dims naming a pinned dim in every shape but the pinned inputs'.

    The other graph inputs too: an input that shares a pinned input's ``B`` must have the
    same size for the model to run, and a runtime that checks shapes (tract) cannot unify
    a product declared ``[2, M]`` with an operand still declared ``[B, 1]``.
    """
    values: dict[int, ir.Value] = {}
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        values.update((id(out), out) for out in node.outputs)
    values.update((id(out), out) for out in model.graph.outputs)
    values.update((id(v), v) for v in model.graph.inputs if (v.name or "") not in pinned)
    count = 0
    for value in values.values():
        shape = value.shape
        if shape is None or (value.is_graph_input() and (value.name or "") in pinned):
            continue
        dims: list[int | ir.SymbolicDim] = []
        for dim in shape.dims:
            name = dim.value if isinstance(dim, ir.SymbolicDim) else None
            now = _rewritten(name, pins) if name else name
            if not name or now == name:
                dims.append(dim)
                continue
            count += 1
            dims.append(now if isinstance(now, int) else ir.SymbolicDim(now))
        if dims != list(shape.dims):
            denotations = [shape.get_denotation(i) for i in range(len(dims))]
            value.shape = ir.Shape(dims, denotations=denotations)
    return count


class PinInputShapesPass(ir.passes.InPlacePass):
    """Sets the shapes of main-graph inputs before anything reads them.

    Pinning a symbolic dim to an integer lets every EyeLike whose shape follows from it
    fold; the other values' dims that name it follow (see the module docstring). Mistakes
    (an unknown input, a wrong rank, a static dim that disagrees) raise
    ``InputShapeError``, which the command line reports as a usage error.

    Attributes:
        shapes: the shapes to pin, at most one per input.
    """

    def __init__(self, shapes: Sequence[InputShape]) -> None:
        super().__init__()
        self.shapes = tuple(shapes)

    def call(self, model: ir.Model) -> PinInputShapesResult:
        """Pins the shapes in place, and rewrites the dims that named what was pinned."""
        before = {value.name or "": value.shape for value in model.graph.inputs}
        pinned = apply_input_shapes(model, self.shapes)
        rewritten = (
            _rewrite_stale_dims(model, _pinned_names(before, model), pinned) if pinned else 0
        )
        logger.info("graph input shapes pinned: %s; dims rewritten: %d", pinned, rewritten)
        return PinInputShapesResult(
            model, modified=bool(pinned), pinned=pinned, rewritten=rewritten
        )
