"""The ``eyefold`` command line: argument wiring only; the work lives in the library."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import traceback
from collections.abc import Sequence

from eyefold import __version__
from eyefold._optimize import DEFAULT_TARGET_OPSET, run_pipeline
from eyefold.errors import EyefoldError
from eyefold.model_io import load_model, save_model
from eyefold.passes.fold_eye_like import DEFAULT_SIZE_LIMIT_BYTES
from eyefold.report import Report, render_summary

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


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eyefold",
        description="Fold, infer and upgrade the EyeLike nodes of ONNX models.",
        epilog="examples:\n  eyefold optimize model.onnx model.opt.onnx\n"
        "  eyefold inspect model.onnx --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"eyefold {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log and show tracebacks")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    optimize = commands.add_parser("optimize", help="write an optimized copy of a model")
    optimize.add_argument("input", metavar="INPUT", help="model to read")
    optimize.add_argument("output", metavar="OUTPUT", help="where to write the result")
    _add_pipeline_options(optimize)
    optimize.add_argument("--report", metavar="PATH", help="write the JSON report here")
    optimize.add_argument("-q", "--quiet", action="store_true", help="print no summary")

    inspect = commands.add_parser(
        "inspect", help="list every EyeLike and what optimize would do; writes nothing"
    )
    inspect.add_argument("input", metavar="INPUT", help="model to read")
    _add_pipeline_options(inspect)
    inspect.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


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


def _run(args: argparse.Namespace) -> Report:
    model = load_model(args.input)
    report = run_pipeline(
        model,
        target_opset=args.target_opset,
        upgrade=not args.no_upgrade,
        fold=not args.no_fold,
        size_limit=args.size_limit,
    )
    if args.command == "optimize":
        save_model(model, args.output)
    return report


def _write_report(report: Report, path: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(report.to_dict(), handle, indent=2)
            handle.write("\n")
    except OSError as error:
        raise EyefoldError(f"cannot write the report {path}: {error}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status (0 ok, 1 error, 2 usage)."""
    args = _build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    try:
        report = _run(args)
        if args.command == "optimize" and args.report:
            _write_report(report, args.report)
    except EyefoldError as error:
        if args.verbose:
            traceback.print_exc()
        print(f"eyefold: error: {error}", file=sys.stderr)
        return 1
    except Exception as error:  # a bug or an input nobody anticipated: still one line
        if args.verbose:
            traceback.print_exc()
        print(
            f"eyefold: error: internal error ({type(error).__name__}: {error});"
            " run with -v for the traceback",
            file=sys.stderr,
        )
        return 1
    if args.command == "inspect":
        print(json.dumps(report.to_dict(), indent=2) if args.json else render_summary(report))
    elif not args.quiet:
        print(render_summary(report))
    return 0
