"""Where eyefold.optimize spends its time on a benchmark model (cProfile, in memory).

Usage::

    python benchmarks/profile_optimize.py big_100000 [--size-limit BYTES] [--top 25]
    python benchmarks/profile_optimize.py big_100000 --file-path

Generates the model if needed, runs ``eyefold.optimize`` once on the in-memory model and
prints the report's step times, then profiles a second call on a fresh copy and prints the
top functions by cumulative and by own time. With ``--file-path`` it profiles the file
path instead, as ``eyefold optimize IN OUT`` runs it (``eyefold.file_run.optimize_file``):
protobuf load, the neighbourhood path (``eyefold.proto_path``), the atomic save.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

import onnx_ir as ir

sys.path.insert(0, str(Path(__file__).resolve().parent))

import generate

import eyefold


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="a generate.py model name, e.g. opset9_20000")
    parser.add_argument("--size-limit", type=int, default=1 << 20)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--file-path", action="store_true", help="profile the file path")
    args = parser.parse_args(argv)
    path = str(generate.generate(args.model))
    if args.file_path:
        return _profile_file_path(path, args)
    plain = eyefold.optimize_with_report(ir.load(path), size_limit=args.size_limit)
    print(f"unprofiled steps on {args.model}:")
    for step in plain.report.steps:
        print(f"  {step.name:24s} {step.seconds:8.3f} s")
    model = ir.load(path)
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    result = eyefold.optimize_with_report(model, size_limit=args.size_limit)
    profiler.disable()
    print(f"eyefold.optimize on {args.model}: {time.perf_counter() - start:.3f} s (profiled)")
    del result
    for order in ("cumulative", "tottime"):
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats(order).print_stats(args.top)
        print(f"--- top {args.top} by {order} ---")
        print("\n".join(line for line in text.getvalue().splitlines() if line.strip())[:12000])
    return 0


def _print_stats(profiler: cProfile.Profile, top: int) -> None:
    for order in ("cumulative", "tottime"):
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats(order).print_stats(top)
        print(f"--- top {top} by {order} ---")
        print("\n".join(line for line in text.getvalue().splitlines() if line.strip())[:12000])


def _profile_file_path(path: str, args: argparse.Namespace) -> int:
    """Profiles what ``eyefold optimize IN OUT`` runs, in this process (imports done)."""
    import tempfile

    from eyefold.core.progress import Progress
    from eyefold.file_run import optimize_file
    from eyefold.options import PipelineOptions
    from eyefold.run_record import RunRecord

    options = PipelineOptions(size_limit=args.size_limit)
    with tempfile.TemporaryDirectory() as folder:
        output = str(Path(folder) / "out.onnx")
        log = RunRecord(progress=Progress(enabled=False))
        profiler = cProfile.Profile()
        start = time.perf_counter()
        profiler.enable()
        report = optimize_file(path, output, options, log)
        profiler.disable()
    print(f"file path on {args.model}: {time.perf_counter() - start:.3f} s (profiled)")
    for step in report.steps:
        print(f"  {step.name:24s} {step.seconds:8.3f} s")
    _print_stats(profiler, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
