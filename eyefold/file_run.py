"""One model file, end to end: load, run the pipeline, check, save atomically, report.

``eyefold optimize INPUT OUTPUT``, every model of ``eyefold optimize IN... --output-dir``
and :func:`eyefold.optimize_files` go through :func:`optimize_file`, so a model gets the
same result, the same files and, on failure, the same one-line error (:func:`error_line`)
whichever way it was run.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from eyefold.errors import EyefoldError, one_line
from eyefold.run_record import Stage

if TYPE_CHECKING:
    import onnx
    import onnx_ir as ir

    from eyefold.check.settings import CheckSettings
    from eyefold.core.model_stats import ModelStats
    from eyefold.model_files import SavedModel
    from eyefold.model_files.deferred_tensors import DeferredTensors
    from eyefold.options import PipelineOptions
    from eyefold.proto_path import ProtoRun
    from eyefold.report import Report
    from eyefold.run_record import RunRecord

__all__ = ["error_line", "inspect_file", "one_line", "optimize_file"]


def error_line(error: BaseException) -> str:
    """What follows ``eyefold: error:`` for ``error``: the user's problem, or a bug's."""
    if isinstance(error, EyefoldError):
        return one_line(str(error))
    return (
        f"internal error ({type(error).__name__}: {one_line(str(error))});"
        " run with -v for the traceback"
    )


def optimize_file(
    input_path: str,
    output_path: str,
    options: PipelineOptions,
    record: RunRecord,
    *,
    check: bool = False,
    check_inputs: str | None = None,
    check_settings: CheckSettings | None = None,
    external_data: bool = False,
    report_path: str | None = None,
) -> Report:
    """Optimizes one model file into ``output_path`` (which may be ``input_path``).

    Nothing is written unless every step succeeded; the output (and the report) is
    written under a temporary name and renamed into place. Before anything is written,
    the paths are checked against each other (:mod:`eyefold.model_files.path_rules`).
    The file is parsed by protobuf and only the EyeLike neighbourhood goes through
    onnx-ir (:mod:`eyefold.proto_path`), unless the whole model has to.

    Args:
        input_path: the model to read.
        output_path: where to write the result.
        options: what the pipeline does.
        record: the run's record, which collects timings, stats, the check and the files
            written; its progress shows the long steps.
        check: run the original and the result on the same inputs first (``--check``).
        check_inputs: the ``.npz`` of those inputs, one array per graph input name
            (``--check-inputs``); None: random inputs.
        check_settings: check shapes, tolerances and where to save (``--check-*``); the
            check runs the result on ``options.target_runtime`` when it is installed.
        external_data: write large tensors to ``<output>.data``.
        report_path: also write the JSON report here (``--report``). It is written to
            a temporary file once the model's files are, before OUTPUT is renamed into
            place, and renamed last: a report that cannot be written leaves OUTPUT as it
            was. Its save step is timed up to that point.

    Returns:
        The report, with the load, check and save steps and the before/after stats.

    Raises:
        PathClashError: OUTPUT, its data file or the report would replace a file the
            run reads, or one another (a usage error).
        EyefoldError: the model, the options or the files are the problem.
    """
    from eyefold.model_files import check_output_path, files_bytes

    check_output_path(output_path)
    if report_path is not None:
        check_output_path(report_path)
    model = _load(input_path, record)
    run = _run_pipeline(model, input_path, options, record, with_stats=True)
    _check_paths(run.data_files, input_path, output_path, report_path, external_data)
    assert run.before is not None and run.after is not None  # asked for: with_stats
    record.before = dataclasses.replace(
        run.before, bytes=files_bytes([os.path.abspath(input_path), *run.data_files])
    )
    with_data = external_data or bool(run.data_files) or _may_not_fit(run, input_path)
    result = _saved_form(run, input_path, check=check, with_data=with_data)
    if check:
        settings = _check_settings(check_settings, options.target_runtime)
        _check(input_path, result, output_path, record, check_inputs, settings)
    with record.step("save", f"saving {output_path}"):
        staged = _StagedReport(report_path, record, run.after)
        try:
            record.output = _save(
                result,
                input_path,
                output_path,
                record,
                asked=external_data,
                with_data=with_data,
                before_switch=staged.stage if report_path is not None else None,
            )
        except BaseException:
            staged.discard()  # staged, then OUTPUT's switch failed: the report stays too
            raise
    record.after = dataclasses.replace(run.after, bytes=record.output.bytes)
    from eyefold.report import build_report

    if staged.report is None:
        return build_report(record)
    staged.put_in_place()
    return staged.report


def _check_paths(
    data_files: list[str],
    input_path: str,
    output_path: str,
    report_path: str | None,
    external_data: bool,
) -> None:
    """Refuses a path a write would destroy (:mod:`eyefold.model_files.path_rules`).

    That is OUTPUT, its data file or the report, where it is a file the run reads
    (``data_files``: those of the input, which the run found) or another one it writes.
    """
    from eyefold.errors import PathClashError
    from eyefold.model_files.path_rules import ModelFiles, RunFiles

    source = ModelFiles(input_path, tuple(data_files))
    files = RunFiles([source])
    writes_data = external_data or bool(source.data_files)
    reason = files.model_clash(output_path, source, writes_data=writes_data)
    if reason is None and report_path is not None:
        reason = files.report_clash(report_path, [output_path])
    if reason is not None:
        raise PathClashError(reason)


class _StagedReport:
    """The ``--report`` file: staged just before OUTPUT's rename, renamed after it.

    Made when the save step starts, which the report then times up to its own write; that
    report is the run's (built once).
    """

    def __init__(self, path: str | None, record: RunRecord, after: ModelStats) -> None:
        self.path = path
        self.record = record
        self.after = after
        self.start = time.perf_counter()
        self.temp_path: str | None = None
        self.report: Report | None = None  # once staged, the run's report

    def stage(self, saved: SavedModel) -> None:
        """Writes the report as it will be once ``saved`` is in place."""
        import json

        from eyefold.model_files import stage_text
        from eyefold.report import build_report
        from eyefold.run_record import StepEntry

        assert self.path is not None
        record = self.record
        record.output = saved
        record.after = dataclasses.replace(self.after, bytes=saved.bytes)
        record.steps.append(StepEntry("save", time.perf_counter() - self.start, Stage.WRITE))
        try:
            report = build_report(record)
        finally:
            record.steps.pop()
        self.temp_path = stage_text(self.path, json.dumps(report.to_dict(), indent=2) + "\n")
        self.report = report

    def discard(self) -> None:
        """Removes the staged report, if one was written."""
        from eyefold.model_files.atomic_write import discard

        if self.temp_path is not None:
            discard(self.temp_path)

    def put_in_place(self) -> None:
        from eyefold.model_files import put_in_place

        assert self.path is not None and self.temp_path is not None
        put_in_place(self.temp_path, self.path)


def _check(
    input_path: str,
    result: onnx.ModelProto | ir.Model,
    output_path: str,
    record: RunRecord,
    inputs_path: str | None,
    settings: CheckSettings,
) -> None:
    """``--check``: the result against the original, as a step of ``record``."""
    from eyefold.check.equivalence import check_equivalence

    with record.step("check", "checking the result against the original"):
        record.check = check_equivalence(
            input_path,
            result,
            workdir=os.path.dirname(os.path.abspath(output_path)),
            inputs_path=inputs_path,
            settings=settings,
        )


def _check_settings(given: CheckSettings | None, target_runtime: str | None) -> CheckSettings:
    """The user's check settings, with the runtime the result is made for."""
    from eyefold.check.settings import CheckSettings

    return dataclasses.replace(given or CheckSettings(), target_runtime=target_runtime)


