#!/usr/bin/env python3
"""Which opset and IR version each onnxruntime release loads: the figures behind
``eyefold/runtime/versions.py``.

    python benchmarks/runtime_versions.py [--out benchmarks/out/versions]
        [--versions 1.16.3,1.17.3,...] [--python python3.11]

What it does:
- writes small models: ``Identity`` and ``EyeLike`` (float [3,3] -> [3,3]) at each opset
  from 18 to the installed onnx's newest, all stamped IR 8 (so only the opset varies), and
  an ``Identity`` model of opset 13 stamped with each IR version from 8 to the installed
  onnx's newest (so only the IR version varies);
- for each onnxruntime release, makes a throwaway venv under ``--out`` (``pip install
  onnxruntime==V``, with ``numpy<2`` for releases built against numpy 1), and in it opens an
  ``InferenceSession`` on every model and runs it once;
- prints, per release, the newest opset whose models load and run, the newest IR version
  that loads, and the first error of each kind; ``results.json`` keeps every outcome.

A model "loads" when the session is created and one run returns the input (Identity) or
``np.eye(3)`` (EyeLike). The venvs are only for this measurement; delete ``--out`` after.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import onnx
from onnx import TensorProto, helper

HERE = Path(__file__).resolve().parent
DEFAULT_VERSIONS = (
    "1.15.1,1.16.3,1.17.3,1.18.1,1.19.2,1.20.1,1.21.1,1.22.1,1.23.2,1.24.4,"
    "1.25.1,1.26.0,1.27.0,1.28.0,1.29.0,1.30.0,1.31.1,1.32.0"
)
OPSET_IR = 8  # the IR version of the opset models: every release measured loads it
IR_OPSET = 13  # the opset of the IR models: every release measured loads it

# Run inside each throwaway venv: it has only onnxruntime and numpy.
WORKER = r"""
import json, sys
import numpy as np
import onnxruntime as ort
out = {"version": ort.__version__, "models": {}}
x = np.arange(9, dtype=np.float32).reshape(3, 3)
for path in sys.argv[1:]:
    name = path.rsplit("/", 1)[-1]
    try:
        so = ort.SessionOptions()
        so.log_severity_level = 3
        s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        (y,) = s.run(None, {"x": x})
        want = np.eye(3, dtype=np.float32) if "eyelike" in name else x
        out["models"][name] = "ok" if np.array_equal(y, want) else "wrong"
    except Exception as e:
        out["models"][name] = "error: " + str(e).splitlines()[0][:300]
print(json.dumps(out))
"""


def _model(op: str, opset: int, ir_version: int) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 3])
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version
    return model


def write_models(out: Path) -> list[Path]:
    """The opset series (IR fixed) and the IR series (opset fixed)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for opset in range(18, onnx.defs.onnx_opset_version() + 1):
        for op in ("Identity", "EyeLike"):
            path = out / f"opset{opset}_{op.lower()}.onnx"
            onnx.save(_model(op, opset, OPSET_IR), path)
            paths.append(path)
    for ir_version in range(OPSET_IR, onnx.IR_VERSION + 1):
        path = out / f"ir{ir_version}_identity.onnx"
        onnx.save(_model("Identity", IR_OPSET, ir_version), path)
        paths.append(path)
    return paths


def measure(version: str, venvs: Path, python: str, models: list[Path]) -> dict:
    """Install onnxruntime==version in its own venv and run the worker there."""
    venv = venvs / f"ort-{version}"
    pip = venv / "bin" / "pip"
    if not (venv / "bin" / "python").exists():
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        minor = int(version.split(".")[1])
        numpy = "numpy<2" if minor < 19 else "numpy"
        subprocess.run(
            [str(pip), "install", "-q", f"onnxruntime=={version}", numpy], check=True
        )
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", WORKER, *map(str, models)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def newest(result: dict, prefix: str, suffix: str) -> tuple[int | None, str | None]:
    """The newest N whose model PREFIX{N}SUFFIX ran, all below it too; the first error."""
    series = {
        int(name[len(prefix) : -len(suffix)]): (name, outcome)
        for name, outcome in result["models"].items()
        if name.startswith(prefix) and name.endswith(suffix)
    }
    best = None
    for number in sorted(series):
        name, outcome = series[number]
        if outcome != "ok":
            return best, f"{name}: {outcome}"
        best = number
    return best, None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE / "out" / "versions")
    parser.add_argument("--versions", default=DEFAULT_VERSIONS)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    models = write_models(args.out / "models")
    results = []
    print("| onnxruntime | newest opset (Identity) | newest opset (EyeLike) | newest IR |")
    print("|---|---|---|---|")
    for version in args.versions.split(","):
        result = measure(version, args.out, args.python, models)
        results.append(result)
        opset_id, error_id = newest(result, "opset", "_identity.onnx")
        opset_eye, error_eye = newest(result, "opset", "_eyelike.onnx")
        ir, error_ir = newest(result, "ir", "_identity.onnx")
        print(f"| {version} | {opset_id} | {opset_eye} | {ir} |", flush=True)
        for error in (error_id, error_eye, error_ir):
            if error:
                print(f"    {error}", file=sys.stderr)
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
