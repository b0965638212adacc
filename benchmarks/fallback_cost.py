"""What a run that leaves the file path pays before it leaves, on every sample and export.

Usage (from the repository root, in the environment to measure)::

    python benchmarks/fallback_cost.py [--reps 7]

For each bundled sample and real export that the file path hands to the whole-model path
(``eyefold.proto_path.optimize_proto`` in this process, warm, medians of ``--reps``, by
this process's CPU time, which other work on the machine does not inflate), one row:

- ``file path``: ``optimize_proto`` on a copy of the proto, and the result serialized;
- ``before leaving``: the part of it spent before the whole-model path starts;
- ``upgrade``: of that, the opset upgrade on the proto, which the whole-model path keeps
  (it runs on the upgraded proto and does not upgrade again);
- ``thrown away``: the rest (the scan, a sort, the inference of undeclared EyeLike
  inputs, the choice of the neighbourhood), work only the file path does;
- ``onnx-ir``: the same steps on the whole model from the start (deserialize, the
  pipeline with its own upgrade, serialize), what a straight route would cost.

The models that stay on the file path get a table of their own (the neighbourhood path
against onnx-ir; ``benchmarks/small_models.py`` times both with their files). To compare
two commits, run it once with each on ``PYTHONPATH`` (``git archive OLD | tar -x -C
/tmp/old && ln -s ../rules /tmp/old/eyefold/rules``, then ``PYTHONPATH=/tmp/old python
benchmarks/fallback_cost.py``).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import onnx
import onnx_ir as ir

import eyefold
import eyefold.proto_path
from eyefold.options import PipelineOptions
from eyefold.pipeline import pipeline_steps, run_steps

ROOT = Path(__file__).resolve().parent.parent


def _samples() -> list[Path]:
    return sorted((ROOT / "sample_models").glob("*.onnx")) + sorted(
        (ROOT / "sample_models" / "real").glob("*.onnx")
    )


class _Clocks:
    """CPU time of the upgrade on the proto, and when the whole-model path last started.

    Both wrap the file path's own functions: the record's step times are wall clock.
    """

    def __init__(self) -> None:
        self.upgrade = 0.0
        self.leaving: float | None = None
        self._upgrade = eyefold.proto_path._upgrade
        self._whole_model = eyefold.proto_path._whole_model
        eyefold.proto_path._upgrade = self._timed_upgrade
        eyefold.proto_path._whole_model = self._timed_whole_model

    def _timed_upgrade(self, *args: object, **kwargs: object) -> object:
        start = time.process_time()
        try:
            return self._upgrade(*args, **kwargs)
        finally:
            self.upgrade += time.process_time() - start

    def _timed_whole_model(self, *args: object, **kwargs: object) -> object:
        self.leaving = time.process_time()
        return self._whole_model(*args, **kwargs)


def _file_path(model: onnx.ModelProto, clocks: _Clocks) -> tuple[float, float, float, str]:
    """(total, before leaving, upgrade on the proto) CPU seconds, and the route taken."""
    working = copy.deepcopy(model)
    clocks.upgrade, clocks.leaving = 0.0, None
    start = time.process_time()
    run = eyefold.proto_path.optimize_proto(working, PipelineOptions())
    run.model  # noqa: B018  (serialized here, as a save would)
    total = time.process_time() - start
    if clocks.leaving is None:
        return total, 0.0, 0.0, "neighbourhood"
    return total, clocks.leaving - start, clocks.upgrade, run.record.route["whole_model"]


def _onnx_ir(model: onnx.ModelProto) -> float:
    working = copy.deepcopy(model)
    start = time.process_time()
    whole = ir.serde.deserialize_model(working)
    run_steps(whole, pipeline_steps(PipelineOptions()))
    ir.serde.serialize_model(whole)
    return time.process_time() - start


def _median(reps: int, run: Callable[[], tuple[float, ...]]) -> list[float]:
    rows = [run() for _ in range(reps)]
    return [statistics.median(column) for column in zip(*rows, strict=True)]


_COLUMNS = ("file path", "before leaving", "upgrade", "thrown away", "onnx-ir")


def _table(title: str, rows: list[tuple[str, list[float], str]], columns: list[int]) -> None:
    """Prints ``rows`` as markdown, only the ``columns`` (indices into ``_COLUMNS``)."""
    print(f"\n{title}\n")
    print(f"| model | {' | '.join(_COLUMNS[c] for c in columns)} | route |")
    print(f"| --- |{' ---: |' * len(columns)} --- |")
    sums = [0.0] * len(_COLUMNS)
    for name, ms, route in rows:
        sums = [a + b for a, b in zip(sums, ms, strict=True)]
        print(f"| {name} | {' | '.join(f'{ms[c]:.1f}' for c in columns)} | {route} |")
    print(f"| all | {' | '.join(f'**{sums[c]:.1f}**' for c in columns)} | |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    clocks = _Clocks()
    left: list[tuple[str, list[float], str]] = []
    stayed: list[tuple[str, list[float], str]] = []
    refused = 0
    for path in _samples():
        model = onnx.load(str(path))
        try:
            _file_path(model, clocks)  # warm: imports and caches
            _onnx_ir(model)
        except eyefold.EyefoldError:
            refused += 1
            continue

        def both(model: onnx.ModelProto = model) -> tuple[float, ...]:
            total, before, upgrade, _ = _file_path(model, clocks)
            return total, before, upgrade, before - upgrade, _onnx_ir(model)

        ms = [1e3 * s for s in _median(args.reps, both)]
        route = _file_path(model, clocks)[3]
        (stayed if route == "neighbourhood" else left).append((path.stem, ms, route))
    print(f"eyefold from {Path(eyefold.__file__).parent}; CPU ms, medians of {args.reps}")
    _table("Models that leave the file path:", left, [0, 1, 2, 3, 4])
    _table("Models that stay on it (the neighbourhood path):", stayed, [0, 4])
    print(f"\n{refused} models are refused (invalid) on both paths.")


if __name__ == "__main__":
    main()
