"""Where the shape of an EyeLike input was lost: the node, its op, and why.

After the rounds of inference (:mod:`eyefold.shape_facts.rounds`) an EyeLike input may
still have unknown dims. :func:`where_lost` walks back from it, one need at a time: the
dims of a tensor's shape, or the elements of a shape value. At each node it asks which
input (and which of its dims or elements) the unknown part comes from, following only
the dims an op's shape inference maps the unknown ones to (a broadcast, MatMul, Einsum,
Concat, Slice...), until it reaches a node whose inputs are known where its output is not
(onnx's inference or eyefold's value evaluators stop there), an op whose output depends on the
data or that eyefold does not evaluate, or a graph input with dynamic dims. Those dims
are named; ``--input-shape`` is suggested only when the inference, run again with them
pinned, makes the shape static.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

import onnx

from eyefold.core.domains import DEFAULT_DOMAINS
from eyefold.core.metadata_keys import SHAPE_LOST_KEY
from eyefold.core.weightless import LargeTensor
from eyefold.shape_facts.evaluate import evaluable
from eyefold.shape_facts.op_shapes import (
    BROADCASTING,
    DATA_DEPENDENT,
    SAME_SHAPE,
    VALUE_INPUTS,
)
from eyefold.shape_facts.rounds import (
    Dims,
    Inference,
    infer_with_values,
    shape_table,
    small_constants,
)
from eyefold.shape_facts.values import (
    EVALUATORS,
    PartialValue,
    ValuesOnDemand,
    slice_positions,
)

__all__ = [
    "SHAPE_LOST_KEY",
    "GraphFacts",
    "ShapeLoss",
    "ValueLookup",
    "copy_for_static_dims",
    "input_loss",
    "losses",
    "static_dims_used",
    "where_lost",
]

_MAX_STEPS = 256
_NOT_INFERRED = "onnx's inference gives it no static shape though its inputs are known"


@dataclasses.dataclass(frozen=True)
class ShapeLoss:
    """Where a shape stopped being known.

    Attributes:
        value: the value whose shape (or value) is unknown there.
        node: the node that loses it; None at a graph input.
        op: that node's op type; None at a graph input.
        why: the reason, in words.
    """

    value: str
    node: str | None
    op: str | None
    why: str

    def describe(self) -> str:
        """One phrase for the report: ``lost at node 'n' (Range): why``."""
        if self.op is None:
            return f"lost at graph input {self.value!r}: {self.why}"
        return f"lost at node {self.node!r} ({self.op}): {self.why}"

    def to_dict(self) -> dict[str, str | None]:
        """The report's ``shape_lost`` entry."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class _Need:
    """What must be known: ``kind`` "shape" (dims) or "value" (elements) of ``name``."""

    kind: str
    name: str
    parts: tuple[int, ...] | None = None


def _exact(parent: _Need, child: _Need) -> bool:
    """Whether ``child`` is exactly what ``parent`` needs, not a broader guess.

    A need for every dim or element of a value, derived from a need for only some parts
    of its consumer's output, may lead to parts the consumer never read.
    """
    return child.parts is not None or parent.parts is None


# What a pinned dim is set to when checking that pinning makes a shape static.
_PIN = 2


def _dims_text(dims: Dims, positions: list[int], pinnable: bool) -> str:
    """The dynamic dims, and ``--input-shape`` where pinning them was seen to help."""
    named = [f"dim {i} ({dims[i]!r})" if dims[i] else f"dim {i}" for i in positions]
    verb, pronoun = ("is", "it") if len(named) == 1 else ("are", "them")
    if pinnable:
        return f"{', '.join(named)} {verb} dynamic; --input-shape pins {pronoun}"
    return f"{', '.join(named)} {verb} dynamic, and pinning {pronoun} leaves the shape unknown"


def input_loss(name: str, dims: Dims) -> ShapeLoss:
    """The loss at graph input ``name``, declared with ``dims`` (the EyeLike's own input)."""
    unknown = [i for i, d in enumerate(dims) if not isinstance(d, int)]
    return ShapeLoss(name, None, None, _dims_text(dims, unknown, pinnable=True))


class ValueLookup(Protocol):
    """Where the walk reads a shape value: a dict, or :class:`ValuesOnDemand`."""

    def get(self, name: str, /) -> PartialValue | None:
        """The value of ``name``, or None when it is not known."""