def inspect_file(input_path: str, options: PipelineOptions, record: RunRecord) -> Report:
    """What :func:`optimize_file` would do to the model; writes nothing."""
    from eyefold.report import build_report

    model = _load(input_path, record)
    run = _run_pipeline(model, input_path, options, record, with_stats=False)
    _check_data_files(run, input_path)
    return build_report(record)


def _check_data_files(run: ProtoRun, input_path: str) -> None:
    """The external-data checks a save makes, for ``inspect``, which saves nothing.

    The neighbourhood path checks the tensors it read; a save checks the others, so
    ``inspect`` does too, and refuses what ``optimize`` refuses. Only paths and sizes are
    read (a model keeping its weights in files is small: reading it whole is cheap).
    """
    from eyefold.model_files import model_from_proto

    if run.whole_model is None and run.data_files:
        model_from_proto(run.model, input_path)


def _load(input_path: str, record: RunRecord) -> onnx.ModelProto:
    from eyefold.model_files import read_model_proto

    with record.step("load", f"loading {input_path}", stage=Stage.READ):
        return read_model_proto(input_path)


def _run_pipeline(
    model: onnx.ModelProto,
    input_path: str,
    options: PipelineOptions,
    record: RunRecord,
    *,
    with_stats: bool,
) -> ProtoRun:
    from eyefold.proto_path import optimize_proto

    return optimize_proto(
        model, options, record=record, source_path=input_path, with_stats=with_stats
    )


