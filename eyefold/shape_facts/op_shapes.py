"""What sets each op's output shape, as the walk back to a lost shape needs to know."""

from __future__ import annotations

__all__ = ["DATA_DEPENDENT", "SAME_SHAPE", "VALUE_INPUTS"]

# Ops whose output shape is the shape of their first input.
SAME_SHAPE = frozenset(
    {
        "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "BatchNormalization",
        "Cast", "CastLike", "Ceil", "Celu", "Clip", "Cos", "Cosh", "CumSum", "Dropout",
        "Elu", "Erf", "Exp", "Floor", "Gelu", "HardSigmoid", "HardSwish", "Hardmax",
        "Identity", "InstanceNormalization", "IsInf", "IsNaN", "LayerNormalization",
        "LeakyRelu", "Log", "LogSoftmax", "LpNormalization", "MeanVarianceNormalization",
        "Mish", "Neg", "Not", "Reciprocal", "Relu", "Round", "Selu", "Shrink", "Sigmoid",
        "Sign", "Sin", "Sinh", "Softmax", "Softplus", "Softsign", "Sqrt", "Tan", "Tanh",
        "ThresholdedRelu", "Trilu", "GroupNormalization", "RMSNormalization",
    }
)
# Inputs whose values (not only shapes) set the output shape, per op.
VALUE_INPUTS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,),
    "Expand": (1,),
    "ConstantOfShape": (0,),
    "Tile": (1,),
    "Range": (0, 1, 2),
    "Slice": (1, 2, 3, 4),
    "Pad": (1, 3),
    "Unsqueeze": (1,),
    "Squeeze": (1,),
    "Resize": (2, 3),
    "Upsample": (1,),
    "OneHot": (1,),
    "TopK": (1,),
    "Split": (1,),
    "CenterCropPad": (1,),
    **dict.fromkeys(
        (
            "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax",
            "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare",
        ),
        (1,),
    ),
}
# Ops whose output shape depends on the data they read, or on the control flow taken.
DATA_DEPENDENT = {
    **dict.fromkeys(
        ("NonZero", "Unique", "Compress", "NonMaxSuppression", "StringSplit"),
        "its output's shape depends on the values of its input data",
    ),
    **dict.fromkeys(
        ("If", "Loop", "Scan"),
        "its output's shape depends on the branch or the iterations taken at run time",
    ),
}
