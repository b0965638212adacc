"""Give every EyeLike that stays an exact output type and (possibly symbolic) shape."""

from __future__ import annotations

import dataclasses
import logging

import onnx_ir as ir

from eyefold.core.analysis import EyeLikeAnalysis, analyze_all
from eyefold.core.limits import DEFAULT_SIZE_LIMIT_BYTES
from eyefold.core.run_findings import RunFindings
from eyefold.core.shapes import merge_shapes
from eyefold.passes.explicit_fill import implicit_fill_producer, spell_out_fill

__all__ = ["InferEyeLikeOutputsPass", "InferOutputsResult"]

logger = logging.getLogger(__name__)


def _learned_output_shape(analysis: EyeLikeAnalysis) -> list[int | ir.SymbolicDim]:
    """The output has the input's shape; with the input unknown it is still rank 2."""
    source = analysis.node.inputs[0]
    if source is None or source.shape is None:
        return [ir.SymbolicDim(None), ir.SymbolicDim(None)]
    return list(source.shape.dims)


def _infer(analysis: EyeLikeAnalysis) -> bool:
    """Fills in the output's type and shape; the analysis checked their declarations.

    A declared FLOAT output (or input) of an EyeLike fed by a ConstantOfShape without
    ``value`` is refused by a runtime that fills it as float64 (tract), which ran the node
    undeclared: the fill is spelled out too, so the declaration holds on every runtime.
    """
    output = analysis.node.outputs[0]
    changed = False
    if analysis.dtype is not None and output.dtype is None:
        output.type = ir.TensorType(analysis.dtype)
        changed = True
    if output.type is None:
        return changed  # a shape without an element type cannot be serialized
    fill = implicit_fill_producer(analysis.node)
    if fill is not None:
        spell_out_fill(fill)
        changed = True
    merged = merge_shapes(output.shape, _learned_output_shape(analysis))
    if merged is not None:
        output.shape = merged
        changed = True
    return changed


@dataclasses.dataclass
class InferOutputsResult(ir.passes.PassResult):
    """The pass result, with every EyeLike node seen, its action and its reason."""

    facts: list[EyeLikeAnalysis] = dataclasses.field(default_factory=list)

    def report_into(self, findings: RunFindings) -> None:
        """Every EyeLike left, with its action and reason."""
        findings.left = self.facts


class InferEyeLikeOutputsPass(ir.passes.InPlacePass):
    """Sets the output type and shape of every EyeLike left in the model.

    Validates each node on the way (rank-2 input, valid types), so a model with a bad
    EyeLike is rejected even when nothing folds.

    Attributes:
        size_limit_bytes: the fold limit, used only to explain why a node did not fold.
        fold_enabled: False when folding was turned off, for the same explanation.
    """

    def __init__(
        self, *, size_limit_bytes: int = DEFAULT_SIZE_LIMIT_BYTES, fold_enabled: bool = True
    ) -> None:
        super().__init__()
        self.size_limit_bytes = size_limit_bytes
        self.fold_enabled = fold_enabled

    def call(self, model: ir.Model) -> InferOutputsResult:
        """Infers the outputs of the EyeLike nodes in every scope."""
        seen: list[EyeLikeAnalysis] = []
        changed = 0
        limit, fold = self.size_limit_bytes, self.fold_enabled
        for analysis in analyze_all(model, size_limit_bytes=limit, fold=fold):
            if analysis.action == "folded":
                # Only reached when this pass runs without the fold pass before it.
                analysis.action, analysis.reason = "inferred", "not folded (fold pass not run)"
            changed += _infer(analysis)
            seen.append(analysis)
        logger.info("EyeLike outputs inferred: %d", changed)
        return InferOutputsResult(model, modified=bool(changed), facts=seen)
