"""onnxruntime time of the dynamo exporter's diagonal, before and after diagonal_float.

The model is ``sample_models/dynamo_diagonal.onnx`` (torch_lib's ``aten_diagonal`` for
``torch.diagonal(x, 0, -2, -1)``, every dim symbolic), fed a ``[64, 1024, 1024]`` float
input. The original multiplies all 64M elements by an EyeLike mask and sums them; after
``eyefold.optimize(relaxed=True)`` the diagonal is read with a strided Slice. Both sessions
run interleaved in one process (so load and drift hit both alike); the table gives medians.

    python benchmarks/bench_diagonal.py [--runs 15] [--shape 64,1024,1024]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

import eyefold

SAMPLE = Path(__file__).resolve().parent.parent / "sample_models" / "dynamo_diagonal.onnx"


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def main() -> int:
    """Times both models; prints the table and checks they agree on finite input."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="interleaved runs per model")
    parser.add_argument("--shape", default="64,1024,1024", help="batch,rows,cols")
    args = parser.parse_args()
    shape = tuple(int(d) for d in args.shape.split(","))
    original = onnx.load(SAMPLE)
    rewritten = eyefold.optimize(original, relaxed=True)
    x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    sessions = {"original": _session(original), "diagonal_float": _session(rewritten)}
    outputs = {name: s.run(None, {"x": x})[0] for name, s in sessions.items()}  # warm-up
    np.testing.assert_array_equal(outputs["original"], outputs["diagonal_float"])
    times: dict[str, list[float]] = {name: [] for name in sessions}
    for _ in range(args.runs):
        for name, session in sessions.items():
            start = time.perf_counter()
            session.run(None, {"x": x})
            times[name].append(time.perf_counter() - start)
    medians = {name: statistics.median(values) * 1e3 for name, values in times.items()}
    print(f"input float32{list(shape)}, onnxruntime {ort.__version__}, {args.runs} runs")
    print(f"{'model':<16} {'median ms':>10} {'min ms':>9}  nodes")
    for name, model in (("original", original), ("diagonal_float", rewritten)):
        fastest = min(times[name]) * 1e3
        nodes = len(model.graph.node)
        print(f"{name:<16} {medians[name]:>10.3f} {fastest:>9.3f}  {nodes}")
    print(f"speedup {medians['original'] / medians['diagonal_float']:.0f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
