"""The status line says what happened: PASSED only after a check that ran and passed.

Run as users run it (``python -m eyefold ...``); what the line claims about a runtime is
checked against that runtime itself, by loading the output in it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.cli import run_eyefold as run

SAMPLES = Path(__file__).resolve().parents[2] / "sample_models"
MOSSFORMER = SAMPLES / "real" / "mossformer_op13.onnx"




def _optimize(tmp_path: Path, source: Path, *args: str) -> tuple[str, dict]:
    """Runs optimize; the summary's last line and the JSON report."""
    output, report = tmp_path / "o.onnx", tmp_path / "r.json"
    done = run("optimize", str(source), str(output), "--report", str(report), *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[-1], json.loads(report.read_text())


def _onnxruntime_loads(path: Path) -> bool:
    import onnxruntime

    try:
        onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception:  # onnxruntime's own exception types
        return False
    return True


def test_a_run_without_check_says_written_never_passed(tmp_path: Path) -> None:
    line, report = _optimize(tmp_path, SAMPLES / "static_matmul.onnx")
    assert line.startswith(f"WRITTEN {tmp_path / 'o.onnx'} (not checked; --check runs both")
    assert "PASSED" not in line
    assert line.split(" | ")[1].startswith("Runtime: ")
    assert line.split(" | ")[2].startswith("Command: eyefold optimize ")
    assert report["verdict"]["result"] == "WRITTEN"
    assert report["verdict"]["checked"] is False and "check" not in report


def test_a_run_with_check_says_passed(tmp_path: Path) -> None:
    line, report = _optimize(tmp_path, SAMPLES / "static_matmul.onnx", "--check")
    assert line.startswith("PASSED | Runtime: ")
    assert report["verdict"]["result"] == "PASSED" and report["verdict"]["checked"] is True


@pytest.mark.slow
def test_an_eyelike_the_runtime_cannot_run_is_in_the_status(tmp_path: Path) -> None:
    """mossformer_op13 (onnxruntime #24441): a BOOL EyeLike onnxruntime has no kernel for."""
    pytest.importorskip("onnxruntime")
    import onnxruntime

    line, report = _optimize(tmp_path, MOSSFORMER)
    assert not _onnxruntime_loads(tmp_path / "o.onnx")  # the claim is true
    assert line.startswith(
        f"WRITTEN {tmp_path / 'o.onnx'}, 1 EyeLike node cannot run on onnxruntime"
        f" {onnxruntime.__version__} (use --target-runtime onnxruntime); not checked"
    )
    assert report["verdict"]["unrunnable"] == 1 and not report["verdict"]["checked"]

    # The check passes (onnxruntime runs both with that EyeLike lowered), but the output
    # still does not load there: the status says both.
    line, report = _optimize(tmp_path, MOSSFORMER, "--check")
    assert line.startswith("PASSED, but 1 EyeLike node cannot run on onnxruntime")
    assert report["verdict"]["checked"] and report["verdict"]["unrunnable"] == 1

    # The option the line names makes it run, and the line says nothing more.
    line, report = _optimize(tmp_path, MOSSFORMER, "--target-runtime", "onnxruntime")
    assert _onnxruntime_loads(tmp_path / "o.onnx")
    assert line.startswith(f"WRITTEN {tmp_path / 'o.onnx'} (not checked;")
    assert report["verdict"]["unrunnable"] == 0


def _batch(tmp_path: Path, *args: str) -> tuple[list[str], dict]:
    out, report = tmp_path / "out", tmp_path / "batch.json"
    inputs = [str(SAMPLES / "static_matmul.onnx"), str(MOSSFORMER)]
    done = run("optimize", *inputs, "--output-dir", str(out), "--report", str(report), *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines(), json.loads(report.read_text())


@pytest.mark.slow
def test_batch_rows_and_total_say_whether_a_check_ran(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    lines, report = _batch(tmp_path)
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:-1]}
    assert rows[str(SAMPLES / "static_matmul.onnx")][0] == "written"
    assert rows[str(MOSSFORMER)][:4] == ["written,", "1", "EyeLike", "cannot"]
    total = lines[-1]
    assert total.startswith("WRITTEN (not checked; --check runs both models) | 2 models")
    assert "| 1 EyeLike node cannot run on onnxruntime" in total
    assert [m["status"] for m in report["models"]] == ["ok", "ok"]  # the run's outcome
    assert [m["verdict"]["checked"] for m in report["models"]] == [False, False]

    lines, report = _batch(tmp_path, "--check")
    assert [line.split()[1] for line in lines[1:-1]] == ["passed", "passed,"]
    assert lines[-1].startswith("PASSED | 2 models: 2 ok, 0 failed")
    assert [m["verdict"]["checked"] for m in report["models"]] == [True, True]
