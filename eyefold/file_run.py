"""One model file, end to end: load, run the pipeline, check, save atomically, report.

``eyefold optimize INPUT OUTPUT``, every model of ``eyefold optimize IN... --output-dir``
and :func:`eyefold.optimize_files` go through :func:`optimize_file`, so a model gets the
same result, the same files and, on failure, the same one-line error (:func:`error_line`)
whichever way it was run.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from eyefold.errors import EyefoldError

if TYPE_CHECKING:
    import onnx_ir as ir

    from eyefold.options import PipelineOptions
    from eyefold.report import Report
    from eyefold.summary import RunLog

__all__ = ["error_line", "inspect_file", "one_line", "optimize_file"]


def one_line(message: str) -> str:
    """The message on one line, whatever names a hostile file holds.

    Whitespace runs (line breaks too) become one space; other control characters are
    escaped.
    """
    flat = " ".join(message.split())
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in flat)


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
    log: RunLog,
    *,
    check: bool = False,
    external_data: bool = False,
) -> Report:
    """Optimizes one model file into ``output_path`` (which may be ``input_path``).

    Nothing is written unless every step succeeded; the output is written under a
    temporary name and renamed into place.

    Args:
        input_path: the model to read.
        output_path: where to write the result.
        options: what the pipeline does.
        log: collects timings, stats, the check and the files written; its progress
            shows the long steps.
        check: run the original and the result on random inputs first (``--check``).
        external_data: write large tensors to ``<output>.data``.

    Returns:
        The report, with the load, check and save steps and the before/after stats.

    Raises:
        EyefoldError: the model, the options or the files are the problem.
    """
    from eyefold.model_files import (
        check_output_path,
        external_data_files,
        files_bytes,
        save_model,
    )
    from eyefold.summary import model_stats

    check_output_path(output_path)
    model = _load(input_path, log)
    input_files = [os.path.abspath(input_path), *external_data_files(model)]
    log.before = model_stats(model, files_bytes(input_files))
    report = _run_pipeline(model, options)
    if check:
        from eyefold.check import check_equivalence

        with log.step("check", "checking the result against the original"):
            log.check = check_equivalence(
                input_path, model, workdir=os.path.dirname(os.path.abspath(output_path))
            )
    with log.step("save", f"saving {output_path}"):
        log.output = save_model(
            model,
            output_path,
            external_data=external_data,
            source_path=input_path,
            progress=log.progress,
        )
    log.after = model_stats(model, log.output.bytes)
    log.merge_into(report)
    return report


def inspect_file(input_path: str, options: PipelineOptions, log: RunLog) -> Report:
    """What :func:`optimize_file` would do to the model; writes nothing."""
    model = _load(input_path, log)
    report = _run_pipeline(model, options)
    log.merge_into(report)
    return report


def _load(input_path: str, log: RunLog) -> ir.Model:
    from eyefold.model_files import load_model

    with log.step("load", f"loading {input_path}"):
        return load_model(input_path)


def _run_pipeline(model: ir.Model, options: PipelineOptions) -> Report:
    from eyefold.passes.pipeline import run_pipeline

    return run_pipeline(model, options)
