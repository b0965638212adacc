"""What an optimize run did, as data (for library callers and --report) and as text."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from eyefold.core.origins import origin_of
from eyefold.core.run_findings import (
    FED_A_FOLD_REASON,
    LoweringNote,
    ReportsInto,
    RunFindings,
    RuntimeNote,
    RuntimeVerdicts,
)
from eyefold.run_record import RunRecord

if TYPE_CHECKING:
    import onnx_ir as ir

    from eyefold.core.analysis import EyeLikeAnalysis

__all__ = ["NodeOutcome", "Report", "StepTiming", "build_report"]


# NodeOutcome fields the JSON carries only when they say something.
_OPTIONAL_KEYS = ("shape_lost", "rules_declined")


@dataclasses.dataclass
class NodeOutcome:
    """One EyeLike node: where it is, what eyefold did with it and why.

    Attributes:
        name: node name ("" when unnamed).
        graph: scope path, e.g. ``main`` or ``main/if.then_branch``.
        action: "folded", "inferred", "kept" or "removed" (merged into another node by a
            rule, left without users by one, or lowered into primitive ops; the reason
            names it). ``inferred`` and ``kept`` nodes are the EyeLike nodes left.
        reason: why.
        shape: input shape (ints, symbolic names, None for unknown dims) or None.
        dtype: output element type name, None when unknown.
        k: diagonal offset.
        bytes: output size when static, else None.
        from_inputs: graph inputs whose declared shapes a fold rests on.
        input_dtype: element type name of the input, None when unknown.
        opset: default-domain opset of the node's scope.
        runtime_supported: whether the target runtime runs the node as it was (None: not
            checked, folded away, or not decidable).
        legalized: whether the node was rewritten into a form the target runtime runs.
        lowered: whether the node was replaced by primitive ops (``--lower-eyelike``,
            ``--target-runtime tensorrt``); ``runtime_note`` then says into what.
        runtime_note: the runtime check and its outcome in words, None when not checked.
        shape_lost: for an input shape that is not static, where it was lost (``value``,
            ``node``, ``op``, ``why``); None otherwise (and then left out of the JSON).
        rules_declined: the rules that looked at the node and declined, each with why
            (``{"rule", "reason"}``); left out of the JSON when none did.
    """

    name: str
    graph: str
    action: str
    reason: str
    shape: list[int | str | None] | None
    dtype: str | None
    k: int
    bytes: int | None
    from_inputs: list[str] = dataclasses.field(default_factory=list)
    input_dtype: str | None = None
    opset: int | None = None
    runtime_supported: bool | None = None
    legalized: bool = False
    lowered: bool = False
    runtime_note: str | None = None
    shape_lost: dict[str, str | None] | None = None
    rules_declined: list[dict[str, str]] = dataclasses.field(default_factory=list)

    @classmethod
    def from_facts(cls, analysis: EyeLikeAnalysis) -> NodeOutcome:
        """Builds the outcome from the analysis of one node."""
        return cls(
            name=analysis.node.name or "",
            graph=analysis.scope.path,
            action=analysis.action,
            reason=analysis.reason,
            shape=analysis.shape,
            dtype=analysis.dtype.name if analysis.dtype is not None else None,
            k=analysis.k,
            bytes=analysis.nbytes,
            from_inputs=list(analysis.from_inputs),
            input_dtype=analysis.input_dtype.name
            if analysis.input_dtype is not None
            else None,
            opset=analysis.scope.opset,
            shape_lost=analysis.shape_lost.to_dict()
            if analysis.shape_lost is not None
            else None,
        )

    def to_dict(self) -> dict[str, Any]:
        """The node's entry in the JSON report; the optional entries only when set."""
        entry = dataclasses.asdict(self)
        for key in _OPTIONAL_KEYS:
            if not entry[key]:
                del entry[key]
        return entry