@dataclasses.dataclass(frozen=True)
class GraphFacts:
    """What a walk back reads of a graph.

    Attributes:
        producer: the node making each value, by the value's name.
        constants: the names of the graph's initializers.
        shapes: the dims of the values, by name.
        values: the shape values known, by name.
        built: the slice as built, to infer again with an input's dims freed (None:
            the walk's answer is not checked).
        large: the tensors the slice declares as typed inputs, for that inference.
    """

    producer: Mapping[str, onnx.NodeProto]
    constants: Collection[str]
    shapes: Mapping[str, Dims]
    values: ValueLookup
    built: onnx.ModelProto | None = None
    large: Mapping[str, LargeTensor] | None = None

    @classmethod
    def of(cls, inference: Inference) -> GraphFacts:
        """The facts of the last round of an inference."""
        graph = inference.model.graph
        return cls(
            {o: n for n in graph.node for o in n.output if o},
            {t.name for t in graph.initializer},
            inference.shapes,
            inference.values,
        )

    @classmethod
    def before_rounds(
        cls,
        built: onnx.ModelProto,
        inference: Inference,
        large: Mapping[str, LargeTensor] | None = None,
    ) -> GraphFacts:
        """The facts of a slice as built, with the dims the inference found.

        ``built`` is a copy taken before the rounds changed the slice; its values are
        computed where the walk reads them.
        """
        graph = built.graph
        producer = {o: n for n in graph.node for o in n.output if o}
        shapes = {**shape_table(graph), **shape_table(inference.model.graph)}
        opset = next(
            (o.version for o in built.opset_import if o.domain in DEFAULT_DOMAINS), None
        )
        constants = small_constants(graph)
        values = ValuesOnDemand(producer, constants.get, shapes.get, opset=opset)
        initializers = {t.name for t in graph.initializer}
        return cls(producer, initializers, shapes, values, built, large)


class _Walk:
    """The facts of one graph, asked what is known and where a need leads.

    ``every_part``: follow every dim and element, known or not, to find what a static
    shape was computed from (only constants end a path); otherwise only the unknown ones,
    to find where a shape was lost (``model``: the inferred slice, run again with dims
    pinned to see whether pinning them helps).
    """

    def __init__(
        self,
        facts: GraphFacts,
        model_inputs: Collection[str],
        targets: list[str],
        *,
        every_part: bool = False,
        model: onnx.ModelProto | None = None,
    ) -> None:
        self.every_part = every_part
        self.model = model
        self.targets = targets
        self.pinned: dict[tuple[tuple[str, tuple[int, ...]], ...], dict[str, Dims]] = {}
        self.shapes = facts.shapes
        self.values = facts.values
        self.constants = facts.constants
        self.producer = facts.producer
        self.model_inputs = set(model_inputs)
        # Whether some dim followed came from several operands (a broadcast) or from a
        # node read whole: then one of them alone may decide it.
        self.alternatives = False

    def note_sources(self, found: Sequence[_Need]) -> None:
        """Records that one dim was followed to ``found``, more than one alternative."""
        if len(found) > 1:
            self.alternatives = True

    def follows(self, dim: object) -> bool:
        """Whether the walk follows a dim: an unknown one, or any with ``every_part``."""
        return self.every_part or not isinstance(dim, int)

    def unknown(self, need: _Need) -> list[int] | None:
        """The dims or elements among ``need.parts`` still to follow (None: nothing is known).

        Those that are unknown; with ``every_part``, all of them but a constant's.
        """
        if need.kind == "shape":
            items: list[object] | None = self.shapes.get(need.name)
            known = (lambda d: not self.follows(d)) if items is not None else None
        else:
            if need.name in self.constants:
                return []
            value = self.values.get(need.name)
            items = None if value is None else list(value.items)
            known = lambda d: not self.every_part and d is not None  # noqa: E731
        if items is None or known is None:
            return None
        parts = range(len(items)) if need.parts is None else need.parts
        return [i for i in parts if 0 <= i < len(items) and not known(items[i])]

    def is_known(self, need: _Need) -> bool:
        return self.unknown(need) == []

    def value_length(self, name: str) -> int | None:
        value = self.values.get(name)
        if value is not None:
            return len(value.items)
        dims = self.shapes.get(name)
        if dims is not None and len(dims) <= 1:
            return dims[0] if dims and isinstance(dims[0], int) else (1 if not dims else None)
        return None

    def pinning_makes_static(self, target: str, inputs: Collection[_Need]) -> bool:
        """Whether pinning the unknown dims ``inputs`` name makes ``target``'s shape static.

        Seen by running the inference again with those dims pinned (to any value), once
        for every target that needs the same pins.
        """
        pins: dict[str, tuple[int, ...]] = {}
        for need in inputs:
            unknown = self.unknown(need)
            if need.name not in self.model_inputs or need.kind != "shape" or not unknown:
                return False
            pins[need.name] = tuple(unknown)
        key = tuple(sorted(pins.items()))
        if key not in self.pinned:
            self.pinned[key] = self._infer_pinned(pins)
        return _static(self.pinned[key].get(target))

    def _infer_pinned(self, pins: dict[str, tuple[int, ...]]) -> dict[str, Dims]:
        if self.model is None:
            return {}
        model = onnx.ModelProto()
        model.CopyFrom(self.model)
        graph = model.graph
        del graph.value_info[:]
        for output in graph.output:
            output.ClearField("type")
        for info in graph.input:
            for position in pins.get(info.name, ()):
                info.type.tensor_type.shape.dim[position].dim_value = _PIN
        try:
            return infer_with_values(model, self.targets).shapes
        except Exception:  # onnx raises several unrelated types; then nothing is claimed
            return {}

    def at_input(self, need: _Need, pinnable: bool = True) -> ShapeLoss:
        name = need.name
        if name not in self.model_inputs:
            why = "its value is a tensor too large to follow as a shape value"
            if name not in self.shapes:
                why = "it is computed outside what was inferred"
            return ShapeLoss(name, None, None, why)
        if need.kind == "value":
            return ShapeLoss(name, None, None, "its value is only known at run time")
        dims = self.shapes.get(name)
        if dims is None:
            return ShapeLoss(name, None, None, "its shape is not declared")
        why = _dims_text(dims, self.unknown(need) or [], pinnable)
        return ShapeLoss(name, None, None, why)


