"""The ``eyefold`` command line: argument wiring only; the work lives in the library.

Imports are deferred to the command that needs them: ``eyefold --version`` and ``--help``
import no onnx, onnx-ir, numpy or onnxscript (about 0.5 s of start-up per process, 1.5 s
with ml_dtypes 0.7), and ``--check``'s onnxruntime only when asked for.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import sys
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING

from eyefold import __version__
from eyefold.cli.log_lines import configure_logging
from eyefold.core.option_names import cli_spelling
from eyefold.errors import EyefoldError
from eyefold.file_run import error_line
from eyefold.options import (
    DEFAULT_SIZE_LIMIT_BYTES,
    DEFAULT_TARGET_OPSET,
    TARGET_RUNTIMES,
    PipelineOptions,
)

if TYPE_CHECKING:
    from eyefold.check.settings import CheckSettings
    from eyefold.core.input_shapes import InputShape
    from eyefold.report import Report
    from eyefold.run_record import RunRecord

__all__ = ["main", "parse_size"]

_SIZE_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    """Parses a byte count with an optional K/M/G suffix (binary units), e.g. ``4M``."""
    cleaned = text.strip().upper().removesuffix("B").removesuffix("I")
    suffix = cleaned[-1:] if cleaned[-1:] in _SIZE_SUFFIXES else ""
    number = cleaned[: len(cleaned) - len(suffix)]
    if not number.isdigit():
        raise argparse.ArgumentTypeError(f"not a byte size: {text!r} (e.g. 1048576, 512K, 4M)")
    return int(number) * _SIZE_SUFFIXES[suffix]


_EXAMPLES = """\
examples:
  eyefold optimize model.onnx model.opt.onnx
  eyefold optimize model.onnx model.opt.onnx --check --report report.json
  eyefold optimize model.onnx model.opt.onnx --check --check-inputs feeds.npz
  eyefold optimize model.onnx model.opt.onnx --input-shape x:1,3,224,224
  eyefold optimize big.onnx big.opt.onnx --external-data --size-limit 16M
  eyefold optimize model.onnx model.onnx -q      # in place, atomically
  eyefold optimize zoo/ extra.onnx --output-dir out/ -j 4 --report batch.json
  eyefold inspect model.onnx --json