@dataclasses.dataclass
class StepTiming:
    """Wall time of one pipeline step and whether it changed the model."""

    name: str
    seconds: float
    modified: bool = False


@dataclasses.dataclass
class Report:
    """The outcome of one ``eyefold.optimize`` run.

    Attributes:
        opset_before: default-domain opset of the input model (None if not imported).
        opset_after: default-domain opset of the result.
        nodes: one outcome per EyeLike node found.
        steps: pipeline steps in order, with timings.
        warnings: best-effort steps that degraded, in words.
    """

    opset_before: int | None = None
    opset_after: int | None = None
    nodes: list[NodeOutcome] = dataclasses.field(default_factory=list)
    steps: list[StepTiming] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """EyeLike totals by action, with the keys of the report contract."""
        totals = dict.fromkeys(("folded", "inferred", "kept", "removed"), 0)
        totals = {"total": len(self.nodes), **totals}
        for node in self.nodes:
            totals[node.action] += 1
        return totals

    def to_dict(self) -> dict[str, Any]:
        """The JSON report of the contract (extra keys allowed by it are appended)."""
        result: dict[str, Any] = {
            "opset": {"before": self.opset_before, "after": self.opset_after},
            "eyelike": self.counts(),
            "nodes": [node.to_dict() for node in self.nodes],
            "steps": [dataclasses.asdict(step) for step in self.steps],
            "warnings": list(self.warnings),
        }
        result.update(self.extra)
        return result


def build_report(record: RunRecord) -> Report:
    """The report of a run, built from its record once, at the end (the only place it is).

    Steps are listed stage by stage (load, route, pipeline, check and save), each stage
    in the order its steps ran; what the passes found comes from their results
    (:class:`~eyefold.core.run_findings.ReportsInto`).
    """
    report = Report(opset_before=record.opset_before, opset_after=record.opset_after)
    entries = sorted(record.steps, key=lambda entry: entry.stage)
    report.steps = [StepTiming(e.name, e.seconds, e.modified) for e in entries]
    findings = RunFindings()
    for entry in record.steps:
        if isinstance(entry.result, ReportsInto):
            entry.result.report_into(findings)
    report.warnings.extend(record.warnings)
    report.warnings.extend(findings.warnings)
    if findings.notes:
        report.extra["notes"] = list(findings.notes)
    loads_on = _loads_on(record)
    if loads_on is not None:
        report.extra["loads_on"] = loads_on
    left_outcomes = [NodeOutcome.from_facts(f) for f in findings.left]
    report.nodes = [NodeOutcome.from_facts(f) for f in findings.folded] + left_outcomes
    report.nodes.extend(
        _removed(findings.found, [*findings.folded, *findings.left], findings.removed_by)
    )
    _add_declines(
        report, [*findings.folded, *findings.left], findings.found, findings.rule_declines
    )
    report.extra["rules"] = findings.hits
    if findings.identities:
        # A Range identity whose producer left the graph was rewritten away by a rule.
        gone = sum(1 for value in findings.identities if _removed_value(value))
        report.extra["identities"] = {"found": len(findings.identities), "rewritten": gone}
    if findings.declined:
        report.extra["rules_declined"] = findings.declined
    if findings.withheld:
        report.extra["rules_withheld"] = findings.withheld
    rows = list(zip(left_outcomes, findings.left, strict=True))
    _add_later_outcomes(report, rows, findings.lowering, findings.runtime)
    report.extra.update(record.route)
    _add_file_facts(report, record)
    _add_status(report, record)
    return report


def _removed_value(value: ir.Value) -> bool:
    producer = value.producer()
    return producer is not None and producer.graph is None


def _add_status(report: Report, record: RunRecord) -> None:
    """For a run that wrote a model: whether it was checked, and what in it cannot run."""
    if record.output is None:
        return
    from eyefold.run_status import run_status

    status = run_status(
        report.nodes, report.extra.get("runtime"), checked=record.check is not None
    )
    report.extra["verdict"] = status.to_dict()


