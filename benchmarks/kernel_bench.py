"""The EyeLike kernel against np.eye, onnx.reference, onnxruntime and the memory floor.

Usage::

    python benchmarks/kernel_bench.py [--quick] [--json]

For each S x S output (float32, bool, bfloat16, int64) it times, interleaved and after a
warm-up, ``eyefold.kernel.eye``, ``np.eye``, onnx's reference evaluator running a one-node
EyeLike model, onnxruntime running the same model (where it implements the type) and the
memory floor: ``np.zeros`` plus one byte written per 4 KiB page, i.e. the fresh pages the
output needs. Reported: median seconds, GB/s (output bytes / time) and the ratio to the floor.
run.py starts it with OPENBLAS_* removed from the environment, so numpy is not skewed by the
machine's BLAS tuning.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable

import ml_dtypes
import numpy as np
import onnx
import onnx.reference
import onnx_ir as ir
from onnx import TensorProto, helper

from eyefold import kernel

PAGE_BYTES = 4096
TYPES = {
    "float32": (ir.DataType.FLOAT, np.float32),
    "bool": (ir.DataType.BOOL, np.bool_),
    "bfloat16": (ir.DataType.BFLOAT16, ml_dtypes.bfloat16),
    "int64": (ir.DataType.INT64, np.int64),
}


def _floor(size: int, np_dtype: type) -> np.ndarray:
    out = np.zeros((size, size), dtype=np_dtype)
    out.reshape(-1).view(np.uint8)[::PAGE_BYTES] = 0
    return out


def _one_node(size: int, data_type: ir.DataType) -> onnx.ModelProto:
    node = helper.make_node("EyeLike", ["x"], ["y"], dtype=data_type.value)
    graph = helper.make_graph(
        [node],
        "eye",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [size, size])],
        [helper.make_tensor_value_info("y", data_type.value, [size, size])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    model.ir_version = 10
    return model


def _methods(size: int, name: str) -> tuple[dict[str, Callable[[], object]], dict[str, str]]:
    data_type, np_dtype = TYPES[name]
    x = np.zeros((size, size), dtype=np.float32)
    model = _one_node(size, data_type)
    methods: dict[str, Callable[[], object]] = {
        "floor": lambda: _floor(size, np_dtype),
        "eyefold": lambda: kernel.eye(size, size, 0, data_type),
        "np_eye": lambda: np.eye(size, dtype=np_dtype),
    }
    notes: dict[str, str] = {}
    try:
        reference = onnx.reference.ReferenceEvaluator(model)
        methods["onnx_reference"] = lambda: reference.run(None, {"x": x})[0]
    except Exception as error:
        notes["onnx_reference"] = f"{type(error).__name__}"
    try:
        import onnxruntime as ort

        session = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        methods["onnxruntime"] = lambda: session.run(None, {"x": x})[0]
    except ImportError:
        notes["onnxruntime"] = "not installed"
    except Exception as error:
        notes["onnxruntime"] = "no CPU kernel" if "implementation" in str(error) else "fails"
    expected = np.eye(size, dtype=np_dtype)
    for key in [k for k in methods if k != "floor"]:
        try:
            if not np.array_equal(np.asarray(methods[key]()), expected):
                notes[key] = "WRONG OUTPUT"
        except Exception as error:  # noqa: PERF203 - any method may fail
            notes[key] = f"fails: {type(error).__name__}"
            del methods[key]
    return methods, notes


def measure(size: int, name: str, reps: int) -> dict:
    """Median seconds per method for one size and type, methods interleaved per rep."""
    methods, notes = _methods(size, name)
    times: dict[str, list[float]] = {key: [] for key in methods}
    for rep in range(reps + 1):
        for key, method in methods.items():
            start = time.perf_counter()
            out = method()
            elapsed = time.perf_counter() - start
            del out
            if rep:
                times[key].append(elapsed)
    nbytes = size * size * np.dtype(TYPES[name][1]).itemsize
    row: dict = {"size": size, "dtype": name, "bytes": nbytes, "notes": notes}
    for key, values in times.items():
        row[f"{key}_s"] = statistics.median(values)
    return row


def run(quick: bool) -> dict:
    """All sizes and types; returns the JSON-able result."""
    sizes = (256, 1024, 2048) if quick else (256, 1024, 2048, 4096, 8192)
    reps = 5 if quick else 7
    rows = [
        measure(size, name, reps * max(1, 2048 // size)) for name in TYPES for size in sizes
    ]
    return {"reps": reps, "rows": rows}


def table(result: dict) -> str:
    """Markdown: GB/s per method and eyefold's ratio to the floor and to np.eye."""
    methods = ("floor", "eyefold", "np_eye", "onnx_reference", "onnxruntime")
    head = " | ".join(f"{m} GB/s" for m in methods)
    lines = [
        f"**kernel** (S x S EyeLike output, k=0; medians of {result['reps']} interleaved"
        " runs, more for S < 2048)",
        "",
        f"| dtype | S | MiB | {head} | eyefold / floor | eyefold / np.eye | notes |",
        "|---|---:|---:|" + "---:|" * (len(methods) + 2) + "---|",
    ]
    for row in result["rows"]:
        rates = []
        for method in methods:
            seconds = row.get(f"{method}_s")
            rates.append("-" if seconds is None else f"{row['bytes'] / seconds / 1e9:.2f}")
        notes = "; ".join(f"{k}: {v}" for k, v in row["notes"].items())
        lines.append(
            f"| {row['dtype']} | {row['size']} | {row['bytes'] / 2**20:.1f} | "
            + " | ".join(rates)
            + f" | {row['eyefold_s'] / row['floor_s']:.2f} |"
            f" {row['eyefold_s'] / row['np_eye_s']:.2f} | {notes} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="S up to 2048 only")
    parser.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    args = parser.parse_args(argv)
    result = run(args.quick)
    print(json.dumps(result) if args.json else table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