def _unknowns(walk: _Walk, names: list[str], kind: str) -> list[_Need]:
    return [_Need(kind, n) for n in names if n and not walk.is_known(_Need(kind, n))]


def _value_step(walk: _Walk, node: onnx.NodeProto, need: _Need) -> list[_Need] | str:
    """Where the unknown elements of ``node``'s output value come from, or why not known."""
    elements = walk.unknown(need)
    if not elements:
        return _element_step(walk, node, None)
    needs: list[_Need] = []
    for element in elements:
        found = _element_step(walk, node, element)
        if isinstance(found, str):
            return found
        needs.extend(n for n in found if n not in needs)
    return needs


def _element_step(walk: _Walk, node: onnx.NodeProto, element: int | None) -> list[_Need] | str:
    """Where one element (None: every element) of ``node``'s output comes from."""
    op, inputs = node.op_type, list(node.input)
    if element is None:
        if op in ("Shape", "Size"):
            return [_Need("shape", inputs[0])]
        computed = op in EVALUATORS or evaluable(node)
        found = _unknowns(walk, inputs, "value")
        if (found or walk.every_part) and computed:
            return found
        if not computed:
            return f"its value is computed by {op}, which eyefold does not evaluate"
        return f"its value is not followed: too large, or {op} fails on what it reads"
    if op == "Shape":
        dims = walk.shapes.get(inputs[0])
        start = onnx.helper.get_node_attr_value(node, "start") if _has(node, "start") else 0
        if dims is None:
            return [_Need("shape", inputs[0])]
        rank = len(dims)
        start = min(max(start + rank if start < 0 else start, 0), rank)
        return [_Need("shape", inputs[0], (start + element,))]
    if op == "Size":
        return [_Need("shape", inputs[0])]
    if op in ("Reshape", "Squeeze", "Unsqueeze", "Identity", "Flatten", "Cast", "Neg", "Abs"):
        return [_Need("value", inputs[0], (element,))]
    if op == "Gather":
        return _gather_step(walk, inputs, element)
    if op == "Concat":
        return _concat_step(walk, inputs, element)
    if op == "Slice":
        return _slice_step(walk, inputs, element)
    if op in EVALUATORS and op not in ("Constant", "ConstantOfShape", "Expand"):
        needs = []
        for name in inputs:  # elementwise: the operands unknown at that element
            length = walk.value_length(name) if name else None
            index = 0 if length == 1 else element
            if name and not walk.is_known(_Need("value", name, (index,))):
                needs.append(_Need("value", name, (index,)))
        if needs:
            return needs
    return _element_step(walk, node, None)


def _has(node: onnx.NodeProto, name: str) -> bool:
    return any(a.name == name for a in node.attribute)


def _gather_step(walk: _Walk, inputs: list[str], element: int) -> list[_Need]:
    indices = walk.values.get(inputs[1])
    if indices is None or not indices.known:
        return [_Need("value", inputs[1])]
    length = walk.value_length(inputs[0])
    picked = indices.ints()
    if length is None or picked is None or element >= len(picked):
        return [_Need("value", inputs[0])]
    return [_Need("value", inputs[0], (picked[element] % length,))]


def _concat_step(walk: _Walk, inputs: list[str], element: int) -> list[_Need] | str:
    offset = 0
    for name in inputs:
        length = walk.value_length(name)
        if length is None:
            return [_Need("value", name)]
        if element < offset + length:
            return [_Need("value", name, (element - offset,))]
        offset += length
    return "its value is not known"


