"""``eyefold optimize IN... --output-dir DIR [-j N]``: the command line of a batch run."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from eyefold.batch import make_folder_for, optimize_files, plan_files, refuse_path_clashes
from eyefold.cli.batch_summary import BatchProgress, batch_report, render_batch
from eyefold.errors import PathClashError
from eyefold.file_run import error_line
from eyefold.model_files import check_output_path, write_text
from eyefold.options import PipelineOptions

__all__ = ["run_batch"]


def run_batch(args: argparse.Namespace, options: PipelineOptions) -> int:
    """Optimizes every input into ``args.output_dir``; 1 if any model failed, else 0.

    Failures are reported per model (one ``eyefold: error:`` line each, on stderr, as
    they happen) and never stop the other models. A report path or output folder that
    cannot be written, or no model at all, stops the run before any work; so does a
    report that would replace an input, a data file one reads or an output (exit 2).
    """
    start = time.perf_counter()
    try:
        if args.report:
            _make_report_folder(args.report, args.output_dir)
            check_output_path(args.report)
            planned = plan_files(args.inputs, args.output_dir, input_root=args.input_root)
            refuse_path_clashes(planned, args.external_data, args.report)
        progress = BatchProgress(sys.stderr)
        try:
            results = optimize_files(
                args.inputs,
                args.output_dir,
                options=options,
                jobs=args.jobs,
                check=args.check,
                external_data=args.external_data,
                on_result=progress,
                verbose=args.verbose,
                input_root=args.input_root,
            )
        finally:
            progress.done()
        if not results:
            print(
                f"eyefold: error: no *.onnx model in {' '.join(args.inputs)} (models inside"
                f" the output folder {args.output_dir} are not taken as inputs)",
                file=sys.stderr,
            )
            return 1
        seconds = time.perf_counter() - start
        if args.report:
            document = batch_report(results, seconds, args.jobs)
            write_text(args.report, json.dumps(document, indent=2) + "\n")
    except PathClashError as error:  # the report would replace a file: a usage error
        print(f"eyefold: error: {error_line(error)}", file=sys.stderr)
        return 2
    except Exception as error:  # the report path, or a bug: one line, as everywhere
        print(f"eyefold: error: {error_line(error)}", file=sys.stderr)
        return 1
    if not args.quiet:
        print(render_batch(results, seconds, args.jobs))
    return 1 if any(result.status == "failed" for result in results) else 0


def _make_report_folder(report: str, output_dir: str) -> None:
    """Creates the report's folder when it lies in the output folder, which a batch creates.

    A fresh run with ``--output-dir out/ --report out/report.json`` (one report per shard
    beside the shards' models) must not fail because ``out/`` does not exist yet.
    """
    folder = os.path.dirname(os.path.abspath(report))
    output_root = os.path.abspath(output_dir)
    if os.path.commonpath([folder, output_root]) == output_root:
        make_folder_for(report)
