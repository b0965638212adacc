"""Any default-domain op whose small inputs are all known, computed by onnx's reference.

Exporters reach shapes through more ops than :mod:`eyefold.shape_facts.values` has
evaluators for (TorchScript's ``unflatten`` normalizes its dim with a ``Mod`` of two
constants), and tomorrow's exporter will use another. Where every input of a node is a
fully known small value, the node is run as onnx's reference evaluator runs it, at the
model's opset: the same semantics the soundness test checks the hand-written evaluators
against, so nothing here is a second opinion on what an op computes. Those evaluators
stay where they know more than this can: symbolic dims and partly known values.

A node stays unknown when its result is not the op's alone to decide (random ops), or
not every runtime's alike (a float result of an op whose last bit a runtime may round
otherwise than numpy: exp, pow, a float sum), when it holds a subgraph or belongs to
another domain, when its output could be large (the ops whose output size is read from
an input's value are bounded before they run), and when the evaluation raises or warns
(an integer division by zero, an overflow numpy notices).
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Sequence

import numpy as np
import onnx

from eyefold.core.domains import DEFAULT_DOMAINS
from eyefold.core.proto_subgraphs import subgraph_attributes

__all__ = ["NOT_EVALUATED", "evaluable", "evaluate"]

# Ops whose result is not a function of their inputs.
_RANDOM = frozenset(
    {
        "RandomNormal",
        "RandomNormalLike",
        "RandomUniform",
        "RandomUniformLike",
        "Bernoulli",
        "Multinomial",
    }
)
# Ops whose output size is read from a value in a way not bounded below.
_UNBOUNDED = frozenset(
    {
        "Resize",
        "Upsample",
        "CenterCropPad",
        "MelWeightMatrix",
        "DFT",
        "STFT",
        "Col2Im",
        "MaxUnpool",
        "AffineGrid",
    }
)
NOT_EVALUATED = _RANDOM | _UNBOUNDED
# Ops whose floating-point results every runtime rounds alike: IEEE's correctly rounded
# operations, and ops that only move, compare or pick elements. Elsewhere (exp, log, pow,
# trigonometry, a sum whose order a runtime chooses) the last bit may differ from
# numpy's, so an op with a float input or output outside this list is not run.
_EXACT_ON_FLOATS = frozenset(
    {
        "Abs",
        "Add",
        "Cast",
        "CastLike",
        "Ceil",
        "Clip",
        "Concat",
        "Div",
        "Equal",
        "Expand",
        "Flatten",
        "Floor",
        "Gather",
        "Greater",
        "GreaterOrEqual",
        "Identity",
        "IsInf",
        "IsNaN",
        "Less",
        "LessOrEqual",
        "Max",
        "Min",
        "Mul",
        "Neg",
        "Pad",
        "Reciprocal",
        "ReduceMax",
        "ReduceMin",
        "Relu",
        "Reshape",
        "Round",
        "Shape",
        "Sign",
        "Size",
        "Slice",
        "Sqrt",
        "Squeeze",
        "Sub",
        "Tile",
        "Transpose",
        "Unsqueeze",
        "Where",
    }
)


def _product(array: np.ndarray) -> int:
    return math.prod(abs(int(item)) for item in array.reshape(-1).tolist())


def _output_bound(op: str, inputs: Sequence[np.ndarray | None]) -> int | None:
    """An upper bound of the output's element count where an input's value sets it.

    None: the op's output is no larger than its inputs together.
    """
    first = inputs[0] if inputs else None
    second = inputs[1] if len(inputs) > 1 else None
    if op == "ConstantOfShape" and first is not None:
        return _product(first)
    if op in ("Expand", "Tile", "OneHot") and first is not None and second is not None:
        return first.size * _product(second)
    if op == "Range" and len(inputs) == 3 and all(v is not None for v in inputs):
        start, limit, delta = (float(v.reshape(-1)[0]) for v in inputs)  # type: ignore[union-attr]
        return math.ceil(abs((limit - start) / delta)) if delta else 0
    if op == "Pad" and first is not None and second is not None:
        return first.size + sum(abs(int(i)) for i in second.reshape(-1).tolist())
    if op in ("HannWindow", "HammingWindow", "BlackmanWindow") and first is not None:
        return _product(first)
    return None


def evaluable(node: onnx.NodeProto) -> bool:
    """Whether ``node`` is one this module may run (its inputs' values aside)."""
    return (
        node.domain in DEFAULT_DOMAINS
        and node.op_type not in NOT_EVALUATED
        and not any(True for _ in subgraph_attributes(node))
    )


def evaluate(
    node: onnx.NodeProto,
    inputs: Sequence[np.ndarray | None],
    opset: int,
    *,
    max_elements: int,
) -> list[np.ndarray | None] | None:
    """The values of ``node``'s outputs, or None when it is not run.

    Args:
        node: a node of the default domain.
        inputs: the value of each input, None for an absent optional input (an unknown
            input: nothing is run).
        opset: the default domain's opset of the model.
        max_elements: the most elements an output may have (a larger op is not run).
    """
    if not evaluable(node) or len(inputs) != len(node.input):
        return None
    pairs = zip(node.input, inputs, strict=True)
    if any((value is None) != (not name) for name, value in pairs):
        return None
    exact_on_floats = node.op_type in _EXACT_ON_FLOATS
    if not exact_on_floats and any(v is not None and v.dtype.kind == "f" for v in inputs):
        return None
    try:
        bound = _output_bound(node.op_type, inputs)
    except (TypeError, ValueError, OverflowError, ZeroDivisionError):
        return None
    if bound is not None and bound > max_elements:
        return None
    key = tuple(
        (name, value.dtype.str, value.shape, _elements(value))
        for name, value in zip(node.input, inputs, strict=True)
        if value is not None
    )
    found = _run(node.SerializeToString(), key, opset)
    if found is None or any(v is not None and v.size > max_elements for v in found):
        return None
    if not exact_on_floats and any(v is not None and v.dtype.kind == "f" for v in found):
        return None
    return found


def _elements(value: np.ndarray) -> bytes | tuple[object, ...]:
    """The array's elements as a cache key: its bytes for numbers (so -0.0 is not 0.0)."""
    if value.dtype.kind in "biufc":
        return value.tobytes()
    return tuple(value.reshape(-1).tolist())


@functools.lru_cache(maxsize=4096)
def _run(
    node_bytes: bytes,
    inputs: tuple[tuple[str, str, tuple[int, ...], bytes | tuple[object, ...]], ...],
    opset: int,
) -> list[np.ndarray | None] | None:
    """One node run by onnx's reference evaluator (cached: exporters repeat their chains).

    The arrays returned are shared by every caller with the same key: never written to.
    """
    import onnx.reference  # 0.4 s to import: only once a node is run

    node = onnx.NodeProto.FromString(node_bytes)
    feeds: dict[str, np.ndarray] = {}
    declared = []
    for name, dtype, shape, items in inputs:
        if isinstance(items, bytes):
            array = np.frombuffer(items, dtype=np.dtype(dtype)).reshape(shape).copy()
        else:
            array = np.array(items, dtype=np.dtype(dtype)).reshape(shape)
        feeds[name] = array
        element_type = onnx.helper.np_dtype_to_tensor_dtype(array.dtype)
        declared.append(onnx.helper.make_tensor_value_info(name, element_type, None))
    outputs = [onnx.ValueInfoProto(name=name) for name in node.output if name]
    graph = onnx.helper.make_graph([node], "eyefold_evaluate", declared, outputs)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
    try:
        with warnings.catch_warnings(), np.errstate(all="raise"):
            warnings.simplefilter("error")
            results = onnx.reference.ReferenceEvaluator(model).run(None, feeds)
    except Exception:  # any failure of the op (or of the evaluator) leaves it unknown
        return None
    produced = iter(results)
    found = [next(produced) if name else None for name in node.output]
    # A sequence, a map or an absent optional is not a tensor value: left unknown.
    return [r if isinstance(r, np.ndarray) else None for r in found]
