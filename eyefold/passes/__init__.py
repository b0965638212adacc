"""eyefold's onnx-ir passes; each works alone or inside an ``ir.passes.PassManager``."""

from __future__ import annotations

from eyefold.passes.apply_rules import ApplyEyeLikeRulesPass
from eyefold.passes.fold_eye_like import DEFAULT_SIZE_LIMIT_BYTES, FoldEyeLikePass
from eyefold.passes.infer_eye_like import InferEyeLikeOutputsPass
from eyefold.passes.infer_input_shapes import InferEyeLikeInputShapesPass
from eyefold.passes.legalize_eye_like import LegalizeEyeLikePass
from eyefold.passes.pipeline import default_pipeline
from eyefold.passes.upgrade_opset import UpgradeOpsetPass

__all__ = [
    "DEFAULT_SIZE_LIMIT_BYTES",
    "ApplyEyeLikeRulesPass",
    "FoldEyeLikePass",
    "InferEyeLikeInputShapesPass",
    "InferEyeLikeOutputsPass",
    "LegalizeEyeLikePass",
    "UpgradeOpsetPass",
    "default_pipeline",
]