def _loads_on(record: RunRecord) -> dict[str, Any] | None:
    """The oldest runtimes that load the result, when the run raised its opset or IR version.

    A user deploying on an older runtime learns the cost of the upgrade here, not from
    the runtime's error (``Unsupported model IR version``).
    """
    from eyefold.runtime.versions import oldest_onnxruntime

    opset, ir_version = record.opset_after, record.ir_version_after
    if opset is None or ir_version is None:
        return None
    raised = record.opset_before is not None and opset > record.opset_before
    if not raised and ir_version <= (record.ir_version_before or ir_version):
        return None
    return {
        "opset": {"before": record.opset_before, "after": opset},
        "ir_version": {"before": record.ir_version_before, "after": ir_version},
        "onnxruntime": oldest_onnxruntime(opset, ir_version),
    }


def _add_declines(
    report: Report,
    reported: list[EyeLikeAnalysis],
    found: list[EyeLikeAnalysis],
    declines: dict[int, dict[str, str]],
) -> None:
    """Which rules declined at each node (by census number), and why."""
    if not declines:
        return
    present = [origin_of(analysis.node) for analysis in reported]
    kept = set(present)
    gone = [n for n in range(len(found)) if n not in kept]
    for outcome, number in zip(report.nodes, [*present, *gone], strict=True):
        reasons = declines.get(number) if number is not None else None
        if reasons:
            outcome.rules_declined = [{"rule": r, "reason": why} for r, why in reasons.items()]


def _add_file_facts(report: Report, record: RunRecord) -> None:
    """The command's stats, check and files written, when the run had them."""
    if record.sorted_graphs:
        report.extra["sorted"] = list(record.sorted_graphs)
    if record.before is not None:
        after = record.after
        report.extra["ops"] = {
            "before": record.before.ops,
            "after": after.ops if after else None,
        }
        report.extra["model_bytes"] = {
            "before": record.before.bytes,
            "after": after.bytes if after else None,
        }
        report.extra["initializers"] = {
            "before": record.before.initializers,
            "after": after.initializers if after else None,
        }
    if record.check is not None:
        report.extra["check"] = record.check.to_dict()
    if record.output is not None:
        report.extra["output"] = {
            "path": record.output.path,
            "data_path": record.output.data_path,
            "external_tensors": record.output.external_tensors,
            "kept_data_files": [
                {"path": kept.path, "reason": kept.reason}
                for kept in record.output.kept_data_files
            ],
        }
        report.warnings.extend(
            f"kept the old data file {kept.path}: {kept.reason}"
            for kept in record.output.kept_data_files
        )


def _removed(
    found: list[EyeLikeAnalysis], reported: list[EyeLikeAnalysis], removed_by: dict[int, str]
) -> list[NodeOutcome]:
    """Outcomes for the input EyeLike nodes (census numbers) that no longer exist."""
    present = {origin_of(analysis.node) for analysis in reported}
    outcomes = []
    for number, analysis in enumerate(found):
        if number in present:
            continue
        outcome = NodeOutcome.from_facts(analysis)
        outcome.action = "removed"
        outcome.reason = removed_by.get(number, FED_A_FOLD_REASON)
        outcomes.append(outcome)
    return outcomes


_Outcome = TypeVar("_Outcome", LoweringNote, RuntimeNote)


def _matched(
    rows: list[tuple[NodeOutcome, EyeLikeAnalysis]], outcomes: Sequence[_Outcome]
) -> Iterator[tuple[NodeOutcome, _Outcome]]:
    """Pairs report rows with a later pass's outcomes for the same node (by identity)."""
    by_node = {id(outcome.node): outcome for outcome in outcomes}
    for row, analysis in rows:
        found = by_node.get(id(analysis.node))
        if found is not None:
            yield row, found