"""


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eyefold",
        description="Fold, infer and upgrade the EyeLike nodes of ONNX models.",
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"eyefold {__version__}")
    _add_verbose(parser, default=False)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    _add_optimize_parser(commands)
    inspect = commands.add_parser(
        "inspect",
        help="list every EyeLike and what optimize would do; writes nothing",
        epilog="example:\n  eyefold inspect model.onnx --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_verbose(inspect)
    inspect.add_argument("input", metavar="INPUT", help="model to read")
    _add_pipeline_options(inspect)
    inspect.add_argument("--json", action="store_true", help="print the report as JSON")

    rules = commands.add_parser(
        "rules", help="list the rewrite rules with their exactness, phase and identity"
    )
    _add_verbose(rules)
    return parser


def _add_verbose(parser: argparse.ArgumentParser, default: object = argparse.SUPPRESS) -> None:
    """``-v`` on the command and on each subcommand, so it may come before or after it.

    A subcommand's ``-v`` sets the flag only when given (SUPPRESS), so it never resets one
    given before the subcommand.
    """
    parser.add_argument(
        "-v", "--verbose", action="store_true", default=default, help="log and show tracebacks"
    )


_OPTIMIZE_USAGE = """\
eyefold optimize INPUT OUTPUT [options]
       eyefold optimize IN [IN ...] --output-dir DIR [-j N] [options]"""


def _add_optimize_parser(commands: argparse._SubParsersAction) -> None:
    optimize = commands.add_parser(
        "optimize",
        help="write an optimized copy of a model, or of many",
        usage=_OPTIMIZE_USAGE,
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_verbose(optimize)
    optimize.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="INPUT OUTPUT (OUTPUT may be INPUT); with --output-dir, models and folders"
        " (searched recursively for *.onnx)",
    )
    optimize.add_argument(
        "--output-dir",
        metavar="DIR",
        help="optimize every input into DIR, at the same relative path (batch mode)",
    )
    optimize.add_argument(
        "--input-root",
        metavar="DIR",
        help="batch mode: write every model at its path relative to DIR (for shards of a"
        " zoo given file by file); a model outside DIR fails",
    )
    optimize.add_argument(
        "-j",
        "--jobs",
        type=_positive_int,
        default=1,
        metavar="N",
        help="batch mode: worker processes (default 1)",
    )
    _add_pipeline_options(optimize)
    optimize.add_argument(
        "--report",
        metavar="PATH",
        help="write the JSON report here (batch mode: one per-model list)",
    )
    optimize.add_argument("-q", "--quiet", action="store_true", help="print no summary")
    optimize.add_argument(
        "--check",
        action="store_true",
        help="run original and result on random inputs (onnxruntime, else onnx.reference,"
        " else onnxruntime with the EyeLike nodes it cannot run lowered; the result on"
        " --target-runtime's runtime when installed), symbolic dims at two sizes; write"
        " nothing unless the outputs are equal",
    )
    optimize.add_argument(
        "--check-inputs",
        metavar="FILE.npz",
        help="with --check: feed these arrays (one per graph input name, e.g. real indices)"
        " instead of random inputs",
    )
    _add_check_options(optimize)
    optimize.add_argument(
        "--external-data",
        action="store_true",
        help="save tensors over 1 KiB to OUTPUT.data beside OUTPUT (automatic for"
        " models over 2 GiB and for inputs with external data)",
    )


def _add_check_options(optimize: argparse.ArgumentParser) -> None:
    """The ``--check-*`` options that shape the check (single mode: one model's inputs)."""
    optimize.add_argument(
        "--check-shape",
        type=_check_shape,
        action="append",
        default=[],
        metavar="NAME:D0,D1,...",
        help="with --check: run the check at this input shape (repeatable: one check per"
        " shape of an input); the model is not changed (that is --input-shape)",
    )
    for name, default in (("rtol", "1e-5"), ("atol", "1e-6")):
        optimize.add_argument(
            f"--check-{name}",
            type=_tolerance,
            default=None,
            metavar="X",
            help=f"with --check: {name} for floating outputs, instead of the default per"
            f" type ({default} for float32 on onnxruntime); integers stay bit-identical",
        )
    optimize.add_argument(
        "--check-save",
        metavar="DIR",
        help="with --check: write each check's inputs and both models' outputs to DIR"
        " (inputs_N.npz, original_outputs_N.npz, output_outputs_N.npz), to replay"
        " elsewhere",
    )


def _check_shape(text: str) -> tuple[str, list[int]]:
    from eyefold.check.settings import parse_check_shape

    try:
        return parse_check_shape(text)
    except EyefoldError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also NaN
        raise argparse.ArgumentTypeError(f"not a tolerance: {text!r} (a number >= 0)")
    return value


_CHECK_OPTIONS = ("check_inputs", "check_shape", "check_rtol", "check_atol", "check_save")


def _check_settings(args: argparse.Namespace) -> CheckSettings:
    """What the ``--check-*`` options ask of the check."""
    from eyefold.check.settings import CheckSettings

    shapes: dict[str, list[list[int]]] = {}
    for name, dims in args.check_shape:
        shapes.setdefault(name, []).append(dims)
    return CheckSettings(
        shapes=shapes,
        rtol=args.check_rtol,
        atol=args.check_atol,
        save_dir=args.check_save,
    )


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a positive number: {text!r}")
    return int(text)


def _split_positionals(parser: argparse.ArgumentParser, args: argparse.Namespace) -> bool:
    """Single mode (INPUT OUTPUT) or batch mode (--output-dir); True for batch."""
    if args.output_dir is not None:
        if args.check_inputs is not None:
            parser.error("--check-inputs names one model's inputs; it takes INPUT OUTPUT")
        for option in _CHECK_OPTIONS[1:]:
            if getattr(args, option) not in (None, []):
                flag = "--" + option.replace("_", "-")
                parser.error(f"{flag} is for one model; it takes INPUT OUTPUT")
        args.inputs = args.paths
        return True
    if args.check_inputs is not None and args.check_shape:
        parser.error("--check-shape and --check-inputs cannot be combined")
    if len(args.paths) != 2:
        parser.error("optimize takes INPUT OUTPUT, or several inputs with --output-dir DIR")
    if args.jobs != 1:
        parser.error("-j/--jobs needs --output-dir DIR")
    if args.input_root is not None:
        parser.error("--input-root needs --output-dir DIR")
    args.input, args.output = args.paths
    return False


def _add_pipeline_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target-opset",
        type=int,
        default=DEFAULT_TARGET_OPSET,
        metavar="N",
        help=f"raise the default-domain opset to N if lower (default {DEFAULT_TARGET_OPSET})",
    )
    parser.add_argument("--no-upgrade", action="store_true", help="keep the model's opset")
    parser.add_argument("--no-fold", action="store_true", help="infer only, fold nothing")
    parser.add_argument(
        "--size-limit",
        type=parse_size,
        default=DEFAULT_SIZE_LIMIT_BYTES,
        metavar="BYTES",
        help="fold only outputs up to this size; K/M/G suffixes (default 1M)",
    )
    parser.add_argument(
        "--input-shape",
        type=_input_shape,
        action="append",
        default=[],
        metavar="NAME:D0,D1,...",
        help="pin a graph input's shape first (repeatable; dims are integers or names)",
    )
    parser.add_argument(
        "--rules",
        type=_rule_list,
        default=None,
        metavar="NAME,...|none",
        help="rewrite rules to run (default: every exact rule; `eyefold rules` lists them)",
    )
    parser.add_argument(
        "--relaxed",
        action="store_true",
        help="also allow rules exact only up to IEEE special values (inf, NaN, -0.0)",
    )
    parser.add_argument(
        "--target-runtime",
        choices=TARGET_RUNTIMES,
        default=None,
        metavar="NAME",
        help="make the EyeLike nodes left run there: each one the runtime cannot run"
        " becomes casts around a combination it runs, or primitive ops, never breaking"
        " another runtime (onnxruntime: measured once per version and cached; openvino,"
        " tract, tvm: tables measured with a stated version; onnxruntime also covers"
        " onnxruntime-web and -node); tensorrt: lower every EyeLike left into primitive ops"
        f" (choices: {', '.join(TARGET_RUNTIMES)})",
    )
    parser.add_argument(
        "--lower-eyelike",
        action="store_true",
        help="lower every EyeLike left after folding into Range/Equal/Cast and friends,"
        " for runtimes that cannot run EyeLike",
    )


