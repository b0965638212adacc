"""EyeLike(u(x), k, dtype?) -> EyeLike(x, k, dtype=type of u(x)) for shape-preserving u.

Identity: EyeLike reads nothing but the shape of its input and, without a ``dtype``
attribute, its element type. When ``u`` gives an output of the same shape as its first
input (Cast, Identity, unary elementwise ops, Softmax, Clip, CumSum, another EyeLike...),
``EyeLike(u(x))`` equals ``EyeLike(x)`` made in the type of ``u(x)``, and ``u`` has no
other consumer, so it goes too.

Why it is exact: the output is the same 0/1 matrix of the same shape and type; the
values ``u`` computed were never read.

Conditions:
    * ``u`` is a default-domain op in ``SHAPE_PRESERVING_OPS`` with one output, used only
      by the EyeLike and not a graph output;
    * ``x`` has a known type that is a valid EyeLike input type at the opset in force
      (Cast(string -> float) in front of an EyeLike must stay);
    * the output type is known (the EyeLike's ``dtype``, or what ``u`` produces: Cast's
      ``to``, CastLike's target, bool for IsNaN/IsInf, the input type for the others) and
      valid at the opset (bfloat16 only from opset 22).

A chain of such producers (``EyeLike(u(v(x)))``, each used once) is dropped in one rewrite
(see :func:`chain_source`). The shape ``u(x)`` was known to have is recorded on ``x`` when
``x`` is an intermediate value with a less specific shape, so an EyeLike that would have
folded still folds.
"""

from __future__ import annotations

import onnx_ir as ir

from eyefold.core.eyelike_types import EYELIKE_MIN_OPSET
from eyefold.core.rule_spec import MatchResult, Mismatch, Reach, RuleSpec, match_result
from eyefold.rules._common import (
    DEFAULT_DOMAINS,
    adopt_shape,
    eyelike_dtype,
    legalized_for,
    scope_opset,
    shapes_agree,
    valid_eyelike_type,
)

__all__ = ["SHAPE_PRESERVING_OPS", "DropInputProducer", "spec"]

# Ops whose single output has the shape of their first input, mapped to how the output
# type follows: "same" (the input's), "bool", "to" (Cast's attribute), "like" (CastLike's
# second input) or "eyelike" (an EyeLike's own rule). Their other inputs (Clip bounds,
# CumSum axis, Trilu k) change values only, never the shape.
# fmt: off
SHAPE_PRESERVING_OPS: dict[str, str] = {
    **dict.fromkeys(
        (
            "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "BitwiseNot", "Ceil",
            "Celu", "Clip", "Cos", "Cosh", "CumSum", "Elu", "Erf", "Exp", "Floor", "Gelu",
            "HardSigmoid", "HardSwish", "Hardmax", "Identity", "LeakyRelu", "Log",
            "LogSoftmax", "LpNormalization", "Mish", "Neg", "Not", "Reciprocal", "Relu",
            "Round", "Selu", "Shrink", "Sigmoid", "Sign", "Sin", "Sinh", "Softmax",
            "Softplus", "Softsign", "Sqrt", "Tan", "Tanh", "ThresholdedRelu", "Trilu",
        ),
        "same",
    ),
    "IsInf": "bool",
    "IsNaN": "bool",
    "Cast": "to",
    "CastLike": "like",
    "EyeLike": "eyelike",
}
# fmt: on


def _output_type(producer: ir.Node) -> ir.DataType | None:
    """The element type ``producer`` gives its output, from the op's own definition."""
    kind = SHAPE_PRESERVING_OPS[producer.op_type]
    source = producer.inputs[0]
    if kind == "same":
        # An intermediate value may be untyped (inference types only EyeLike inputs):
        # through a chain of type-keeping ops, the type is the first typed input's.
        while source is not None and source.dtype is None:
            inner = source.producer()
            if inner is None or SHAPE_PRESERVING_OPS.get(inner.op_type) != "same":
                return None
            if inner.domain not in DEFAULT_DOMAINS:
                return None
            source = inner.inputs[0]
        return source.dtype if source is not None else None
    if kind == "bool":
        return ir.DataType.BOOL
    if kind == "eyelike":
        return eyelike_dtype(producer)
    if kind == "like":
        target = producer.inputs[1] if len(producer.inputs) > 1 else None
        return target.dtype if target is not None else None
    to = producer.attributes.get("to")
    if to is None or to.type != ir.AttributeType.INT:
        return None
    try:
        return ir.DataType(to.as_int())
    except ValueError:
        return None


