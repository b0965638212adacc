"""Many models in one run: ``eyefold.optimize_files`` and ``eyefold optimize --output-dir``.

Each process pays its start-up and imports once (about 0.5 s), not once per model: the
models run in this process (``jobs=1``) or in ``jobs`` worker processes, each importing
eyefold once. Every model goes through :func:`eyefold.file_run.optimize_file`, the path of
the single-model command, so it gets the same output bytes, the same atomic writes and,
on failure, the same one-line error; one model's failure never stops the others.

A worker that dies (a segfault, the OOM killer) fails only the model it held, with a line
naming the signal, and a fresh worker takes the rest (:mod:`eyefold.worker_pool`); each
output is claimed for its input so that batches in other processes never overwrite it
(:mod:`eyefold.output_claims`).

Workers are started with the ``spawn`` method (onnxruntime and BLAS threads make ``fork``
unsafe), so a script that calls :func:`optimize_files` with ``jobs > 1`` needs the usual
``if __name__ == "__main__":`` guard.
"""

from __future__ import annotations

import dataclasses
import logging
import multiprocessing
import os
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from eyefold.errors import ModelIOError
from eyefold.file_run import error_line
from eyefold.options import PipelineOptions

if TYPE_CHECKING:
    from eyefold.report import Report

__all__ = [
    "FileResult",
    "PlannedFile",
    "make_folder_for",
    "optimize_files",
    "plan_files",
    "refuse_path_clashes",
]

logger = logging.getLogger(__name__)

Status = Literal["ok", "failed"]


@dataclasses.dataclass(frozen=True)
class PlannedFile:
    """One model of a batch: where it is read and where its result goes.

    Attributes:
        input: the model file.
        output: its result, at the same relative path under the output folder.
        error: why it will not run (its output is another input's), else None.
    """

    input: str
    output: str
    error: str | None = None


@dataclasses.dataclass
class FileResult:
    """What happened to one model of a batch.

    Attributes:
        input: the model file.
        output: where its result was (or would have been) written.
        status: "ok" or "failed".
        error: the one-line error when it failed (what ``eyefold: error:`` would say).
        report: the run's report (``eyefold.Report``) when it succeeded.
        seconds: wall time spent on this model, load to save.
    """

    input: str
    output: str
    status: Status
    error: str | None = None
    report: Report | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The model's entry in the batch JSON: the report's keys plus path, status, error."""
        entry: dict[str, Any] = {
            "path": self.input,
            "output": self.output,
            "status": self.status,
            "error": self.error,
            "seconds": self.seconds,
        }
        if self.report is not None:
            entry.update(self.report.to_dict())
        return entry


def _folder_models(folder: Path, skip: Path) -> list[Path]:
    """``*.onnx`` files under ``folder``, sorted, outside the output folder ``skip``."""
    return sorted(
        path
        for path in folder.rglob("*.onnx")
        if path.is_file() and skip not in path.resolve().parents
    )


def _resolved(path: Path) -> Path | None:
    """``path`` with its symbolic links resolved; None when they form a loop."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # RuntimeError: "Symlink loop" (Python < 3.13)
        return None


def _relative_paths(
    argument: Path, out_root: Path, input_root: Path | None
) -> list[tuple[Path, Path | None]]:
    """The models ``argument`` names, each with its path under the output folder.

    The path is relative to ``input_root`` when one is given (None: the model is not
    under it), else to the folder given, or the file's own name.
    """
    if argument.is_dir():
        models = _folder_models(argument, out_root)
        if input_root is None:
            return [(path, path.relative_to(argument)) for path in models]
    else:
        models = [argument]
        if input_root is None:
            return [(argument, Path(argument.name))]
    pairs: list[tuple[Path, Path | None]] = []
    for path in models:
        absolute = Path(os.path.abspath(path))
        inside = input_root in absolute.parents
        pairs.append((path, absolute.relative_to(input_root) if inside else None))
    return pairs