def _slice_step(walk: _Walk, inputs: list[str], element: int) -> list[_Need] | str:
    settings = [walk.values.get(name) if name else None for name in inputs[1:5]]
    unknown = [
        _Need("value", name)
        for name, value in zip(inputs[1:5], settings, strict=False)
        if name and (value is None or not value.known)
    ]
    if unknown:
        return unknown
    starts, ends = settings[0].ints(), settings[1].ints()  # type: ignore[union-attr]
    steps = settings[3].ints() if len(settings) > 3 and settings[3] else [1]
    length = walk.value_length(inputs[0])
    if length is None or not starts or not ends or not steps or steps[0] == 0:
        return [_Need("value", inputs[0])]
    positions = slice_positions(length, starts[0], ends[0], steps[0])
    if element >= len(positions):
        return "its value is not known"
    return [_Need("value", inputs[0], (positions[element],))]


def _reshape_step(walk: _Walk, inputs: list[str], dims: list[int]) -> list[_Need]:
    """Reshape: a dim is the target's element, the data's dim (0), or all of them (-1)."""
    target = walk.values.get(inputs[1])
    if target is None:
        return [_Need("value", inputs[1])]
    needs: list[_Need] = []
    for dim in dims:
        item = target.items[dim] if dim < len(target.items) else None
        if item is None:
            needs.append(_Need("value", inputs[1], (dim,)))
        elif item == 0:
            needs.append(_Need("shape", inputs[0], (dim,)))
        elif item < 0:  # -1: the remaining size, from every dim of the data and of the target
            needs.extend(_unknowns(walk, [inputs[0]], "shape"))
            needs.extend(_unknowns(walk, [inputs[1]], "value"))
    return needs


def _unknown_dim(walk: _Walk, name: str, dim: int) -> list[_Need] | None:
    """A need for ``name``'s dim ``dim`` when it is unknown, [] when known.

    None: ``name``'s rank is not known (then its whole shape is needed).
    """
    dims = walk.shapes.get(name)
    if dims is None:
        return None
    if not 0 <= dim < len(dims):
        return []
    return [_Need("shape", name, (dim,))] if walk.follows(dims[dim]) else []


def _broadcast_sources(walk: _Walk, names: list[str], rank: int, dims: list[int]):
    """The inputs' dims an unknown output dim of a broadcast comes from (numpy's rules)."""
    needs: list[_Need] = []
    for dim in dims:
        found: list[_Need] = []
        for name in names:
            given = walk.shapes.get(name)
            if given is None:
                return None
            found += _unknown_dim(walk, name, dim - (rank - len(given))) or []
        walk.note_sources(found)
        needs.extend(n for n in found if n not in needs)
    return needs


def _matmul_sources(walk: _Walk, inputs: list[str], rank: int, dims: list[int]):
    a, b = walk.shapes.get(inputs[0]), walk.shapes.get(inputs[1])
    if a is None or b is None or len(a) < 2 or len(b) < 2:
        return None
    needs: list[_Need] = []
    for dim in dims:
        if dim == rank - 1:
            found = _unknown_dim(walk, inputs[1], len(b) - 1)
        elif dim == rank - 2:
            found = _unknown_dim(walk, inputs[0], len(a) - 2)
        else:  # the batch dims broadcast, aligned at their end
            found = [
                need
                for name, given in zip(inputs, (a, b), strict=True)
                for need in _unknown_dim(walk, name, dim - (rank - len(given))) or []
            ]
            walk.note_sources(found)
        if found is None:
            return None
        needs.extend(n for n in found if n not in needs)
    return needs


def _einsum_sources(walk: _Walk, node: onnx.NodeProto, dims: list[int]):
    equation = onnx.helper.get_node_attr_value(node, "equation")
    equation = equation.decode() if isinstance(equation, bytes) else str(equation)
    if "..." in equation or "->" not in equation:
        return None
    terms, output = equation.replace(" ", "").split("->")
    needs: list[_Need] = []
    for dim in dims:
        if dim >= len(output):
            return None
        letter = output[dim]
        found = [
            need
            for name, term in zip(node.input, terms.split(","), strict=False)
            if letter in term
            for need in (_unknown_dim(walk, name, term.index(letter)) or [])
        ]
        walk.note_sources(found)
        needs.extend(n for n in found if n not in needs)
    return needs


def _concat_sources(walk: _Walk, node: onnx.NodeProto, rank: int, dims: list[int]):
    axis = onnx.helper.get_node_attr_value(node, "axis") if _has(node, "axis") else 0
    axis = axis + rank if axis < 0 else axis
    needs: list[_Need] = []
    for dim in dims:
        found: list[_Need] = []
        for name in node.input:  # along the axis every input counts; across it, one does
            unknown = _unknown_dim(walk, name, dim)
            if unknown is None:
                return None
            found.extend(unknown)
            if found and dim != axis:
                break
        needs.extend(n for n in found if n not in needs)
    return needs


