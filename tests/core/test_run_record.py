"""The report is built once per run, from the one record every part of the run appends to."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import onnx_ir as ir
import pytest

import eyefold
import eyefold._optimize
import eyefold.pipeline
import eyefold.report
from eyefold.cli import main
from eyefold.run_record import RunRecord, Stage, StepEntry

ROOT = Path(__file__).resolve().parents[2]
CHAIN = ROOT / "sample_models" / "torch_eye_chain.onnx"
DYNAMIC = ROOT / "sample_models" / "dynamic_batch.onnx"


@pytest.fixture
def builds(monkeypatch) -> list[RunRecord]:
    """Every record a report is built from, wherever the builder is imported."""
    calls: list[RunRecord] = []
    real = eyefold.report.build_report

    def counting(record: RunRecord) -> eyefold.report.Report:
        calls.append(record)
        return real(record)

    monkeypatch.setattr(eyefold.report, "build_report", counting)
    for module in (eyefold._optimize, eyefold.pipeline):
        monkeypatch.setattr(module, "build_report", counting)
    return calls


@pytest.mark.parametrize(
    ("model", "options"),
    [(CHAIN, []), (CHAIN, ["--no-upgrade", "--check"]), (DYNAMIC, ["--input-shape", "x:3,6"])],
    ids=["neighbourhood", "checked", "whole-model"],
)
def test_the_command_line_builds_one_report(builds, tmp_path, model, options) -> None:
    report_path = tmp_path / "report.json"
    output = tmp_path / "out.onnx"
    args = ["optimize", str(model), str(output), "-q", "--report", str(report_path)]
    assert main([*args, *options]) == 0
    assert len(builds) == 1
    steps = [step["name"] for step in json.loads(report_path.read_text())["steps"]]
    assert steps[0] == "load" and steps[-1] == "save"


def test_the_library_builds_one_report(builds) -> None:
    eyefold.optimize_with_report(onnx.load(str(CHAIN)))
    eyefold.optimize_with_report(ir.load(str(CHAIN)))
    assert len(builds) == 2


def test_steps_are_listed_stage_by_stage() -> None:
    record = RunRecord()
    record.add(StepEntry("save", 0.1, Stage.WRITE))
    record.add(StepEntry("upgrade", 0.2, Stage.PIPELINE, modified=True))
    record.add(StepEntry("neighbourhood", 0.3, Stage.ROUTE))
    record.add(StepEntry("load", 0.4, Stage.READ))
    report = eyefold.report.build_report(record)
    assert [s.name for s in report.steps] == ["load", "neighbourhood", "upgrade", "save"]
    assert [s.modified for s in report.steps] == [False, False, True, False]
