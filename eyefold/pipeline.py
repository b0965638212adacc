"""The one definition of eyefold's pipeline: the steps for given options, and how they run.

``eyefold.optimize``, the command line and :func:`default_pipeline` all run the list
:func:`pipeline_steps` returns, through :func:`run_steps`, which times each step into the
run's :class:`~eyefold.run_record.RunRecord`; the report is built from that record once,
when the run ends. A PassManager drops the results of the passes it runs, so
:class:`EyefoldPipeline` also leaves its report on the model (:func:`report_of`), where a
user's own PassManager cannot lose it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

import onnx_ir as ir

from eyefold.core.domains import default_opset
from eyefold.core.metadata_keys import REPORT_META_KEY
from eyefold.core.node_order import sort_unsorted_graphs
from eyefold.core.rule_spec import PHASES
from eyefold.options import LOWERED_RUNTIMES, PipelineOptions
from eyefold.passes.apply_rules import ApplyEyeLikeRulesPass
from eyefold.passes.census import TakeEyeLikeCensusPass
from eyefold.passes.fold_eye_like import FoldEyeLikePass
from eyefold.passes.infer_eye_like import InferEyeLikeOutputsPass
from eyefold.passes.infer_input_shapes import InferEyeLikeInputShapesPass, RuleOperands
from eyefold.passes.legalize_eye_like import LegalizeEyeLikePass
from eyefold.passes.lower_eye_like import LowerEyeLikePass
from eyefold.passes.pin_input_shapes import PinInputShapesPass
from eyefold.passes.upgrade_opset import UpgradeOpsetPass
from eyefold.report import Report, build_report
from eyefold.rule_registry import select_rules
from eyefold.run_record import RunRecord, Stage, StepEntry

__all__ = [
    "REPORT_META_KEY",
    "EyefoldPipeline",
    "PipelineResult",
    "Step",
    "default_pipeline",
    "pipeline_steps",
    "report_of",
    "run_pipeline",
    "run_steps",
    "sort_first",
]

# Without a target runtime, the EyeLike nodes left are judged against this one's table
# (cached measurement or built-in fallback; no session is created) and the report says
# which would not run there.
_JUDGED_RUNTIME = "onnxruntime"


@dataclasses.dataclass(frozen=True)
class Step:
    """One pipeline step: the name the report uses, and the pass that does it."""

    name: str
    pass_: ir.passes.PassBase


def pipeline_steps(options: PipelineOptions | None = None) -> list[Step]:
    """The steps eyefold runs for ``options``, in order.

    >>> [step.name for step in pipeline_steps(PipelineOptions(upgrade=False))][:4]
    ['infer-input-shapes', 'census', 'rules-before-fold', 'fold']
    """
    options = options or PipelineOptions()
    steps: list[Step] = []
    if options.input_shapes:
        steps.append(Step("pin-input-shapes", PinInputShapesPass(options.input_shapes)))
    if options.upgrade:
        # Before shape inference: onnx propagates shape data through Unsqueeze, Concat,
        # Squeeze, Slice and Cast only from opset 13 (eyefold's shape values do below).
        steps.append(Step("upgrade", UpgradeOpsetPass(options.upgrade_target)))
    inference = InferEyeLikeInputShapesPass(_rule_operands(options))
    steps.append(Step("infer-input-shapes", inference))
    steps.append(Step("census", TakeEyeLikeCensusPass()))
    rules = {
        phase: ApplyEyeLikeRulesPass(
            rules=options.rules,
            relaxed=options.relaxed,
            phase=phase,
            size_limit_bytes=options.size_limit,
            fold=options.fold,
            target_runtime=options.target_runtime,
        )
        for phase in PHASES
    }
    if rules["before-fold"].specs:
        steps.append(Step("rules-before-fold", rules["before-fold"]))
    if options.fold:
        steps.append(Step("fold", FoldEyeLikePass(size_limit_bytes=options.size_limit)))
    if rules["after-fold"].specs:
        steps.append(Step("rules-after-fold", rules["after-fold"]))
    steps.append(
        Step(
            "infer-outputs",
            InferEyeLikeOutputsPass(
                size_limit_bytes=options.size_limit, fold_enabled=options.fold
            ),
        )
    )
    # After folding and inference: only what is left is lowered, with the types they set.
    if options.lowers:
        steps.append(Step("lower", LowerEyeLikePass()))
    # Last: it reads the types the passes before it set. A lowering target needs no
    # judge: what could not be lowered is in the report's warnings.
    if options.target_runtime is None:
        judge = LegalizeEyeLikePass(_JUDGED_RUNTIME, rewrite=False)
        steps.append(Step("runtime-check", judge))
    elif options.target_runtime not in LOWERED_RUNTIMES:
        steps.append(Step("legalize", LegalizeEyeLikePass(options.target_runtime)))
    return steps


def _rule_operands(options: PipelineOptions) -> RuleOperands:
    """The operands next to an EyeLike that the selected rules read, for inference."""
    specs = select_rules(options.rules, relaxed=options.relaxed)
    reading = [s for s in specs if s.reach.reads_operands]
    return RuleOperands(
        frozenset().union(*(s.reach.reads_operands for s in reading)),
        frozenset().union(*(s.reach.replaces for s in reading)),
    )


@dataclasses.dataclass
class PipelineResult(ir.passes.PassResult):
    """The result of running steps: each step's own result, and the run's report.

    Attributes:
        steps: one entry per step, in order (name, seconds, the pass's result).
        report: what the run did, per EyeLike node; None when the steps were part of a
            larger run, whose owner builds the report from its record.
    """

    steps: list[StepEntry] = dataclasses.field(default_factory=list)
    report: Report | None = None


def run_steps(
    model: ir.Model, steps: Sequence[Step], record: RunRecord | None = None
) -> PipelineResult:
    """Runs ``steps`` on ``model`` in place, each timed into the run's record.

    Args:
        model: the model, changed in place.
        steps: what to run, in order.
        record: the record of a larger run these steps are part of (the file path's):
            its owner builds the report when that run ends. None: the steps are the
            whole run, and the result carries its report.

    The record keeps the opset the run started from (the first step's input, unless a
    step done before, such as an upgrade on the proto, set it already).

    Raises:
        EyefoldError: unwrapped, as the pass raised it.
    """
    alone = record is None
    record = RunRecord() if record is None else record
    if record.opset_before is None:
        record.opset_before = default_opset(model.opset_imports)
        record.ir_version_before = model.ir_version
    if alone:
        sort_first(model, record)
    first = len(record.steps)
    for step in steps:
        start = time.perf_counter()
        result = step.pass_(model)
        seconds = time.perf_counter() - start
        record.add(StepEntry(step.name, seconds, Stage.PIPELINE, result.modified, result))
        model = result.model
    record.opset_after = default_opset(model.opset_imports)
    record.ir_version_after = model.ir_version
    entries = record.steps[first:]
    modified = any(entry.modified for entry in entries)
    report = build_report(record) if alone else None
    return PipelineResult(model, modified, steps=entries, report=report)


def sort_first(model: ir.Model, record: RunRecord) -> None:
    """Sorts the graphs of ``model`` that are out of order, as the record's first step.

    Real tools write unsorted graphs (onnxruntime's float16 converter does); onnx's checker
    and inference, which the steps use, need them sorted. A sorted model gets no step.
    """
    start = time.perf_counter()
    unsorted = sort_unsorted_graphs(model)
    record.add_sort(unsorted, time.perf_counter() - start)


def run_pipeline(model: ir.Model, options: PipelineOptions | None = None) -> Report:
    """Runs every step for ``options`` on ``model`` in place and returns the report."""
    report = run_steps(model, pipeline_steps(options)).report
    assert report is not None  # a run of its own
    return report


class EyefoldPipeline(ir.passes.PassManager):
    """eyefold's steps as one PassManager, for users composing it with their own passes.

    Calling it returns a :class:`PipelineResult` and leaves the report on the model,
    where :func:`report_of` reads it (also when an outer PassManager ran it).

    Attributes:
        options: what the pipeline was built for.
        pipeline: its steps.
    """

    def __init__(self, options: PipelineOptions | None = None) -> None:
        self.options = options or PipelineOptions()
        self.pipeline = pipeline_steps(self.options)
        super().__init__([step.pass_ for step in self.pipeline], steps=1)

    def call(self, model: ir.Model) -> PipelineResult:
        """Runs the steps once, in order."""
        result = run_steps(model, self.pipeline)
        result.model.meta[REPORT_META_KEY] = result.report
        return result


def default_pipeline(options: PipelineOptions | None = None) -> EyefoldPipeline:
    """The passes ``eyefold.optimize`` runs for ``options``, as one PassManager.

    >>> manager = default_pipeline(PipelineOptions(target_opset=22))
    >>> [type(p).__name__ for p in manager.passes][2:5]
    ['TakeEyeLikeCensusPass', 'ApplyEyeLikeRulesPass', 'FoldEyeLikePass']
    """
    return EyefoldPipeline(options)


def report_of(model: ir.Model) -> Report | None:
    """The report of the last :class:`EyefoldPipeline` run on ``model``, if any."""
    return model.meta.get(REPORT_META_KEY)
