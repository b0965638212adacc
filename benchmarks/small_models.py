"""The file path on small models against onnx-ir's, and a zoo batch against onnx's converter.

Usage (from the repository root, in the environment to measure)::

    python benchmarks/small_models.py [--reps 5] [--no-corpus] [--no-samples]

Everything runs warm, in this one process (imports and a first run of every model done
before the clock starts), the two sides of each row interleaved, medians of ``--reps``,
by the wall clock and by this process's CPU time (on a machine other work loads, the wall
clock also counts waits for a core and for the disk). The file path's save is atomic and
durable: it flushes the output to disk before renaming it into place, which onnx-ir's save
does not; the rows say how long those flushes took.

- Samples: every bundled sample and real export, ``eyefold.optimize_files([m], OUT)``
  (the file path: protobuf load, the neighbourhood or the whole-model path, save) against
  ``onnx_ir.load`` + ``eyefold.optimize`` + ``onnx_ir.save`` of the same model. Target:
  at most 1.5x, or at most 5 ms more.
- Corpus: every ``*.onnx`` of onnx's ``backend/test/data`` (149 with onnx 1.23) in one
  ``eyefold.optimize_files`` call (one job) against ``onnx.load`` +
  ``onnx.version_converter.convert_version(m, 22)`` + ``onnx.save`` of each. Target: at
  most 2.5x.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import onnx
import onnx_ir as ir
from onnx import version_converter

import eyefold

ROOT = Path(__file__).resolve().parent.parent


class _Fsyncs:
    """Time spent in ``os.fsync``: the file path's atomic save flushes its output to disk
    before the rename (onnx-ir's save does not), which a busy disk makes slow."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._fsync = os.fsync
        os.fsync = self._timed

    def _timed(self, fd: int) -> None:
        start = time.perf_counter()
        try:
            self._fsync(fd)
        finally:
            self.seconds += time.perf_counter() - start


FSYNCS = _Fsyncs()


def _samples() -> list[Path]:
    return sorted((ROOT / "sample_models").glob("*.onnx")) + sorted(
        (ROOT / "sample_models" / "real").glob("*.onnx")
    )


@dataclasses.dataclass(frozen=True)
class Times:
    """Median seconds of one side: wall clock, and this process's CPU time.

    On a machine other processes load, the wall clock also counts the time spent waiting
    for a core; the CPU time does not (nor does it count waits for the disk, like fsync).
    """

    wall: float
    cpu: float


def _timed(run: Callable[[], object]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


def _medians(sides: dict[str, Callable[[], object]], reps: int) -> dict[str, Times]:
    """Medians of ``reps`` interleaved runs of each side, after one warm-up run each."""
    for run in sides.values():
        run()
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    for _ in range(reps):
        for name, run in sides.items():
            times[name].append(_timed(run))
    return {
        name: Times(
            statistics.median(wall for wall, _ in values),
            statistics.median(cpu for _, cpu in values),
        )
        for name, values in times.items()
    }


def _sample_target(file: float, onnx_ir: float) -> tuple[str, bool]:
    """The ratio and the difference as printed, and whether they meet the target."""
    ratio, more_ms = file / onnx_ir, (file - onnx_ir) * 1e3
    ok = ratio <= 1.5 or more_ms <= 5.0
    return f"{ratio:.2f}x, {more_ms:+.1f} ms{'' if ok else ' MISSED'}", ok


def _file_path(model: Path, out: Path) -> Callable[[], object]:
    def run() -> str:
        (result,) = eyefold.optimize_files([model], out)
        return result.status

    return run


def _onnx_ir(model: Path, out: Path) -> Callable[[], object]:
    """The onnx-ir side; a model eyefold refuses is timed up to its refusal."""
    target = out / model.name

    def run() -> str:
        try:
            optimized = eyefold.optimize(ir.load(model))
        except eyefold.EyefoldError:
            return "failed"
        ir.save(optimized, target)
        return "ok"

    return run


def samples(reps: int, folder: Path) -> bool:
    """Prints one row per sample; returns whether every row meets its target (wall)."""
    print(
        "| model | optimize_files wall (cpu) | of which fsync"
        " | onnx-ir load+optimize+save wall (cpu) | wall | cpu |"
    )
    print("|---|---:|---:|---:|---|---|")
    met = True
    for model in _samples():
        file_out = folder / "file" / model.stem
        ir_out = folder / "ir" / model.stem
        ir_out.mkdir(parents=True)
        synced = FSYNCS.seconds
        times = _medians(
            {"file": _file_path(model, file_out), "ir": _onnx_ir(model, ir_out)}, reps
        )
        fsync_ms = (FSYNCS.seconds - synced) / (reps + 1) * 1e3  # a mean, warm-up included
        refused = _file_path(model, file_out)() == "failed"
        file, onnx_ir = times["file"], times["ir"]
        wall, ok = _sample_target(file.wall, onnx_ir.wall)
        cpu, _ = _sample_target(file.cpu, onnx_ir.cpu)
        met &= ok
        name = f"{model.stem} (refused)" if refused else model.stem
        print(
            f"| {name} | {file.wall * 1e3:.1f} ms ({file.cpu * 1e3:.1f}) | {fsync_ms:.1f} ms"
            f" | {onnx_ir.wall * 1e3:.1f} ms ({onnx_ir.cpu * 1e3:.1f}) | {wall} | {cpu} |"
        )
    return met


def corpus(reps: int, folder: Path) -> bool:
    """Prints the corpus row; returns whether it meets its target."""
    data = Path(onnx.__file__).parent / "backend" / "test" / "data"
    models = sorted(data.rglob("*.onnx"))
    converted_dir = folder / "converted"
    converted_dir.mkdir(parents=True)

    def converter() -> None:
        for number, path in enumerate(models):
            model = onnx.load(path)
            with contextlib.suppress(Exception):  # what it cannot convert is saved as read
                model = version_converter.convert_version(model, 22)
            onnx.save(model, converted_dir / f"{number}.onnx")

    def batch() -> None:
        results = eyefold.optimize_files([data], folder / "batch")
        assert len(results) == len(models)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        times = _medians({"batch": batch, "converter": converter}, reps)
    batch_s, converter_s = times["batch"], times["converter"]
    ratio = batch_s.wall / converter_s.wall
    print(
        f"\n{len(models)} backend-corpus models: one optimize_files call"
        f" {batch_s.wall:.2f} s (cpu {batch_s.cpu:.2f} s), onnx load +"
        f" convert_version(22) + save {converter_s.wall:.2f} s (cpu {converter_s.cpu:.2f} s):"
        f" {ratio:.2f}x wall, {batch_s.cpu / converter_s.cpu:.2f}x cpu"
        f" (target <= 2.5x: {'met' if ratio <= 2.5 else 'MISSED'})"
    )
    return ratio <= 2.5


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--no-samples", action="store_true")
    parser.add_argument("--no-corpus", action="store_true")
    args = parser.parse_args(argv)
    print(f"eyefold from {Path(eyefold.__file__).parent}, medians of {args.reps} warm runs")
    met = True
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        if not args.no_samples:
            met &= samples(args.reps, folder / "samples")
        if not args.no_corpus:
            met &= corpus(args.reps, folder / "corpus")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