def _rule_list(text: str) -> list[str]:
    from eyefold.rule_registry import rule_names

    names = [name.strip() for name in text.split(",") if name.strip()]
    if names == ["none"]:
        return []
    known = rule_names()
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown rule {', '.join(unknown) or repr(text)}"
            f" (choose from {', '.join(known)}, or none)"
        )
    return names


def _pipeline_options(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> PipelineOptions:
    """The run's options, built once from the arguments; a bad combination is a usage error."""
    try:
        return PipelineOptions(
            target_opset=args.target_opset,
            upgrade=not args.no_upgrade,
            fold=not args.no_fold,
            size_limit=args.size_limit,
            input_shapes=args.input_shape,
            target_runtime=args.target_runtime,
            rules=args.rules,
            relaxed=args.relaxed,
            lower_eyelike=args.lower_eyelike,
        )
    except EyefoldError as error:
        parser.error(cli_spelling(str(error)))


def _input_shape(text: str) -> InputShape:
    from eyefold.core.input_shapes import InputShapeError, parse_input_shape

    try:
        return parse_input_shape(text)
    except InputShapeError as error:
        raise argparse.ArgumentTypeError(cli_spelling(str(error))) from None


def _run(args: argparse.Namespace, options: PipelineOptions, record: RunRecord) -> Report:
    from eyefold.file_run import inspect_file, optimize_file

    if args.command == "inspect":
        return inspect_file(args.input, options, record)
    return optimize_file(
        args.input,
        args.output,
        options,
        record,
        check=args.check,
        check_inputs=args.check_inputs,
        check_settings=_check_settings(args),
        external_data=args.external_data,
        report_path=args.report,
    )


def _warn_unused_options(args: argparse.Namespace) -> None:
    if args.no_fold and args.size_limit != DEFAULT_SIZE_LIMIT_BYTES:
        print("eyefold: warning: --size-limit has no effect with --no-fold", file=sys.stderr)
    for option in _CHECK_OPTIONS:
        if getattr(args, option, None) not in (None, []) and not args.check:
            flag = "--" + option.replace("_", "-")
            print(f"eyefold: warning: {flag} has no effect without --check", file=sys.stderr)


def _single(
    args: argparse.Namespace, options: PipelineOptions, argv: Sequence[str] | None
) -> int:
    """One model: ``optimize INPUT OUTPUT`` or ``inspect INPUT``; returns the exit status."""
    from eyefold.cli.summary import render_inspect, render_optimize, use_color
    from eyefold.core.input_shapes import InputShapeError
    from eyefold.errors import PathClashError
    from eyefold.run_record import RunRecord

    record = RunRecord()
    try:
        report = _run(args, options, record)  # --report is written with OUTPUT
    except (InputShapeError, PathClashError) as error:  # the options do not fit: usage
        print(f"eyefold: error: {cli_spelling(str(error))}", file=sys.stderr)
        return 2
    except Exception as error:  # EyefoldError, or a bug / an input nobody anticipated
        if args.verbose:
            traceback.print_exc()
        print(f"eyefold: error: {cli_spelling(error_line(error))}", file=sys.stderr)
        return 1
    for note in report.extra.get("notes", ()):  # the run did other than asked: say why
        print(f"eyefold: note: {note}", file=sys.stderr)
    if args.command == "inspect":
        print(
            json.dumps(report.to_dict(), indent=2)
            if args.json
            else render_inspect(report, args.input)
        )
    elif not args.quiet:
        command = shlex.join(["eyefold", *(sys.argv[1:] if argv is None else argv)])
        print(render_optimize(report, record, color=use_color(sys.stdout), command=command))
    return 0


# The exit status when stdout was closed early (``eyefold rules | head -3``): the shell's
# status of a process killed by SIGPIPE (128 + 13), as ``yes | head -1`` gives for yes.
STDOUT_CLOSED_STATUS = 141

# The exit status after Ctrl-C: the shell's status of a process SIGINT stopped (128 + 2).
INTERRUPTED_STATUS = 130


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status (0 ok, 1 error, 2 usage, 130 Ctrl-C).

    A reader that stops early (``| head``) ends the run quietly with
    :data:`STDOUT_CLOSED_STATUS`, never a BrokenPipeError traceback. Ctrl-C ends it with
    one line, like any other error: the files being written are removed on the way out
    (each is a temporary file until it is complete), so OUTPUT is left as it was, and
    batch workers stop the same way.
    """
    try:
        status = _command(argv)
        sys.stdout.flush()  # inside the try: the last lines may still be buffered
    except BrokenPipeError:
        _discard_stdout()
        return STDOUT_CLOSED_STATUS
    except KeyboardInterrupt:
        _discard_unfinished_files()
        print("eyefold: interrupted", file=sys.stderr)
        return INTERRUPTED_STATUS
    return status


def _discard_stdout() -> None:
    """Points stdout at devnull, so the interpreter's own flush at exit fails no more."""
    try:
        fileno = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's StringIO)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fileno)
    os.close(devnull)


def _discard_unfinished_files() -> None:
    """Removes the temporary files an interrupt caught before their clean-up was armed.

    Only when the writing module was imported: otherwise nothing was written, and
    importing it now would cost the interrupted run half a second.
    """
    atomic_write = sys.modules.get("eyefold.model_files.atomic_write")
    if atomic_write is not None:
        atomic_write.discard_unfinished()


def _command(argv: Sequence[str] | None) -> int:
    """The command line proper (:func:`main` without the closed-stdout handling)."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.command == "rules":
        from eyefold.rule_registry import describe_rules

        print(describe_rules())
        return 0
    batch = args.command == "optimize" and _split_positionals(parser, args)
    options = _pipeline_options(parser, args)
    configure_logging(logging.INFO if args.verbose else logging.WARNING)
    _warn_unused_options(args)
    if batch:
        from eyefold.cli.batch import run_batch

        return run_batch(args, options)
    return _single(args, options, argv)
