"""Two commits' file path side by side: each side a fresh process, the sides alternating.

Usage (from the repository root)::

    git archive OLD | tar -x -C /tmp/old && ln -s ../rules /tmp/old/eyefold/rules
    python benchmarks/before_after.py /tmp/old [--rounds 3] [--reps 3]

Each round runs one process with ``/tmp/old`` first on ``PYTHONPATH`` (the old commit)
and one with the code this script is run with (the new), one after the other. Each process
times, warm (a first run done) and in process, medians of ``--reps``, wall clock and CPU:

- ``corpus``: the 149 backend-corpus models in one ``eyefold.optimize_files`` call;
- ``samples``: every bundled sample and real export, one ``optimize_files`` call each;
- ``big_100000``, ``chain_2048``, ``opset9_20000``: one ``optimize_files`` call each
  (the regression lines of ``benchmarks/README.md``; generated if needed).

Prints one line per process, then the medians over the rounds of each side.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MODELS = ("big_100000", "chain_2048", "opset9_20000")


def _measure(run: Callable[[], object], reps: int) -> tuple[float, float]:
    run()
    times = []
    for _ in range(reps):
        wall, cpu = time.perf_counter(), time.process_time()
        run()
        times.append((time.perf_counter() - wall, time.process_time() - cpu))
    return statistics.median(w for w, _ in times), statistics.median(c for _, c in times)


def side(reps: int) -> dict[str, tuple[float, float]]:
    """This process's figures: (wall, cpu) medians per line."""
    import onnx

    import eyefold

    sys.path.insert(0, str(HERE))
    import generate

    warnings.simplefilter("ignore")
    data = Path(onnx.__file__).parent / "backend" / "test" / "data"
    samples = sorted((ROOT / "sample_models").glob("*.onnx"))
    samples += sorted((ROOT / "sample_models" / "real").glob("*.onnx"))
    out = Path(tempfile.mkdtemp())

    def each_sample() -> None:
        for number, model in enumerate(samples):
            eyefold.optimize_files([model], out / f"sample{number}")

    lines = {
        "corpus": lambda: eyefold.optimize_files([data], out / "corpus"),
        "samples": each_sample,
    }
    for name in MODELS:
        path = generate.generate(name)
        lines[name] = lambda path=path, name=name: eyefold.optimize_files([path], out / name)
    return {name: _measure(run, reps) for name, run in lines.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", nargs="?", help="a clean export of the old commit")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--side", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.side:
        print(json.dumps(side(args.reps)))
        return 0
    if args.old is None:
        parser.error("give the old commit's export")
    figures: dict[str, list[dict[str, list[float]]]] = {"old": [], "new": []}
    for _ in range(args.rounds):
        for label in ("old", "new"):
            env = dict(os.environ)
            if label == "old":
                env["PYTHONPATH"] = os.pathsep.join(
                    filter(None, [args.old, env.get("PYTHONPATH")])
                )
            command = [sys.executable, __file__, "--side", "--reps", str(args.reps)]
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            result = json.loads(done.stdout.splitlines()[-1])
            figures[label].append(result)
            print(
                label,
                " | ".join(f"{k} {w:.3f} s (cpu {c:.3f})" for k, (w, c) in result.items()),
            )
    print("\nmedians over the rounds, old -> new, wall (cpu):")
    for name in figures["old"][0]:
        old, new = (
            [statistics.median(r[name][i] for r in figures[label]) for i in (0, 1)]
            for label in ("old", "new")
        )
        print(
            f"  {name}: {old[0]:.3f} s ({old[1]:.3f}) -> {new[0]:.3f} s ({new[1]:.3f}):"
            f" {new[0] / old[0]:.2f}x wall, {new[1] / old[1]:.2f}x cpu"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