def plan_files(
    inputs: Iterable[str | os.PathLike[str]],
    output_dir: str | os.PathLike[str],
    *,
    input_root: str | os.PathLike[str] | None = None,
) -> list[PlannedFile]:
    """The models of a batch, in argument order, each with its output path.

    A folder contributes every ``*.onnx`` below it (recursively, sorted), written at the
    same path relative to that folder; a file is written under its own name. With
    ``input_root``, every model is written at its path relative to ``input_root``
    instead (a model outside it fails), so shards given file by file keep the layout of
    the zoo they came from. A model named twice is run once; a model whose output
    another input already claimed is planned with an error rather than overwriting that
    output, and so is a model whose output would replace another input before that
    input is read, and a file whose symbolic links form a loop.
    """
    out_root = Path(output_dir).resolve()
    root = None if input_root is None else Path(os.path.abspath(input_root))
    # resolved input (or the absolute path of an unresolvable one)
    #   -> (as given, output, why it cannot run)
    models: dict[Path, tuple[Path, Path | None, str | None]] = {}
    for argument in inputs:
        for path, relative in _relative_paths(Path(argument), out_root, root):
            resolved = _resolved(path)
            error = None
            if resolved is None:
                error = f"cannot read {path}: its symbolic links form a loop"
            elif relative is None:
                error = f"{path} is not inside the input root {root}"
            output = out_root / relative if relative is not None else None
            key = resolved or Path(os.path.abspath(path))
            models.setdefault(key, (path, output, error))
    planned: list[PlannedFile] = []
    claimed: dict[Path, str] = {}
    for resolved, (path, output, error) in models.items():
        if output is None or error is not None:
            planned.append(PlannedFile(str(path), str(output or out_root / path.name), error))
            continue
        if output in models and output != resolved:
            error = f"cannot write {output}: it is another input of this batch"
        elif (owner := claimed.setdefault(output, str(path))) != str(path):
            error = f"cannot write {output}: it is already the output of {owner}"
        planned.append(PlannedFile(str(path), str(output), error))
    return planned


def refuse_path_clashes(
    planned: list[PlannedFile], external_data: bool, report: str | None = None
) -> list[PlannedFile]:
    """The plan, each model whose output or data file would replace a file read failing.

    Such a model (its output or data file is another input, or a data file an input
    reads) is planned with that error and fails alone.

    Raises:
        PathClashError: ``report`` would replace an input, a data file an input reads, an
            output or an output's data file (the batch cannot run).
    """
    from eyefold.errors import PathClashError
    from eyefold.model_files.path_rules import ModelFiles, RunFiles

    sources = [ModelFiles.read(p.input) for p in planned]
    files = RunFiles(sources)
    if report is not None:
        reason = files.report_clash(report, [p.output for p in planned])
        if reason is not None:
            raise PathClashError(reason)
    checked = []
    for plan, source in zip(planned, sources, strict=True):
        writes_data = external_data or bool(source.data_files)
        if plan.error is None:
            reason = files.model_clash(plan.output, source, writes_data=writes_data)
            plan = dataclasses.replace(plan, error=reason)
        checked.append(plan)
    return checked


@dataclasses.dataclass(frozen=True)
class _Task:
    """What a worker needs for one model (picklable)."""

    planned: PlannedFile
    options: PipelineOptions
    check: bool
    external_data: bool
    verbose: bool


def make_folder_for(output: str) -> None:
    """Creates the folder ``output`` (a model or a report of the batch) is written in."""
    folder = os.path.dirname(os.path.abspath(output))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as error:
        raise ModelIOError(
            f"cannot write {output}: cannot create folder {folder}: {error.strerror}"
        ) from None


def _run_task(task: _Task) -> FileResult:
    """Optimizes one model; any failure becomes the result's one-line error.

    The output is claimed first (:mod:`eyefold.output_claims`), so a batch in another
    process that wants the same output for another input fails there, not here.
    """
    from eyefold.core.progress import Progress
    from eyefold.file_run import optimize_file
    from eyefold.model_files import check_output_path
    from eyefold.output_claims import claim_output, release_claim
    from eyefold.run_record import RunRecord

    planned = task.planned
    start = time.perf_counter()
    if planned.error is not None:
        return FileResult(planned.input, planned.output, "failed", planned.error)
    claimed = False
    try:
        make_folder_for(planned.output)
        check_output_path(planned.output)
        claim_output(planned.output, planned.input)
        claimed = True
        record = RunRecord(progress=Progress(enabled=False))
        report = optimize_file(
            planned.input,
            planned.output,
            task.options,
            record,
            check=task.check,
            external_data=task.external_data,
        )
    except BaseException as error:
        if claimed:
            release_claim(planned.output, planned.input)
        if not isinstance(error, Exception):
            from eyefold.model_files.atomic_write import discard_unfinished

            discard_unfinished()
            raise  # Ctrl-C ends the batch
        # One model's failure, reported; the batch goes on.
        if task.verbose:
            logger.exception("%s failed", planned.input)
        seconds = time.perf_counter() - start
        return FileResult(
            planned.input, planned.output, "failed", error_line(error), seconds=seconds
        )
    seconds = time.perf_counter() - start
    return FileResult(planned.input, planned.output, "ok", report=report, seconds=seconds)