def _axes(walk: _Walk, node: onnx.NodeProto, index: int, rank: int) -> list[int] | None:
    """The node's ``axes`` (attribute, or input ``index``), normalized for ``rank``."""
    if _has(node, "axes"):
        given = list(onnx.helper.get_node_attr_value(node, "axes"))
    elif index < len(node.input) and node.input[index]:
        value = walk.values.get(node.input[index])
        given = value.ints() if value is not None else None
    else:
        return None
    if given is None:
        return None
    return [axis + rank if axis < 0 else axis for axis in given]


def _element(walk: _Walk, name: str, index: int) -> list[_Need]:
    """A need for element ``index`` of the value ``name`` when it is not known."""
    need = _Need("value", name, (index,))
    return [] if walk.is_known(need) else [need]


def _rank(walk: _Walk, name: str) -> int | None:
    dims = walk.shapes.get(name)
    return None if dims is None else len(dims)


def _kept_dim_sources(
    walk: _Walk, node: onnx.NodeProto, dims: list[int], source: dict[int, int]
) -> list[_Need] | None:
    """Output dim ``d`` is the data's dim ``source[d]`` (Squeeze, a reduction...)."""
    needs: list[_Need] = []
    for dim in dims:
        if dim not in source:
            return None
        found = _unknown_dim(walk, node.input[0], source[dim])
        if found is None:
            return None
        needs.extend(n for n in found if n not in needs)
    return needs


def _axis_sources(walk: _Walk, node: onnx.NodeProto, rank: int, dims: list[int]):
    """Where ops that keep the data's rank and change some axes take a dim from.

    Slice, Split, Tile, reductions keeping their dims: a dim off those axes is the data's;
    on them, the data's and the values that size them.
    """
    op, data = node.op_type, node.input[0]
    settings: list[str] = []
    if op == "Slice":
        axes = _axes(walk, node, 3, rank)
        if axes is None and not (len(node.input) > 3 and node.input[3]):  # every axis
            starts: Sequence[object] | None = None
            if _has(node, "starts"):
                starts = onnx.helper.get_node_attr_value(node, "starts")
            elif len(node.input) > 1 and (value := walk.values.get(node.input[1])):
                starts = value.items
            axes = list(range(len(starts))) if starts is not None else None
        settings = [name for name in node.input[1:5] if name]
    elif op == "Split":
        axis = onnx.helper.get_node_attr_value(node, "axis") if _has(node, "axis") else 0
        axes = [axis + rank if axis < 0 else axis]
        settings = [name for name in node.input[1:2] if name]
    elif op == "Tile":
        axes, settings = list(range(rank)), [node.input[1]]
    else:  # a reduction that keeps its dims
        axes = _axes(walk, node, 1, rank)
    if axes is None:
        return None
    needs: list[_Need] = []
    for dim in dims:
        found = _unknown_dim(walk, data, dim)
        if found is None:
            return None
        if dim in axes:
            found += [n for name in settings for n in _unknowns(walk, [name], "value")]
        needs.extend(n for n in found if n not in needs)
    return needs


def _pad_sources(walk: _Walk, node: onnx.NodeProto, rank: int, dims: list[int]):
    """Pad (pads an input, no axes): dim ``d`` is the data's plus two pads."""
    if len(node.input) < 2 or not node.input[1] or (len(node.input) > 3 and node.input[3]):
        return None
    needs: list[_Need] = []
    for dim in dims:
        found = _unknown_dim(walk, node.input[0], dim)
        if found is None:
            return None
        found += _element(walk, node.input[1], dim) + _element(walk, node.input[1], dim + rank)
        needs.extend(n for n in found if n not in needs)
    return needs


def _reshaping_sources(walk: _Walk, node: onnx.NodeProto, rank: int, dims: list[int]):
    """Unsqueeze, Squeeze, reductions without kept dims: dims map one to one, skipping axes."""
    op, data_rank = node.op_type, _rank(walk, node.input[0])
    if data_rank is None:
        return None
    axes = _axes(walk, node, 1, rank if op == "Unsqueeze" else data_rank)
    if axes is None:
        return None
    if op == "Unsqueeze":  # an inserted dim is 1: never unknown
        source = dict(enumerate(d for d in range(rank) if d not in axes))
        source = {out: inner for inner, out in source.items()}
    else:
        source = dict(enumerate(d for d in range(data_rank) if d not in axes))
    return _kept_dim_sources(walk, node, dims, source)


