"""One ``eyefold optimize`` process per model against one batch run, on onnx's test models.

Usage (from the repository root, in the environment to measure)::

    python benchmarks/bench_batch.py [--jobs 2] [--out benchmarks/out/batch.json]

The models are every ``*.onnx`` of the installed onnx wheel's ``backend/test/data`` (149
with onnx 1.23). Three runs, once each, end to end, wall time from this process:
``eyefold optimize IN OUT -q`` once per model, one after the other (what a CI loop over a
model zoo does); ``eyefold optimize DATA --output-dir DIR -j 1``; and the same with
``-j JOBS``. The batch outputs are compared byte for byte with the per-model ones.
Target: the ``-j 2`` batch at least 8x faster than one call per model.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnx


def _eyefold() -> list[str]:
    script = Path(sys.executable).with_name("eyefold")
    return [str(script)] if script.exists() else [sys.executable, "-m", "eyefold"]


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*.onnx"))
    }


def per_model(data: Path, out: Path) -> tuple[float, int]:
    """One process per model; returns the wall time and how many failed."""
    failed = 0
    start = time.perf_counter()
    for model in sorted(data.rglob("*.onnx")):
        target = out / model.relative_to(data)
        target.parent.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [*_eyefold(), "optimize", str(model), str(target), "-q"],
            capture_output=True,
            check=False,
        )
        failed += done.returncode != 0
    return time.perf_counter() - start, failed


def batch(data: Path, out: Path, jobs: int) -> tuple[float, int]:
    """One batch run; returns the wall time and its exit status."""
    start = time.perf_counter()
    done = subprocess.run(
        [*_eyefold(), "optimize", str(data), "--output-dir", str(out), "-j", str(jobs), "-q"],
        capture_output=True,
        check=False,
    )
    return time.perf_counter() - start, done.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    data = Path(onnx.__file__).parent / "backend" / "test" / "data"
    models = len(list(data.rglob("*.onnx")))
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        one_s, one_failed = per_model(data, root / "each")
        serial_s, serial_rc = batch(data, root / "serial", 1)
        jobs_s, jobs_rc = batch(data, root / "jobs", args.jobs)
        same = _digests(root / "each") == _digests(root / "serial") == _digests(root / "jobs")
    figures = {
        "models": models,
        "cpus": os.cpu_count(),
        "per_model_s": one_s,
        "per_model_failed": one_failed,
        "batch_j1_s": serial_s,
        "batch_j1_exit": serial_rc,
        f"batch_j{args.jobs}_s": jobs_s,
        f"batch_j{args.jobs}_exit": jobs_rc,
        "same_bytes": same,
    }
    ratio = one_s / jobs_s
    print(
        f"{models} models: one process per model {one_s:.1f} s ({one_s / models:.2f} s each,"
        f" {one_failed} failed); batch -j 1 {serial_s:.1f} s ({one_s / serial_s:.1f}x);"
        f" batch -j {args.jobs} {jobs_s:.1f} s ({ratio:.1f}x; target >= 8x:"
        f" {'met' if ratio >= 8 else 'missed'}); outputs identical: {same}"
    )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
