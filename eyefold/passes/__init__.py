"""eyefold's onnx-ir passes; each works alone or inside an ``ir.passes.PassManager``.

Each pass returns a ``PassResult`` subclass carrying what it found (``FoldResult.folded``,
``RulesResult.hits``, ``LegalizeResult.outcomes``...). :func:`default_pipeline` builds
them all for a :class:`~eyefold.options.PipelineOptions`.
"""

from __future__ import annotations

from eyefold.passes.apply_rules import ApplyEyeLikeRulesPass, RulesResult
from eyefold.passes.fold_eye_like import FoldEyeLikePass, FoldResult
from eyefold.passes.infer_eye_like import InferEyeLikeOutputsPass, InferOutputsResult
from eyefold.passes.infer_input_shapes import (
    InferEyeLikeInputShapesPass,
    InferInputShapesResult,
)
from eyefold.passes.legalize_eye_like import LegalizeEyeLikePass, LegalizeResult
from eyefold.passes.lower_eye_like import LowerEyeLikePass, LowerResult
from eyefold.passes.pin_input_shapes import PinInputShapesPass, PinInputShapesResult
from eyefold.passes.pipeline import (
    EyefoldPipeline,
    PipelineResult,
    default_pipeline,
    pipeline_steps,
    report_of,
)
from eyefold.passes.upgrade_opset import UpgradeOpsetPass

__all__ = [
    "ApplyEyeLikeRulesPass",
    "EyefoldPipeline",
    "FoldEyeLikePass",
    "FoldResult",
    "InferEyeLikeInputShapesPass",
    "InferEyeLikeOutputsPass",
    "InferInputShapesResult",
    "InferOutputsResult",
    "LegalizeEyeLikePass",
    "LegalizeResult",
    "LowerEyeLikePass",
    "LowerResult",
    "PinInputShapesPass",
    "PinInputShapesResult",
    "PipelineResult",
    "RulesResult",
    "UpgradeOpsetPass",
    "default_pipeline",
    "pipeline_steps",
    "report_of",
]