def _is_droppable(producer: ir.Node | None) -> bool:
    return (
        producer is not None
        and producer.op_type in SHAPE_PRESERVING_OPS
        and producer.domain in DEFAULT_DOMAINS
        and len(producer.outputs) == 1
    )


def chain_source(x: ir.Value) -> ir.Value:
    """The furthest value ``x`` is computed from through single-use shape-preserving ops.

    ``EyeLike(u(v(w)))`` reads only the shape, so it can read ``w`` directly: one rewrite
    drops the whole chain, where dropping one producer at a time would pass through
    intermediate forms a runtime may not run (e.g. a bfloat16 input). The walk stops at a
    value used elsewhere or a graph output, at a declared shape that disagrees, and at a
    type that is not an EyeLike input type at every opset (bfloat16 is not before 22).
    """
    current = x
    while True:
        producer = current.producer()
        if not _is_droppable(producer) or current.is_graph_output():
            return current
        if len(current.uses()) != 1:
            return current
        source = producer.inputs[0]
        if source is None or not valid_eyelike_type(source.dtype, EYELIKE_MIN_OPSET):
            return current
        if not shapes_agree(source, current):
            return current
        current = source


class DropInputProducer:
    """Feeds an EyeLike straight from the input of a shape-preserving producer."""

    def pattern(self, op, x):
        """EyeLike(u(x, ...)) for a node u of any default-domain op; check() picks u."""
        # submodule("") matches every op name (all start with ""); check() keeps the
        # shape-preserving ones.
        produced = op.submodule("")(x, _allow_other_inputs=True, _outputs=["produced"])
        return op.EyeLike(produced, _outputs=["eye"])

    def check(self, context, x: ir.Value, produced: ir.Value, eye: ir.Value) -> MatchResult:
        """Accepts a shape-preserving u whose input and output types EyeLike allows."""
        result = match_result()
        if (runtime := legalized_for(eye.producer())) is not None:
            return result.fail(f"EyeLike was legalized for {runtime}; its Casts stay")
        producer = produced.producer()
        known = producer.op_type in SHAPE_PRESERVING_OPS
        if not known or producer.domain not in DEFAULT_DOMAINS:
            not_known = f"{producer.op_type} is not a known shape-preserving op"
            return result.fail(Mismatch(not_known))
        if len(producer.outputs) != 1:
            return result.fail(Mismatch(f"{producer.op_type} has more than one output"))
        if not shapes_agree(x, produced):
            return result.fail(f"declared shapes around {producer.op_type} disagree")
        opset = scope_opset(context.graph_or_function, context.model)
        if not valid_eyelike_type(chain_source(x).dtype, opset):
            return result.fail(f"input of {producer.op_type} has no valid EyeLike input type")
        has_dtype = "dtype" in eye.producer().attributes
        if not has_dtype and not valid_eyelike_type(_output_type(producer), opset):
            return result.fail(
                f"output type of {producer.op_type} is unknown or not an EyeLike type"
                f" at opset {opset}"
            )
        return result

    def rewrite(self, op, x: ir.Value, produced: ir.Value, eye: ir.Value) -> ir.Value:
        """EyeLike of the chain's source with the k of the old node and its output type."""
        node = eye.producer()
        source = chain_source(x)
        attributes: dict[str, int | ir.Attr] = {}
        if "k" in node.attributes:
            attributes["k"] = node.attributes["k"]
        if "dtype" in node.attributes:
            attributes["dtype"] = node.attributes["dtype"]
        else:
            dtype = _output_type(produced.producer())
            assert dtype is not None  # check() accepted it
            if dtype != source.dtype:
                attributes["dtype"] = int(dtype)
        adopt_shape(source, produced)  # shape-preserving: what u(x) was known to be, it is
        return op.EyeLike(source, _name=node.name, **attributes)


# Root: the EyeLike itself, whose input's producer check() takes only from
# SHAPE_PRESERVING_OPS; that producer may be another EyeLike, whose output it reads.
REACH = Reach(frozenset(SHAPE_PRESERVING_OPS), depth=0, replaces=frozenset({"EyeLike"}))
# Dims left symbolic, so nothing folds first.
FIRING_MODEL = """<ir_version: 10, opset_import: ["" : 22]>
agraph (float[N, M] x) => (y) {
    r = Relu(x)
    y = EyeLike(r)
}"""
spec = RuleSpec.declare(
    __name__,
    __doc__,
    DropInputProducer,
    exactness="exact",
    phase="before-fold",
    reach=REACH,
    firing_model=FIRING_MODEL,
)
__getattr__ = spec.module_attribute  # `rule`: the onnxscript rule, built on first use
