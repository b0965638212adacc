"""Runtime versions in the result: which onnxruntime loads an upgraded output, the cap of
``--target-runtime onnxruntime`` to what the installed release loads, and the notes on the
target opset."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
from pathlib import Path

import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from eyefold.cli import main
from eyefold.passes import UpgradeOpsetPass
from eyefold.pipeline import Step, run_steps
from eyefold.runtime.installed import installed_version
from eyefold.runtime.versions import ONNXRUNTIME_LIMITS, onnxruntime_limits
from eyefold.upgrade.target import upgrade_target

SAMPLES = Path(__file__).resolve().parents[2] / "sample_models"
CHAIN = SAMPLES / "torch_eye_chain.onnx"  # opset 17, IR 8


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(args))
    return status, out.getvalue(), err.getvalue()


def _identity(opset: int, ir_version: int) -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version
    return model.SerializeToString()


def _loads(model: bytes) -> bool:
    try:
        ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    except Exception:  # onnxruntime raises its own Fail/InvalidGraph types
        return False
    return True


def test_an_upgrade_names_the_oldest_onnxruntime_that_loads_the_output(tmp_path: Path) -> None:
    # opset 22 at IR 10: onnxruntime 1.20 refuses opset 22 ("under development"), 1.21
    # loads it (measured with benchmarks/runtime_versions.py).
    output, report = tmp_path / "out.onnx", tmp_path / "report.json"
    status, out, _ = cli("optimize", str(CHAIN), str(output), "--report", str(report))
    assert status == 0
    assert "opset 17 -> 22, IR 8 -> 10: needs onnxruntime >= 1.21" in out.splitlines()
    loads_on = json.loads(report.read_text())["loads_on"]
    assert loads_on == {
        "opset": {"before": 17, "after": 22},
        "ir_version": {"before": 8, "after": 10},
        "onnxruntime": "1.21",
    }
    written = onnx.load(str(output))
    assert (written.opset_import[0].version, written.ir_version) == (22, 10)


def test_inspect_names_it_too() -> None:
    status, out, _ = cli("inspect", str(CHAIN))
    assert status == 0
    assert "opset 17 -> 22, IR 8 -> 10: needs onnxruntime >= 1.21" in out


def test_a_run_that_raises_nothing_names_no_runtime(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    status, out, _ = cli(
        "optimize",
        str(CHAIN),
        str(tmp_path / "o.onnx"),
        "--no-upgrade",
        "--report",
        str(report),
    )
    assert status == 0
    assert "needs onnxruntime" not in out
    assert "loads_on" not in json.loads(report.read_text())


def test_the_installed_onnxruntime_loads_what_its_row_says() -> None:
    """The table against the release installed here: its newest opset and IR version load,
    the next ones (where onnx can write them) do not."""
    version = installed_version("onnxruntime")
    assert version is not None
    limits = onnxruntime_limits(version)
    if limits is None:
        pytest.skip(f"onnxruntime {version} has no row in the table")
    max_opset, max_ir_version = limits
    assert _loads(_identity(max_opset, 8))
    assert _loads(_identity(13, max_ir_version))
    if max_opset < onnx.defs.onnx_opset_version():
        assert not _loads(_identity(max_opset + 1, 8))
    if max_ir_version < onnx.IR_VERSION:
        assert not _loads(_identity(13, max_ir_version + 1))


def test_the_table_is_ordered_and_never_loads_less_later() -> None:
    releases = list(ONNXRUNTIME_LIMITS)
    assert releases == sorted(releases)
    rows = list(ONNXRUNTIME_LIMITS.values())
    assert all(a[0] <= b[0] and a[1] <= b[1] for a, b in itertools.pairwise(rows))


@pytest.mark.parametrize(
    ("version", "opset", "capped"),
    [
        # 1.17 loads opset 20 and IR 9: opset 20 needs IR 9 only.
        ("1.17.3", 20, True),
        # 1.20 loads IR 10 but not opset 22.
        ("1.20.1", 21, True),
        ("1.21.1", 22, False),
        ("1.32.0", 22, False),
        # No figure for releases before the table: no cap rather than a guess.
        ("1.14.1", 22, False),
    ],
)
def test_the_cap_for_a_stated_onnxruntime_release(
    version: str, opset: int, capped: bool
) -> None:
    target = upgrade_target(22, "onnxruntime", version)
    assert target.opset == opset
    assert (target.limit is not None) == capped
    if capped:
        assert f"onnxruntime {version}" in target.limit


def test_only_onnxruntime_is_capped() -> None:
    assert upgrade_target(22, "openvino", "1.17.3").opset == 22
    assert upgrade_target(22, None, "1.17.3").opset == 22


def test_a_capped_upgrade_stops_at_the_cap_and_says_so() -> None:
    """The upgrade step with the target onnxruntime 1.17.3 gives (its cap): the model
    loads on that release, so it ends at opset 20 and IR 9, and the report says why."""
    model = ir.serde.deserialize_model(onnx.load(str(CHAIN)))
    target = upgrade_target(22, "onnxruntime", "1.17.3")
    result = run_steps(model, [Step("upgrade", UpgradeOpsetPass(target))])
    assert (model.opset_imports[""], model.ir_version) == (20, 9)
    assert result.report is not None
    (note,) = result.report.extra["notes"]
    assert note.startswith("target opset 22 capped to 20: the installed onnxruntime 1.17.3")


def test_the_installed_onnxruntime_caps_nothing_it_loads(tmp_path: Path) -> None:
    """A real run on the installed release (newer than 1.21): opset 22, no note."""
    output = tmp_path / "out.onnx"
    status, _, err = cli(
        "optimize", str(CHAIN), str(output), "--target-runtime", "onnxruntime", "-q"
    )
    assert status == 0
    assert "note" not in err
    assert onnx.load(str(output)).opset_import[0].version == 22
    assert _loads(output.read_bytes())


@pytest.mark.parametrize("command", ["optimize", "inspect"])
def test_a_target_opset_below_the_model_is_a_note(command: str, tmp_path: Path) -> None:
    model = SAMPLES / "dynamic_batch.onnx"  # opset 22
    paths = [str(model), str(tmp_path / "o.onnx")] if command == "optimize" else [str(model)]
    status, _, err = cli(command, *paths, "--target-opset", "15")
    assert status == 0
    assert err.splitlines() == [
        "eyefold: note: target opset 15 is below the model's opset 22: the model keeps"
        " opset 22 (the upgrade never lowers it)"
    ]


def test_a_target_opset_at_or_above_the_model_says_nothing(tmp_path: Path) -> None:
    status, _, err = cli(
        "optimize", str(SAMPLES / "dynamic_batch.onnx"), str(tmp_path / "o.onnx"), "-q"
    )
    assert status == 0
    assert err == ""


def test_batch_mode_notes_each_model_below_the_target(tmp_path: Path) -> None:
    status, _, err = cli(
        "optimize",
        str(SAMPLES / "dynamic_batch.onnx"),  # opset 22
        str(CHAIN),  # opset 17: raised to 18, no note
        "--output-dir",
        str(tmp_path / "out"),
        "--target-opset",
        "18",
        "-q",
    )
    assert status == 0
    assert err.splitlines() == [
        f"eyefold: note: {SAMPLES / 'dynamic_batch.onnx'}: target opset 18 is below the"
        " model's opset 22: the model keeps opset 22 (the upgrade never lowers it)"
    ]
    assert onnx.load(str(tmp_path / "out" / CHAIN.name)).opset_import[0].version == 18
