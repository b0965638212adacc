"""Peak memory and CPU of writing a large folded tensor: streamed from its array, or not.

Usage (from the repository root)::

    python benchmarks/stream_writes.py [--sizes 1 16 64 256] [--reps 3]
        [--tree NAME=PATH ...]

The model is the exporter chain ``x -> Shape -> ConstantOfShape -> EyeLike -> MatMul`` on
a square float input whose identity is SIZE MiB, folded with ``--size-limit SIZE MiB`` (1
MiB is the default limit). Each run is ``eyefold optimize IN OUT`` (``eyefold.cli.main``)
in a fresh child process, measured by the child itself with ``resource.getrusage``: its
peak RSS (``ru_maxrss``, the whole process: interpreter, imports, model and write; the
parent stays small, as a child starts from its parent's size) and the CPU time of the
run. Every combination runs once per repetition, interleaved, after a warm-up; the table
gives medians.

* route ``file``: as the command line runs it, the file path up to 64 MiB of new tensors
  (:data:`eyefold.proto_path.SPLICED_TENSOR_LIMIT_BYTES`), the whole-model path above;
  route ``whole``: the whole-model path forced by setting that limit to -1, i.e. a
  write-back fallback: the neighbourhood's steps run first, then the whole-model path
  (a model the file path refuses before its steps, e.g. an EyeLike in a subgraph, does
  not pay for that first run);
* writer ``streamed``: as the package writes; writer ``protobuf``: nothing streamed
  (``STREAM_MIN_BYTES`` raised past every tensor), protobuf serializes everything;
* tree: the eyefold source tree the child imports (``--tree before=/path/to/old/tree``
  puts an older commit side by side with this one; default: this repository only).

The last column is the output's sha256 prefix: rows that write the same bytes share it.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROUTES = ("file", "whole")
WRITERS = ("streamed", "protobuf")
# Modules that have held the streaming threshold, newest first; each found is patched.
_THRESHOLD_MODULES = (
    "eyefold.model_files.deferred_tensors",
    "eyefold.model_files.stream_write",
)


def _make_model(path: str, rows: int) -> None:
    """The exporter chain on a float[rows, rows] input (child process: imports onnx)."""
    import onnx

    model = onnx.parser.parse_model(
        f"""<ir_version: 8, opset_import: ["" : 17]>
        g (float[{rows}, {rows}] x) => (float[{rows}, {rows}] y) {{
            shape = Shape(x)
            zeros = ConstantOfShape(shape)
            eye = EyeLike(zeros)
            y = MatMul(x, eye)
        }}"""
    )
    onnx.save(model, path)


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _child(source: str, output: str, route: str, writer: str, size_limit: int) -> None:
    """One measured run; prints one JSON line."""
    import eyefold.proto_path
    from eyefold.cli.main import main

    if route == "whole":
        eyefold.proto_path.SPLICED_TENSOR_LIMIT_BYTES = -1
    if writer == "protobuf":
        for name in _THRESHOLD_MODULES:
            if importlib.util.find_spec(name) is not None:
                module = importlib.import_module(name)
                if hasattr(module, "STREAM_MIN_BYTES"):
                    module.STREAM_MIN_BYTES = 1 << 62
    report = output + ".report.json"
    argv = ["optimize", source, output, "-q", "--size-limit", str(size_limit)]
    cpu, wall = _cpu_seconds(), time.perf_counter()
    status = main([*argv, "--report", report])
    cpu, wall = _cpu_seconds() - cpu, time.perf_counter() - wall
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with open(report) as handle:
        steps = [step["name"] for step in json.load(handle)["steps"]]
    digest = hashlib.sha256()
    with open(output, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    print(
        json.dumps(
            {
                "status": status,
                "eyefold": os.path.dirname(os.path.dirname(eyefold.proto_path.__file__)),
                "route_taken": "file" if "neighbourhood" in steps else "whole",
                "peak_mb": peak_kib / 1024,
                "cpu_s": cpu,
                "wall_s": wall,
                "bytes": os.path.getsize(output),
                "sha256": digest.hexdigest(),
            }
        )
    )


def _run(tree: str, args: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=tree)
    done = subprocess.run(
        [sys.executable, __file__, *args], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"child failed ({args}):\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    """Runs every size, route, writer and tree; prints a markdown table of medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 16, 64, 256])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--tree", action="append", default=[], help="NAME=PATH")
    parser.add_argument("--child", nargs=5, metavar=("IN", "OUT", "ROUTE", "WRITER", "LIMIT"))
    parser.add_argument("--make", nargs=2, metavar=("PATH", "ROWS"))
    args = parser.parse_args()
    if args.make:
        _make_model(args.make[0], int(args.make[1]))
        return 0
    if args.child:
        source, output, route, writer, limit = args.child
        _child(source, output, route, writer, int(limit))
        return 0
    trees = dict(t.split("=", 1) for t in args.tree) or {"this": str(ROOT)}
    work = tempfile.mkdtemp(prefix="stream_writes.")
    models = {}
    for size in args.sizes:
        rows = math.isqrt(size * (1 << 20) // 4)
        models[size] = os.path.join(work, f"chain_{rows}.onnx")
        subprocess.run(
            [sys.executable, __file__, "--make", models[size], str(rows)],
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
            check=True,
        )
    combos = [
        (size, route, writer, name)
        for size in args.sizes
        for route in ROUTES
        for writer in WRITERS
        for name in trees
    ]
    output = os.path.join(work, "out.onnx")

    def once(size: int, route: str, writer: str, name: str) -> dict:
        limit = str(size << 20)
        result = _run(trees[name], ["--child", models[size], output, route, writer, limit])
        os.remove(output)
        os.remove(output + ".report.json")
        return result

    for name in trees:  # warm-up: compiled bytecode for each tree
        once(args.sizes[0], "file", "streamed", name)
    results: dict[tuple, list[dict]] = {combo: [] for combo in combos}
    for _ in range(args.reps):
        for combo in combos:
            results[combo].append(once(*combo))
    print(f"eyefold trees: {trees}; {args.reps} runs each; {os.cpu_count()} cores")
    print(
        "| fold MiB | route | taken | writer | tree | peak RSS MB | CPU s | wall s | bytes "
        "| sha256 |"
    )
    print("|---:|---|---|---|---|---:|---:|---:|---:|---|")
    for combo, runs in results.items():
        size, route, writer, name = combo
        first = runs[0]
        assert all(r["sha256"] == first["sha256"] for r in runs), "outputs differ run to run"

        def median(key: str, runs: list[dict] = runs) -> float:
            return statistics.median(r[key] for r in runs)

        print(
            f"| {size} | {route} | {first['route_taken']} | {writer} | {name} "
            f"| {median('peak_mb'):.0f} | {median('cpu_s'):.2f} | {median('wall_s'):.2f} "
            f"| {first['bytes']} | {first['sha256'][:12]} |"
        )
    shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
