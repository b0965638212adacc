"""eyefold's onnx-ir passes; each works alone or inside an ``ir.passes.PassManager``.

Each pass returns a ``PassResult`` subclass carrying what it found (``FoldResult.folded``,
``RulesResult.hits``, ``LegalizeResult.outcomes``...). :func:`default_pipeline` builds
them all for a :class:`~eyefold.options.PipelineOptions`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eyefold.core.lazy_exports import lazy_exports

if TYPE_CHECKING:
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
    from eyefold.passes.upgrade_opset import UpgradeOpsetPass

# Loaded on first use: importing one pass module must not import the others. The
# pipeline's names (eyefold.pipeline, the layer above the passes) are forwarded here too,
# for the documented ``from eyefold.passes import default_pipeline, report_of``, by name
# only: no pass module imports the pipeline.
_LAZY: dict[str, str] = {
    "ApplyEyeLikeRulesPass": "eyefold.passes.apply_rules",
    "EyefoldPipeline": "eyefold.pipeline",
    "FoldEyeLikePass": "eyefold.passes.fold_eye_like",
    "FoldResult": "eyefold.passes.fold_eye_like",
    "InferEyeLikeInputShapesPass": "eyefold.passes.infer_input_shapes",
    "InferEyeLikeOutputsPass": "eyefold.passes.infer_eye_like",
    "InferInputShapesResult": "eyefold.passes.infer_input_shapes",
    "InferOutputsResult": "eyefold.passes.infer_eye_like",
    "LegalizeEyeLikePass": "eyefold.passes.legalize_eye_like",
    "LegalizeResult": "eyefold.passes.legalize_eye_like",
    "LowerEyeLikePass": "eyefold.passes.lower_eye_like",
    "LowerResult": "eyefold.passes.lower_eye_like",
    "PinInputShapesPass": "eyefold.passes.pin_input_shapes",
    "PinInputShapesResult": "eyefold.passes.pin_input_shapes",
    "PipelineResult": "eyefold.pipeline",
    "RulesResult": "eyefold.passes.apply_rules",
    "UpgradeOpsetPass": "eyefold.passes.upgrade_opset",
    "default_pipeline": "eyefold.pipeline",
    "pipeline_steps": "eyefold.pipeline",
    "report_of": "eyefold.pipeline",
}

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

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
