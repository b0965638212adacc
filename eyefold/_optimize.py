"""``eyefold.optimize``: the pipeline on an in-memory model, with a report of what it did."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TypeVar, overload

import onnx
import onnx_ir as ir

from eyefold.core.analysis import EyeLikeFacts
from eyefold.core.domains import default_opset
from eyefold.errors import EyefoldError
from eyefold.eyelike_types import EYELIKE_MIN_OPSET
from eyefold.passes.apply_rules import ApplyEyeLikeRulesPass
from eyefold.passes.fold_eye_like import DEFAULT_SIZE_LIMIT_BYTES, FoldEyeLikePass
from eyefold.passes.infer_eye_like import InferEyeLikeOutputsPass
from eyefold.passes.infer_input_shapes import InferEyeLikeInputShapesPass
from eyefold.passes.legalize_eye_like import LegalizeEyeLikePass
from eyefold.passes.upgrade_opset import UpgradeOpsetPass, check_target_opset
from eyefold.report import NodeOutcome, Report
from eyefold.runtime_support import get_support

__all__ = ["DEFAULT_TARGET_OPSET", "OptimizeResult", "optimize", "optimize_with_report"]

DEFAULT_TARGET_OPSET = 22

ModelT = TypeVar("ModelT", onnx.ModelProto, ir.Model)


@dataclasses.dataclass
class OptimizeResult:
    """The optimized model (same type as the argument) and the run's report."""

    model: onnx.ModelProto | ir.Model
    report: Report


def _check_options(target_opset: int, size_limit: int) -> None:
    if isinstance(size_limit, bool) or not isinstance(size_limit, int) or size_limit < 0:
        raise EyefoldError(
            f"size_limit must be a non-negative int of bytes, got {size_limit!r}"
        )
    check_target_opset(
        target_opset, lowest=EYELIKE_MIN_OPSET, error=EyefoldError, what="target_opset"
    )


def run_pipeline(
    model: ir.Model,
    *,
    target_opset: int = DEFAULT_TARGET_OPSET,
    upgrade: bool = True,
    fold: bool = True,
    size_limit: int = DEFAULT_SIZE_LIMIT_BYTES,
    target_runtime: str | None = None,
    check_runtime: str | None = None,
    rules: Sequence[str] | None = None,
    relaxed: bool = False,
) -> Report:
    """Runs every step on ``model`` in place and returns the report.

    ``target_runtime`` legalizes the EyeLike nodes left for that runtime (measuring it on
    first use). ``check_runtime`` (used by ``eyefold inspect``) only judges them, from the
    cached measurement or the fallback table, never creating a session. ``rules`` names
    the rewrite rules to run (None: every exact one, plus the relaxed ones with
    ``relaxed``; empty: none); each runs before or after folding as its phase says.
    """
    _check_options(target_opset, size_limit)
    rules_before = ApplyEyeLikeRulesPass(rules=rules, relaxed=relaxed, phase="before-fold")
    rules_after = ApplyEyeLikeRulesPass(rules=rules, relaxed=relaxed, phase="after-fold")
    report = Report(opset_before=default_opset(model.opset_imports))
    if upgrade:
        # Before shape inference: onnx propagates shape data through Unsqueeze, Concat,
        # Squeeze, Slice and Cast only from opset 13.
        with report.step("upgrade") as step:
            step.modified = UpgradeOpsetPass(target_opset)(model).modified
    with report.step("infer-input-shapes") as step:
        infer_inputs = InferEyeLikeInputShapesPass()
        step.modified = infer_inputs(model).modified
        if infer_inputs.failure:
            report.warnings.append(infer_inputs.failure)
    _run_rules(model, report, rules_before)
    folded = []
    if fold:
        with report.step("fold") as step:
            fold_pass = FoldEyeLikePass(size_limit_bytes=size_limit)
            step.modified = fold_pass(model).modified
            folded = fold_pass.folded
    _run_rules(model, report, rules_after)
    with report.step("infer-outputs") as step:
        infer_outputs = InferEyeLikeOutputsPass(size_limit_bytes=size_limit, fold_enabled=fold)
        step.modified = infer_outputs(model).modified
    report.nodes = [NodeOutcome.from_facts(f) for f in [*folded, *infer_outputs.facts]]
    if target_runtime is not None or check_runtime is not None:
        _legalize(model, report, infer_outputs.facts, target_runtime, check_runtime)
    report.opset_after = default_opset(model.opset_imports)
    return report