def _gather_sources(walk: _Walk, node: onnx.NodeProto, dims: list[int]):
    """Gather: the data's dims before the axis, the indices' dims, the data's after it."""
    data_rank, indices_rank = _rank(walk, node.input[0]), _rank(walk, node.input[1])
    if data_rank is None or indices_rank is None:
        return None
    axis = onnx.helper.get_node_attr_value(node, "axis") if _has(node, "axis") else 0
    axis = axis + data_rank if axis < 0 else axis
    needs: list[_Need] = []
    for dim in dims:
        if dim < axis:
            found = _unknown_dim(walk, node.input[0], dim)
        elif dim < axis + indices_rank:
            found = _unknown_dim(walk, node.input[1], dim - axis)
        else:
            found = _unknown_dim(walk, node.input[0], dim - indices_rank + 1)
        needs.extend(n for n in found or [] if n not in needs)
    return needs


def _one_hot_sources(walk: _Walk, node: onnx.NodeProto, rank: int, dims: list[int]):
    """OneHot: the depth's value at the new axis, the indices' dims around it."""
    if len(node.input) < 3:
        return None
    axis = onnx.helper.get_node_attr_value(node, "axis") if _has(node, "axis") else -1
    axis = axis + rank if axis < 0 else axis
    needs: list[_Need] = []
    for dim in dims:
        if dim == axis:
            found: list[_Need] | None = _unknowns(walk, [node.input[1]], "value")
        else:
            found = _unknown_dim(walk, node.input[0], dim if dim < axis else dim - 1)
        if found is None:
            return None
        needs.extend(n for n in found if n not in needs)
    return needs


def _expand_sources(walk: _Walk, node: onnx.NodeProto, rank: int, dims: list[int]):
    """Expand: the data's dim and the shape value's element, aligned at the end."""
    data_rank = _rank(walk, node.input[0])
    if data_rank is None:
        return None
    needs: list[_Need] = []
    for dim in dims:
        found = _unknown_dim(walk, node.input[0], dim - (rank - data_rank)) or []
        found += _element(walk, node.input[1], dim)  # the shape has the output's rank
        walk.note_sources(found)
        needs.extend(n for n in found if n not in needs)
    return needs


_REDUCTIONS = frozenset(op for op, inputs in VALUE_INPUTS.items() if op.startswith("Reduce"))


def _dim_sources(
    walk: _Walk, node: onnx.NodeProto, rank: int, dims: list[int]
) -> list[_Need] | None:
    """The input dims the unknown ``dims`` of ``node``'s output come from.

    Only where the op's shape inference maps dims to dims; None: the op is not mapped here
    (every input is needed).
    """
    op, inputs = node.op_type, [name for name in node.input if name]
    if op in BROADCASTING:
        return _broadcast_sources(walk, inputs, rank, dims)
    if op == "MatMul" and len(inputs) == 2:
        return _matmul_sources(walk, inputs, rank, dims)
    if op == "Einsum":
        return _einsum_sources(walk, node, dims)
    if op == "Concat":
        return _concat_sources(walk, node, rank, dims)
    keeps_dims = not _has(node, "keepdims") or bool(
        onnx.helper.get_node_attr_value(node, "keepdims")
    )
    if op in ("Slice", "Split", "Tile") or (op in _REDUCTIONS and keeps_dims):
        return _axis_sources(walk, node, rank, dims)
    if op in ("Unsqueeze", "Squeeze") or op in _REDUCTIONS:
        return _reshaping_sources(walk, node, rank, dims)
    if op == "Pad":
        return _pad_sources(walk, node, rank, dims)
    if op == "Gather" and len(inputs) == 2:
        return _gather_sources(walk, node, dims)
    if op == "Expand" and len(inputs) == 2:
        return _expand_sources(walk, node, rank, dims)
    if op == "OneHot":
        return _one_hot_sources(walk, node, rank, dims)
    return None


def _shape_step(walk: _Walk, node: onnx.NodeProto, need: _Need) -> list[_Need] | str:
    """Where the unknown dims of ``node``'s output come from, or why they are lost."""
    op, inputs = node.op_type, list(node.input)
    if op in DATA_DEPENDENT:
        return DATA_DEPENDENT[op]
    dims = walk.unknown(need)
    if op == "Transpose" and dims:
        perm = onnx.helper.get_node_attr_value(node, "perm") if _has(node, "perm") else None
        rank = len(walk.shapes.get(inputs[0]) or [])
        perm = list(perm) if perm is not None else list(reversed(range(rank)))
        if all(d < len(perm) for d in dims):
            return [_Need("shape", inputs[0], tuple(perm[d] for d in dims))]
    if op in SAME_SHAPE:
        return [_Need("shape", inputs[0], tuple(dims) if dims else None)]
    if op == "ConstantOfShape":
        return [_Need("value", inputs[0], tuple(dims) if dims else None)]
    if op == "Reshape" and dims and len(inputs) > 1:
        return _reshape_step(walk, inputs, dims)
    rank = len(walk.shapes.get(need.name) or [])
    mapped = _dim_sources(walk, node, rank, dims) if dims else None
    if mapped is not None:
        return mapped or _nothing_read(walk)
    value_inputs = VALUE_INPUTS.get(op, ())
    read = [n for i, n in enumerate(inputs) if i in value_inputs]
    needs = _unknowns(walk, read, "value")
    needs += _unknowns(walk, [n for n in inputs if n not in read], "shape")
    return needs or _nothing_read(walk)


