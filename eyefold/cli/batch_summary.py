"""What a batch run shows a person: a progress bar, one row per model, a total line.

The table goes to stdout (one row per model: status (``passed`` when checked, else
``written``, and the EyeLike nodes its runtime cannot run), EyeLike
folded/inferred/kept/removed, opset before and after, seconds), each failure's one-line
error to stderr as it happens, and the progress bar to stderr only when it is a terminal.
:func:`batch_report` is the ``--report`` JSON: each model's report in the single-model
schema, plus its path, status and error.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, TextIO

from eyefold.batch import FileResult
from eyefold.cli.summary import table
from eyefold.core.option_names import cli_spelling
from eyefold.core.progress import Progress
from eyefold.report import Report
from eyefold.run_status import CHECK_HINT, RunStatus

__all__ = ["BatchProgress", "batch_report", "batch_totals", "render_batch"]

_BAR_WIDTH = 24
_COUNTED = ("total", "folded", "inferred", "kept", "removed")


class BatchProgress:
    """A progress bar on stderr (terminal only), each failure's error line and each note."""

    def __init__(self, stream: TextIO, *, enabled: bool | None = None) -> None:
        self.stream = stream
        self.bar = Progress(stream, enabled=enabled)

    def __call__(self, result: FileResult, done: int, total: int) -> None:
        """Called as each model finishes (``optimize_files(on_result=...)``)."""
        if result.status == "failed":
            self.bar.clear()
            error = cli_spelling(result.error or "")
            print(f"eyefold: error: {result.input}: {error}", file=self.stream)
        for note in result.report.extra.get("notes", ()) if result.report else ():
            self.bar.clear()
            print(f"eyefold: note: {result.input}: {note}", file=self.stream)
        filled = _BAR_WIDTH * done // max(total, 1)
        bar = "#" * filled + "-" * (_BAR_WIDTH - filled)
        self.bar(f"[{bar}] {done}/{total} {os.path.basename(result.input)}")

    def done(self) -> None:
        """Erases the bar once the batch is over."""
        self.bar.clear()


def _counts(result: FileResult) -> dict[str, int] | None:
    return result.report.counts() if result.report is not None else None


def batch_totals(results: Sequence[FileResult], seconds: float) -> dict[str, Any]:
    """Models ok and failed, EyeLike counts summed over the models that ran, wall time."""
    eyelike = dict.fromkeys(_COUNTED, 0)
    for result in results:
        for key, value in (_counts(result) or {}).items():
            if key in eyelike:
                eyelike[key] += value
    failed = sum(r.status == "failed" for r in results)
    return {
        "models": len(results),
        "ok": len(results) - failed,
        "failed": failed,
        "eyelike": eyelike,
        "seconds": seconds,
    }


def batch_report(results: Sequence[FileResult], seconds: float, jobs: int) -> dict[str, Any]:
    """The ``--report`` JSON of a batch."""
    return {
        "models": [result.to_dict() for result in results],
        "total": batch_totals(results, seconds),
        "jobs": jobs,
    }


def _row(result: FileResult) -> list[str]:
    counts = _counts(result)
    report = result.report
    if counts is None or report is None:
        return [result.input, "FAILED", "-", "-", "-", "-", "-", f"{result.seconds:.2f}"]
    opset = f"{report.opset_before}" + (
        f"->{report.opset_after}" if report.opset_after != report.opset_before else ""
    )
    return [
        result.input,
        _model_status(report),
        str(counts["folded"]),
        str(counts["inferred"]),
        str(counts["kept"]),
        str(counts["removed"]),
        opset,
        f"{result.seconds:.2f}",
    ]


def _model_status(report: Report) -> str:
    """``passed`` (checked) or ``written``, and how many EyeLike nodes cannot run."""
    status = _status_of(report)
    if status is None:
        return "ok"
    text = status.word.lower()
    if status.unrunnable:
        text += f", {status.unrunnable} EyeLike cannot run"
    return text


def _status_of(report: Report | None) -> RunStatus | None:
    entry = report.extra.get("verdict") if report is not None else None
    return RunStatus.from_dict(entry) if entry is not None else None


def _total_status(results: Sequence[FileResult]) -> str:
    """PASSED only when every model was checked and passed; what was not, said after."""
    if any(r.status == "failed" for r in results):
        return "FAILED"
    statuses = [_status_of(r.report) for r in results]
    if any(s is None or not s.checked for s in statuses):
        return f"WRITTEN (not checked; {CHECK_HINT})"
    return "PASSED"


def _unrunnable_total(results: Sequence[FileResult]) -> str:
    """`` | N EyeLike nodes cannot run on R (fix)`` when some cannot, else "".

    Every model of a batch runs with the same options, so they are judged against one
    runtime.
    """
    statuses = [s for r in results if (s := _status_of(r.report)) and s.unrunnable]
    count = sum(s.unrunnable for s in statuses)
    if not count:
        return ""
    nodes = "1 EyeLike node" if count == 1 else f"{count} EyeLike nodes"
    return f" | {nodes} cannot run on {statuses[0].runtime} ({statuses[0].fix})"


def render_batch(results: Sequence[FileResult], seconds: float, jobs: int) -> str:
    """One row per model and a total line."""
    header = ["MODEL", "STATUS", "FOLDED", "INFERRED", "KEPT", "REMOVED", "OPSET", "SECONDS"]
    rows = [header, *(_row(result) for result in results)]
    lines = table(rows, [False, False, True, True, True, True, True, True])
    totals = batch_totals(results, seconds)
    eyelike = totals["eyelike"]
    status = _total_status(results)
    lines.append(
        f"{status} | {totals['models']} models: {totals['ok']} ok, {totals['failed']} failed"
        f" | EyeLike: {eyelike['total']} found, {eyelike['folded']} folded,"
        f" {eyelike['inferred']} inferred, {eyelike['kept']} kept,"
        f" {eyelike['removed']} removed"
        f" | Runtime: {seconds:.2f}s with {jobs} process{'es' if jobs > 1 else ''}"
        + _unrunnable_total(results)
    )
    return "\n".join(lines)