def _run_rules(model: ir.Model, report: Report, rules_pass: ApplyEyeLikeRulesPass) -> None:
    """Runs one phase of rewrite rules (if any is selected); adds its hits to the report."""
    hits = report.extra.setdefault("rules", {})
    if not rules_pass.specs:
        return
    with report.step(f"rules-{rules_pass.specs[0].phase}") as step:
        step.modified = rules_pass(model).modified
    hits.update(rules_pass.hits)


def _legalize(
    model: ir.Model,
    report: Report,
    facts: list[EyeLikeFacts],
    target_runtime: str | None,
    check_runtime: str | None,
) -> None:
    """Legalizes (or only checks) the EyeLike nodes left; records the outcome per node."""
    rewrite = target_runtime is not None
    runtime = target_runtime if rewrite else check_runtime
    assert runtime is not None
    support = None if rewrite else get_support(runtime, probe=False)
    with report.step("legalize" if rewrite else "runtime-check") as step:
        legalize = LegalizeEyeLikePass(runtime, support=support, rewrite=rewrite)
        step.modified = legalize(model).modified
    by_node = {id(outcome.node): outcome for outcome in legalize.outcomes}
    left = report.nodes[len(report.nodes) - len(facts) :]
    for node_outcome, node_facts in zip(left, facts, strict=True):
        outcome = by_node.get(id(node_facts.node))
        if outcome is not None:
            node_outcome.runtime_supported = outcome.runs
            node_outcome.legalized = outcome.legalized
            node_outcome.runtime_note = outcome.note
    report.extra["runtime"] = legalize.summary()
    report.warnings.extend(legalize.warnings())


@overload
def optimize_with_report(model: onnx.ModelProto, **options: object) -> OptimizeResult: ...
@overload
def optimize_with_report(model: ir.Model, **options: object) -> OptimizeResult: ...
def optimize_with_report(
    model: onnx.ModelProto | ir.Model,
    *,
    target_opset: int = DEFAULT_TARGET_OPSET,
    upgrade: bool = True,
    fold: bool = True,
    size_limit: int = DEFAULT_SIZE_LIMIT_BYTES,
    target_runtime: str | None = None,
    rules: Sequence[str] | None = None,
    relaxed: bool = False,
) -> OptimizeResult:
    """Like :func:`optimize`, and also returns the per-node report."""
    options = {
        "target_opset": target_opset,
        "upgrade": upgrade,
        "fold": fold,
        "size_limit": size_limit,
        "target_runtime": target_runtime,
        "rules": rules,
        "relaxed": relaxed,
    }
    if isinstance(model, ir.Model):
        return OptimizeResult(model, run_pipeline(model, **options))  # type: ignore[arg-type]
    if isinstance(model, onnx.ModelProto):
        working = ir.serde.deserialize_model(model)
        report = run_pipeline(working, **options)  # type: ignore[arg-type]
        return OptimizeResult(ir.serde.serialize_model(working), report)
    raise TypeError(f"expected onnx.ModelProto or onnx_ir.Model, got {type(model).__name__}")


def optimize(
    model: ModelT,
    *,
    target_opset: int = DEFAULT_TARGET_OPSET,
    upgrade: bool = True,
    fold: bool = True,
    size_limit: int = DEFAULT_SIZE_LIMIT_BYTES,
    target_runtime: str | None = None,
    rules: Sequence[str] | None = None,
    relaxed: bool = False,
) -> ModelT:
    """Folds, infers and upgrades the EyeLike nodes of ``model``.

    Args:
        model: an ``onnx.ModelProto`` (never mutated; a new one is returned) or an
            ``onnx_ir.Model`` (changed in place and returned).
        target_opset: default-domain opset to upgrade to (raised, never lowered).
        upgrade: whether to upgrade the opset.
        fold: whether to fold static EyeLike nodes into constants.
        size_limit: largest folded output, in bytes.
        target_runtime: e.g. ``"onnxruntime"``: rewrite the EyeLike nodes left whose type
            combination that runtime cannot run (None: leave them as they are).
        rules: rewrite rules to run, by name (``eyefold rules`` lists them); None runs
            every exact rule (and the relaxed ones with ``relaxed``), an empty sequence
            none.
        relaxed: also allow rules that are exact only up to IEEE special values (inf,
            NaN, -0.0).

    Returns:
        The optimized model, of the type given.

    Raises:
        EyefoldError: the model is invalid (the message names the node) or an option is.
    """
    result = optimize_with_report(
        model,
        target_opset=target_opset,
        upgrade=upgrade,
        fold=fold,
        size_limit=size_limit,
        target_runtime=target_runtime,
        rules=rules,
        relaxed=relaxed,
    )
    return result.model  # type: ignore[return-value]