def _nothing_read(walk: _Walk) -> list[_Need] | str:
    """What a node's output part reads when nothing of it is left to follow.

    With ``every_part``: nothing (it reads constants); otherwise onnx's inference lost
    the shape there.
    """
    return [] if walk.every_part else _NOT_INFERRED


def _merged(have: _Need | None, need: _Need) -> _Need:
    """One need for every part of a graph input that some path needs."""
    if have is None:
        return need
    if have.parts is None or need.parts is None or have.kind != need.kind:
        return _Need(have.kind, have.name)
    return _Need(have.kind, have.name, tuple(sorted({*have.parts, *need.parts})))


def _input_losses(losses: list[ShapeLoss]) -> ShapeLoss:
    """One loss for the graph inputs reached: the first, naming the others' dims too."""
    first, others = losses[0], [f"{loss.value!r} ({loss.why})" for loss in losses[1:]]
    if not others:
        return first
    why = f"{first.why}; so is graph input {', '.join(others)}"
    return dataclasses.replace(first, why=why)


def where_lost(
    inference: Inference, target: str, model_inputs: Collection[str]
) -> ShapeLoss | None:
    """Where the shape of ``target`` (a main-graph value of the inferred slice) was lost.

    Every unknown part is followed back; a node that loses the shape although what it
    reads is known (or whose output depends on the data) is reported first, the nearest
    to ``target``; otherwise the graph inputs whose dynamic dims it all comes from.

    Args:
        inference: what the rounds of inference found.
        target: the value whose shape is not static.
        model_inputs: the slice inputs that are the model's own graph inputs (the others
            stand for weights or for values computed outside the slice).

    Returns:
        The loss, or None when the shape is static after all.
    """
    return losses(inference, [target], model_inputs).get(target)


def losses(
    inference: Inference, targets: Collection[str], model_inputs: Collection[str]
) -> dict[str, ShapeLoss]:
    """:func:`where_lost` of each target whose shape is not static, walking one graph."""
    unresolved = [t for t in targets if not _static(inference.shapes.get(t))]
    if not unresolved:
        return {}
    walk = _Walk(GraphFacts.of(inference), model_inputs, unresolved, model=inference.model)
    found = {target: _walk_back(walk, target) for target in unresolved}
    return {target: loss for target, loss in found.items() if loss is not None}


def _static(dims: Dims | None) -> bool:
    return dims is not None and all(isinstance(d, int) for d in dims)


@dataclasses.dataclass
class _Reached:
    """Where a walk back from a target's shape ended.

    Attributes:
        inputs: the needs that reached values no node of the slice produces (graph
            inputs, weights, values computed outside), in the order reached.
        stops: the nodes that lose the shape, each with whether the path to it is exact.
        complete: False when the walk ran out of steps before it ended.
    """

    inputs: list[_Need] = dataclasses.field(default_factory=list)
    stops: list[tuple[bool, ShapeLoss]] = dataclasses.field(default_factory=list)
    complete: bool = True


def _follow(walk: _Walk, target: str) -> _Reached:
    """Every need of ``target``'s shape, followed back node by node.

    A node where the walk cannot map a need to its inputs stops it (a loss); with
    ``every_part`` the walk goes on through all of that node's inputs instead, so what a
    static shape was computed from is never under-counted.
    """
    start = _Need("shape", target)
    reached = _Reached()
    frontier, exact = [start], {start: True}
    for _ in range(_MAX_STEPS):
        if not frontier:
            return reached
        need = frontier.pop(0)
        node = walk.producer.get(need.name)
        if node is None:
            reached.inputs.append(need)
            continue
        step = (_shape_step if need.kind == "shape" else _value_step)(walk, node, need)
        if isinstance(step, list) and step and all(walk.is_known(n) for n in step):
            if walk.every_part:
                continue  # constants only
            what = "shape" if need.kind == "shape" else "value"
            step = f"its output's {what} is not inferred though what it reads is known"
        if isinstance(step, str) and walk.every_part:
            walk.alternatives = True
            read = [name for name in node.input if name]
            step = _unknowns(walk, read, "shape") + _unknowns(walk, read, "value")
        elif isinstance(step, str) or (not step and not walk.every_part):
            loss = ShapeLoss(need.name, node.name, node.op_type, step or "it is not known")
            reached.stops.append((exact[need], loss))
            continue
        for found in step:
            if found not in exact:
                exact[found] = exact[need] and _exact(need, found)
                frontier.append(found)
    reached.complete = not frontier
    return reached


