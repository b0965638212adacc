"""The ops ``drop_input_producer`` looks through, in a module that imports nothing.

The rule registry reads this table to tell, without importing the rule (and onnxscript),
whether an EyeLike's producer could match.
"""

from __future__ import annotations

__all__ = ["SHAPE_PRESERVING_OPS"]

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
