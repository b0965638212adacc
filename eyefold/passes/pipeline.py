"""The default pass sequence, for users composing eyefold with their own passes."""

from __future__ import annotations

from collections.abc import Sequence

import onnx_ir as ir

from eyefold.passes.apply_rules import ApplyEyeLikeRulesPass
from eyefold.passes.fold_eye_like import DEFAULT_SIZE_LIMIT_BYTES, FoldEyeLikePass
from eyefold.passes.infer_eye_like import InferEyeLikeOutputsPass
from eyefold.passes.infer_input_shapes import InferEyeLikeInputShapesPass
from eyefold.passes.legalize_eye_like import LegalizeEyeLikePass
from eyefold.passes.upgrade_opset import UpgradeOpsetPass

__all__ = ["default_pipeline"]


def default_pipeline(
    *,
    fold: bool = True,
    size_limit_bytes: int = DEFAULT_SIZE_LIMIT_BYTES,
    upgrade: bool = True,
    target_opset: int = 22,
    target_runtime: str | None = None,
    rules: Sequence[str] | None = None,
    relaxed: bool = False,
) -> ir.passes.PassManager:
    """The passes ``eyefold.optimize`` runs, as one PassManager (run once, in order).

    ``upgrade`` puts :class:`UpgradeOpsetPass` (to ``target_opset``) first;
    ``target_runtime`` puts :class:`LegalizeEyeLikePass` for that runtime last;
    ``rules``/``relaxed`` select the rewrite rules run before and after folding.

    >>> manager = default_pipeline()
    >>> [type(p).__name__ for p in manager.passes][1:4]
    ['InferEyeLikeInputShapesPass', 'ApplyEyeLikeRulesPass', 'FoldEyeLikePass']
    """
    passes: list[ir.passes.PassBase] = []
    if upgrade:
        passes.append(UpgradeOpsetPass(target_opset))
    passes.append(InferEyeLikeInputShapesPass())
    passes.append(ApplyEyeLikeRulesPass(rules=rules, relaxed=relaxed, phase="before-fold"))
    if fold:
        passes.append(FoldEyeLikePass(size_limit_bytes=size_limit_bytes))
    passes.append(ApplyEyeLikeRulesPass(rules=rules, relaxed=relaxed, phase="after-fold"))
    passes.append(
        InferEyeLikeOutputsPass(size_limit_bytes=size_limit_bytes, fold_enabled=fold)
    )
    if target_runtime is not None:  # last: it reads the types the passes before it set
        passes.append(LegalizeEyeLikePass(target_runtime))
    return ir.passes.PassManager(passes, steps=1)