def _walk_back(walk: _Walk, target: str) -> ShapeLoss | None:
    """Where ``target``'s shape was lost (see :func:`where_lost`)."""
    if walk.is_known(_Need("shape", target)):
        return None
    reached = _follow(walk, target)
    inputs: dict[str, _Need] = {}
    for need in reached.inputs:
        inputs[need.name] = _merged(inputs.get(need.name), need)
    stops = reached.stops
    # A node that loses the shape on an exact path, before dynamic graph inputs whose
    # pinning makes the shape static, before a node reached only by a broader guess.
    for is_exact, loss in stops:
        if is_exact:
            return loss
    if inputs:
        pinnable = walk.pinning_makes_static(target, inputs.values())
        if pinnable or not stops:
            return _input_losses([walk.at_input(need, pinnable) for need in inputs.values()])
    return stops[0][1] if stops else None


def copy_for_static_dims(
    proto: onnx.ModelProto, inputs: Collection[str]
) -> onnx.ModelProto | None:
    """A copy of a slice before the rounds change it, for :func:`static_dims_used`.

    None when none of its ``inputs`` (the model's own) has a static dim: nothing can be
    baked in, and no copy is made.
    """
    names = set(inputs)
    for info in proto.graph.input:
        dims = info.type.tensor_type.shape.dim
        if info.name in names and any(d.HasField("dim_value") for d in dims):
            copy = onnx.ModelProto()
            copy.CopyFrom(proto)
            return copy
    return None


def static_dims_used(
    facts: GraphFacts, targets: Collection[str], model_inputs: Collection[str]
) -> dict[str, list[str]]:
    """For each target whose shape is static, the graph inputs it bakes in.

    Those ``model_inputs`` of which the walk back from the target's shape (the walk that
    says where a shape was lost, following every dim and element) reaches a dim that is
    declared static: folding the target bakes that dim into the model. An input whose
    dims reached are all symbolic, or that only feeds the target's values, is not baked
    in. A target whose walk runs out of steps is left out (nothing is claimed).

    Args:
        facts: the graph as it was built, before the rounds replaced the values they
            computed by constants (the walk must see what those were computed from),
            with the dims the inference found (:meth:`GraphFacts.before_rounds`).
        targets: the values whose shapes to follow.
        model_inputs: the graph inputs that are the model's own.
    """
    static = [t for t in targets if _static(facts.shapes.get(t))]
    walk = _Walk(facts, model_inputs, static, every_part=True)
    used: dict[str, list[str]] = {}
    for target in static:
        walk.alternatives = False
        reached = _follow(walk, target)
        if not reached.complete:
            continue
        read: dict[str, _Need] = {}
        for need in reached.inputs:
            if need.kind == "shape" and need.name in walk.model_inputs:
                read[need.name] = _merged(read.get(need.name), need)
        used[target] = sorted(
            name
            for name, need in read.items()
            if _declares_static(walk.shapes.get(name), need.parts)
            and not (walk.alternatives and _static_without(facts, target, name, need.parts))
        )
    return used


def _static_without(
    facts: GraphFacts, target: str, name: str, parts: tuple[int, ...] | None
) -> bool:
    """Whether ``target``'s shape stays the same with ``name``'s static dims freed.

    Freed: those among ``parts`` declared symbolic; then the fold does not rest on them.
    A walk follows every operand of a broadcast (``where(mask, H, eye(3).expand_as(H))``
    reads H's 3 and the literal's), so where one dim had several sources, what it
    reaches is checked by running the inference again with those dims freed. Without
    the slice, or when the inference fails, the dims are taken as used.
    """
    if facts.built is None:
        return False
    model = onnx.ModelProto()
    model.CopyFrom(facts.built)
    for info in model.graph.input:
        if info.name != name:
            continue
        dims = info.type.tensor_type.shape.dim
        for position in range(len(dims)) if parts is None else parts:
            if 0 <= position < len(dims) and dims[position].HasField("dim_value"):
                dims[position].dim_param = f"eyefold_free_{position}_of_{name}"
    try:
        found = infer_with_values(model, [target], large=facts.large).shapes.get(target)
    except Exception:  # onnx raises several unrelated types; then nothing is claimed
        return False
    return found == facts.shapes.get(target)


def _declares_static(dims: Dims | None, parts: tuple[int, ...] | None) -> bool:
    """Whether any of the ``parts`` (None: any) of the declared ``dims`` is a number."""
    if dims is None:
        return False
    positions = range(len(dims)) if parts is None else parts
    return any(0 <= p < len(dims) and isinstance(dims[p], int) for p in positions)