def _add_later_outcomes(
    report: Report,
    rows: list[tuple[NodeOutcome, EyeLikeAnalysis]],
    lowering: Sequence[LoweringNote] | None,
    runtime: RuntimeVerdicts | None,
) -> None:
    """What the lowering and the runtime check found, per node; summary and warnings."""
    for node_outcome, lowered in _matched(rows, lowering or []):
        node_outcome.runtime_note = lowered.note
        if lowered.lowered:
            _mark_lowered(node_outcome)
        else:
            report.warnings.append(
                f"EyeLike {lowered.name!r} in {lowered.scope} was not lowered: {lowered.note}"
            )
    if runtime is None:
        return
    for node_outcome, checked in _matched(rows, runtime.outcomes):
        node_outcome.runtime_supported = checked.runs
        node_outcome.legalized = checked.legalized
        node_outcome.runtime_note = checked.note
        if checked.lowered and not node_outcome.lowered:
            _mark_lowered(node_outcome)
    support = runtime.support
    assert support is not None
    report.extra["runtime"] = {
        "name": support.runtime,
        "version": support.version,
        "source": support.source,
        "rewrite": runtime.rewrite,
        "checked": len(runtime.outcomes),
        "unsupported": sum(o.runs is False for o in runtime.outcomes),
        "undecided": sum(o.runs is None for o in runtime.outcomes),
        "legalized": sum(o.legalized for o in runtime.outcomes),
    }
    if support.source == "table":
        report.extra["runtime"]["measured"] = support.measured
    report.warnings.extend(_runtime_warnings(runtime))
    report.warnings.extend(_lacked_warnings(report.nodes, runtime))


def _mark_lowered(outcome: NodeOutcome) -> None:
    """A lowered EyeLike is ``removed``: no EyeLike is left of it, only the ops it became.

    So ``inferred`` + ``kept`` count the EyeLike nodes the result still has. The reason
    says what the node became, then why it could not fold.
    """
    outcome.lowered = True
    outcome.action = "removed"
    outcome.reason = f"{outcome.runtime_note}; {outcome.reason}"


def _lacked_warnings(nodes: Sequence[NodeOutcome], runtime: RuntimeVerdicts) -> list[str]:
    """One warning per folded EyeLike whose constant or input has a type the target lacks.

    Folding leaves no EyeLike to legalize, but a bfloat16 constant is no more loadable on
    a runtime without bfloat16 (tract) than the EyeLike was: never a silent miss.
    """
    if not runtime.lacks or runtime.support is None:
        return []
    target = runtime.support.describe()
    warnings = []
    for node in nodes:
        types = (node.input_dtype, node.dtype)
        lacked = ", ".join(dict.fromkeys(t for t in types if t in runtime.lacks))
        if node.action == "folded" and lacked:
            label = repr(node.name) if node.name else "(unnamed)"
            warnings.append(
                f"EyeLike {label} in {node.graph}: folded, but {target} has no {lacked}:"
                f" a model with {lacked} tensors cannot run there"
            )
    return warnings


def _runtime_warnings(runtime: RuntimeVerdicts) -> list[str]:
    """What the run left that the runtime may fail on, naming the option that fixes it."""
    assert runtime.support is not None
    target = runtime.support.describe()
    name = runtime.support.runtime
    if not runtime.rewrite:
        refused = sum(o.runs is False for o in runtime.outcomes)
        if not refused:
            return []
        return [
            f"{refused} EyeLike node(s) cannot run on {target}; the option"
            f" --target-runtime {name} (target_runtime={name!r})"
            " rewrites them into a form it runs"
        ]
    warned = [o.warning for o in runtime.outcomes if o.warning]
    left = sum(
        o.runs is not True and not o.legalized and not o.warning for o in runtime.outcomes
    )
    if not left:
        return warned
    return [*warned, f"{left} EyeLike node(s) may still fail on {target}: see their notes"]
