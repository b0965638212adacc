"""A batch outlives its workers: a worker killed under a model (a segfault in onnx's C++,
the OOM killer) fails that model alone, and a fresh worker takes the rest."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import eyefold

SAMPLES = Path(__file__).resolve().parents[2] / "sample_models"
RUNNER = Path(__file__).resolve().parents[1] / "helpers" / "kill_worker_runner.py"
MODELS = ("torch_eye_chain.onnx", "bool_mask.onnx", "static_matmul.onnx")


@pytest.mark.slow
def test_a_killed_worker_fails_only_the_model_it_held(tmp_path: Path) -> None:
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    for number in range(12):
        shutil.copy(SAMPLES / MODELS[number % 3], zoo / f"m{number:02}.onnx")
    alone = {
        Path(r.input).name: r.output for r in eyefold.optimize_files([zoo], tmp_path / "a")
    }
    out, report = tmp_path / "out", tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, str(RUNNER), "optimize", str(zoo), "--output-dir", str(out),
         "-j", "2", "--report", str(report)],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "EYEFOLD_TEST_KILL_ON": "m03.onnx,m08.onnx"},
    )  # fmt: skip
    assert done.returncode == 1
    assert sorted(done.stderr.splitlines()) == [
        f"eyefold: error: {zoo / name}: worker died (SIGKILL) while optimizing {zoo / name}"
        for name in ("m03.onnx", "m08.onnx")
    ]
    written = sorted(path.name for path in out.glob("*.onnx"))
    assert written == sorted(set(alone) - {"m03.onnx", "m08.onnx"})
    for name in written:
        assert (out / name).read_bytes() == Path(alone[name]).read_bytes()
    assert done.stdout.splitlines()[-1].startswith("FAILED | 12 models: 10 ok, 2 failed")
    # The lost models' outputs are not claimed: another input may still take the names.
    claims = sorted(path.name for path in out.glob(".*.eyefold-source"))
    assert claims == [f".{name}.eyefold-source" for name in written]
    entries = json.loads(report.read_text(encoding="utf-8"))["models"]
    assert [Path(e["path"]).name for e in entries] == sorted(alone)
    assert [e["status"] for e in entries].count("failed") == 2
