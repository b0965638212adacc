"""What one run did, step by step: the record its parts append to, and the report reads.

A run has parts at several layers: the file steps (load, ``--check``, save), the route the
file path takes (the EyeLike neighbourhood, or the whole model and why), and the
pipeline's passes (whose upgrade may have been done on the proto). Each appends to one
:class:`RunRecord` as it goes; :func:`eyefold.report.build_report` turns the record into
the report once, at the end. Nothing edits a report after it is built.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from eyefold.core.progress import Progress

if TYPE_CHECKING:
    import onnx_ir as ir

    from eyefold.core.model_stats import ModelStats
    from eyefold.core.run_findings import ReportsInto

__all__ = ["LONG_STEP_SECONDS", "RunRecord", "Stage", "StepEntry"]

# A step that took at least this long keeps its "... done in" line on the terminal.
LONG_STEP_SECONDS = 0.5


class Stage(enum.IntEnum):
    """Where a step sits in the report's list: steps are listed stage by stage."""

    READ = 0  # reading the model file
    ROUTE = 1  # how the model was taken: its EyeLike neighbourhood, or the whole model
    PIPELINE = 2  # the pipeline's steps, in their order
    WRITE = 3  # checking and saving the result


@dataclasses.dataclass
class StepEntry:
    """One step of a run.

    Attributes:
        name: the name the report gives it.
        seconds: its wall time.
        stage: where the report lists it.
        modified: whether it changed the model.
        result: the pass's result, for pipeline steps run as a pass (or what a step done
            outside the passes has for the report).
    """

    name: str
    seconds: float
    stage: Stage
    modified: bool = False
    result: ir.passes.PassResult | ReportsInto | None = None


@dataclasses.dataclass
class RunRecord:
    """Everything one run did, appended as it happens.

    Attributes:
        steps: the steps, in the order they ran.
        opset_before: default-domain opset of the model as given (None: not imported).
        opset_after: default-domain opset of the result.
        ir_version_before: the model's IR version as given (None: not read yet).
        ir_version_after: the result's IR version.
        route: how the file path took the model (the report's ``neighbourhood`` or
            ``whole_model`` key).
        before: stats of the input model, when counted.
        after: stats of the result, when counted.
        sorted_graphs: the graphs that were not in topological order and were sorted
            before any step read them (``main``, ``function f``...).
        check: the ``--check`` outcome, if it ran.
        output: the files written, if any.
        progress: where long steps say what they are doing.
        warnings: what the run found wrong with the input without refusing it, in words
            (the report lists them beside the passes' own).
    """

    steps: list[StepEntry] = dataclasses.field(default_factory=list)
    opset_before: int | None = None
    opset_after: int | None = None
    ir_version_before: int | None = None
    ir_version_after: int | None = None
    route: dict[str, Any] = dataclasses.field(default_factory=dict)
    before: ModelStats | None = None
    after: ModelStats | None = None
    sorted_graphs: list[str] = dataclasses.field(default_factory=list)
    check: Any = None
    output: Any = None
    progress: Progress = dataclasses.field(default_factory=Progress)
    warnings: list[str] = dataclasses.field(default_factory=list)

    def add_sort(self, unsorted: list[str], seconds: float) -> None:
        """Records the graphs sorted before any step read them (nothing when none was)."""
        if unsorted:
            self.add(StepEntry("sort", seconds, Stage.READ, modified=True))
            self.sorted_graphs.extend(unsorted)

    def add(self, entry: StepEntry) -> StepEntry:
        """Appends ``entry`` and returns it (its time may still grow)."""
        self.steps.append(entry)
        return entry

    @contextlib.contextmanager
    def step(
        self, name: str, message: str | None = None, *, stage: Stage = Stage.WRITE
    ) -> Iterator[StepEntry]:
        """Times a step; with ``message``, shows it as progress while the step runs."""
        if message is not None:
            self.progress(message)
        entry = StepEntry(name, 0.0, stage)
        start = time.perf_counter()
        try:
            yield entry
        finally:
            entry.seconds = time.perf_counter() - start
            self.steps.append(entry)
            if message is not None and entry.seconds >= LONG_STEP_SECONDS:
                self.progress.done(f"{message} done in {entry.seconds:.2f}s")
            elif message is not None:
                self.progress.clear()