def _worker_died(task: _Task, cause: str) -> FileResult:
    """The result of a model whose worker process died under it."""
    from eyefold.output_claims import release_claim

    planned = task.planned
    release_claim(planned.output, planned.input)
    error = f"worker died ({cause}) while optimizing {planned.input}"
    return FileResult(planned.input, planned.output, "failed", error)


def _init_worker(level: int, formatter: logging.Formatter | None) -> None:
    """Logs in a worker as the parent process does: its level, and its line format."""
    handler = logging.StreamHandler()
    if formatter is not None:
        handler.setFormatter(formatter)
    logging.basicConfig(level=level, handlers=[handler])


Callback = Callable[[FileResult, int, int], None]


def _run_in_workers(
    tasks: list[_Task], jobs: int, on_result: Callback | None
) -> list[FileResult]:
    """Runs the tasks in ``jobs`` spawned workers; results in task order."""
    from eyefold.worker_pool import run_tasks

    results: list[FileResult | None] = [None] * len(tasks)
    done = 0

    def finished(index: int, result: FileResult) -> None:
        nonlocal done
        results[index] = result
        done += 1
        if on_result is not None:
            on_result(result, done, len(tasks))

    root = logging.getLogger()
    formatter = root.handlers[0].formatter if root.handlers else None
    run_tasks(
        tasks,
        _run_task,
        died=_worker_died,
        jobs=jobs,
        on_result=finished,
        initializer=_init_worker,
        initargs=(root.getEffectiveLevel(), formatter),
    )
    return [r for r in results if r is not None]


def _usable_jobs(jobs: int) -> int:
    """``jobs``, or 1 in a daemonic process (a Dask worker), which may not have children."""
    if jobs > 1 and multiprocessing.current_process().daemon:
        logger.warning(
            "optimize_files(jobs=%d) runs in this process: it is daemonic (a Dask or"
            " multiprocessing worker), and daemonic processes may not start workers",
            jobs,
        )
        return 1
    return jobs


def optimize_files(
    inputs: Sequence[str | os.PathLike[str]],
    output_dir: str | os.PathLike[str],
    *,
    options: PipelineOptions | None = None,
    jobs: int = 1,
    check: bool = False,
    external_data: bool = False,
    on_result: Callback | None = None,
    verbose: bool = False,
    input_root: str | os.PathLike[str] | None = None,
) -> list[FileResult]:
    """Optimizes many model files into ``output_dir``, ``jobs`` at a time.

    Args:
        inputs: model files and folders (searched recursively for ``*.onnx``).
        output_dir: where the results go, each at its path relative to the folder given
            (or under its own name for a file); folders are created as needed. Each
            output is claimed for its input beside it (``.<name>.eyefold-source``), so
            another batch, in this process or another, never overwrites it with another
            input's result.
        options: what the pipeline does to every model (default ``PipelineOptions()``).
        jobs: worker processes; 1 runs every model in this process.
        check: run each original and result on random inputs (``--check``).
        external_data: write large tensors to ``<output>.data`` files.
        on_result: called as ``on_result(result, done, total)`` when a model finishes.
        verbose: log each failure's traceback.
        input_root: write every model at its path relative to this folder instead
            (a model outside it fails), e.g. for shards of a zoo given file by file.

    Returns:
        One result per model, in input order; a failed model has ``status == "failed"``
        and its one-line ``error``, and its output is not created or left untouched.
    """
    options = options or PipelineOptions()
    planned = plan_files(inputs, output_dir, input_root=input_root)
    planned = refuse_path_clashes(planned, external_data)
    tasks = [_Task(p, options, check, external_data, verbose) for p in planned]
    jobs = _usable_jobs(jobs)
    if jobs > 1 and len(tasks) > 1:
        return _run_in_workers(tasks, min(jobs, len(tasks)), on_result)
    results = []
    for done, task in enumerate(tasks, 1):
        results.append(_run_task(task))
        if on_result is not None:
            on_result(results[-1], done, len(tasks))
    return results