def _saved_form(
    run: ProtoRun, input_path: str, *, check: bool, with_data: bool
) -> onnx.ModelProto | ir.Model | DeferredTensors:
    """The result as it is best saved: the proto, or onnx-ir's model where it must be.

    onnx-ir's model is needed when the whole-model path made one, when tensors outside
    the main graph's initializers keep their data in files (the proto save copies only
    those initializers), and for ``--check`` of a model with data files (the check runs
    a copy that must read them). A plain save of the proto writes the large tensors the
    run added straight from their arrays; ``--check`` and a data file need them in the
    proto.
    """
    from eyefold.model_files import model_from_proto

    if run.whole_model is not None:
        return run.whole_model
    if run.data_elsewhere or (check and run.data_files):
        return model_from_proto(run.model, input_path)
    return run.model if check or with_data else run.proto_to_write()


def _may_not_fit(run: ProtoRun, input_path: str) -> bool:
    """Whether the result may reach protobuf's 2 GiB limit (then saved with a data file).

    Sizing a proto walks all of it in C++: done only when the input is that large already
    (the neighbourhood path adds at most ``SPLICED_TENSOR_LIMIT_BYTES`` of tensors).
    """
    from eyefold.model_files import INLINE_LIMIT_BYTES
    from eyefold.proto_path import SPLICED_TENSOR_LIMIT_BYTES

    if run.whole_model is not None:
        return False  # save_model decides
    headroom = INLINE_LIMIT_BYTES - 2 * SPLICED_TENSOR_LIMIT_BYTES
    if os.path.getsize(input_path) < headroom:
        return False
    return run.model.ByteSize() > INLINE_LIMIT_BYTES


def _save(
    model: onnx.ModelProto | ir.Model | DeferredTensors,
    input_path: str,
    output_path: str,
    record: RunRecord,
    *,
    asked: bool,
    with_data: bool,
    before_switch: Callable[[SavedModel], None] | None,
) -> SavedModel:
    """Saves the proto, or the onnx-ir model.

    The proto gets a data file when ``with_data``; the onnx-ir model when ``asked``, or
    when :func:`save_model` finds it needs one.
    """
    import onnx_ir as ir

    from eyefold.model_files import save_model

    data = asked if isinstance(model, ir.Model) else with_data
    return save_model(
        model,
        output_path,
        external_data=data,
        source_path=input_path,
        progress=record.progress,
        before_switch=before_switch,
    )
