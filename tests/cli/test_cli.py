"""The eyefold command line, run as users run it: ``python -m eyefold ...`` in a subprocess."""

from __future__ import annotations

import collections
import contextlib
import hashlib
import io
import json
import os
import pty
import select
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import eyefold
from eyefold import kernel, optimize_with_report
from eyefold.cli import main
from eyefold.model_files import load_model

SAMPLES = Path(__file__).resolve().parents[2] / "sample_models"
SAMPLE_NAMES = sorted(p.name for p in SAMPLES.glob("*.onnx"))
ACTIONS = {"folded", "inferred", "kept"}
DTYPE_NAMES = {
    "BFLOAT16", "BOOL", "DOUBLE", "FLOAT", "FLOAT16", "INT8", "INT16", "INT32", "INT64",
    "UINT8", "UINT16", "UINT32", "UINT64",
}  # fmt: skip


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eyefold", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, "NO_COLOR": ""},
    )


def cli(*args: str) -> tuple[int, str, str]:
    """``main(args)`` in this process (fast; for option semantics): status, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(list(args))
        except SystemExit as exit_:  # argparse's usage errors
            status = int(exit_.code or 0)
    return status, out.getvalue(), err.getvalue()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def listing(folder: Path) -> dict[str, str]:
    return {p.name: digest(p) for p in sorted(folder.iterdir()) if p.is_file()}


def _graph_nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    nodes = []
    for node in graph.node:
        nodes.append(node)
        for attr in node.attribute:
            for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
                nodes.extend(_graph_nodes(sub))
    return nodes


def proto_op_counts(path: Path) -> dict[str, int]:
    """Op counts computed with onnx alone, to compare with what eyefold reports."""
    model = onnx.load(str(path), load_external_data=False)
    nodes = _graph_nodes(model.graph)
    for function in model.functions:
        for node in function.node:
            nodes.append(node)
    counts = collections.Counter(
        n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}" for n in nodes
    )
    return dict(counts)


def assert_report_schema(report: dict[str, Any]) -> None:
    """The contract of DESIGN.md: these keys and types; more keys are allowed."""
    assert set(report["opset"]) >= {"before", "after"}
    assert all(isinstance(report["opset"][k], int) for k in ("before", "after"))
    counts = report["eyelike"]
    assert set(counts) >= {"total", "folded", "inferred", "kept"}
    assert all(isinstance(v, int) and v >= 0 for v in counts.values())
    assert counts["total"] == counts["folded"] + counts["inferred"] + counts["kept"]
    assert counts["total"] == len(report["nodes"])
    for node in report["nodes"]:
        assert set(node) >= {
            "name",
            "graph",
            "action",
            "reason",
            "shape",
            "dtype",
            "k",
            "bytes",
        }
        assert isinstance(node["name"], str) and isinstance(node["graph"], str)
        assert node["action"] in ACTIONS
        assert isinstance(node["reason"], str) and node["reason"]
        assert node["shape"] is None or all(
            d is None or isinstance(d, (int, str)) for d in node["shape"]
        )
        assert node["dtype"] is None or node["dtype"] in DTYPE_NAMES
        assert isinstance(node["k"], int)
        assert node["bytes"] is None or isinstance(node["bytes"], int)
    assert counts["folded"] == sum(n["action"] == "folded" for n in report["nodes"])


# --- entry points, help, version ------------------------------------------------------


def test_version() -> None:
    result = run("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"eyefold {eyefold.__version__}"


@pytest.mark.parametrize(
    "args",
    [["optimize", "--help"], ["inspect", "--help"]],
    ids=["optimize", "inspect"],
)
def test_python_m_is_the_eyefold_script(args: list[str]) -> None:
    script = Path(sys.executable).with_name("eyefold")
    if not script.exists():
        pytest.skip("the eyefold script is not installed beside this interpreter")
    via_script = subprocess.run(
        [str(script), *args], capture_output=True, text=True, timeout=60
    )
    via_module = run(*args)
    assert via_module.returncode == via_script.returncode == 0
    assert via_module.stdout == via_script.stdout
    assert via_module.stdout.startswith("usage: eyefold")


def test_help_lists_every_flag_with_examples() -> None:
    status, text, _ = cli("optimize", "--help")
    assert status == 0
    for flag in (
        "--target-opset", "--no-upgrade", "--no-fold", "--size-limit", "--input-shape",
        "--report", "--quiet", "--check", "--external-data",
    ):  # fmt: skip
        assert flag in text
    assert "examples:" in text and "eyefold optimize model.onnx" in text
    assert "--json" in cli("inspect", "--help")[1]
    assert "examples:" in cli("--help")[1]


# --- optimize on every sample ---------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", SAMPLE_NAMES, ids=lambda n: n[:-5])
def test_optimize_sample_with_check_and_report(tmp_path: Path, name: str) -> None:
    source = tmp_path / name
    shutil.copy(SAMPLES / name, source)
    before = digest(source)
    output, report_path = tmp_path / "out.onnx", tmp_path / "report.json"
    result = run("optimize", str(source), str(output), "--check", "--report", str(report_path))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # no progress lines: stderr is not a terminal
    assert digest(source) == before
    report = json.loads(report_path.read_text())
    assert_report_schema(report)

    eyelike_in = proto_op_counts(source).get("EyeLike", 0)
    eyelike_out = proto_op_counts(output).get("EyeLike", 0)
    assert report["eyelike"]["total"] == eyelike_in
    assert report["ops"]["before"] == proto_op_counts(source)
    assert report["ops"]["after"] == proto_op_counts(output)
    # A folded EyeLike leaves the graph (in functions it becomes a Constant node).
    assert eyelike_in - eyelike_out == report["eyelike"]["folded"]
    assert report["model_bytes"] == {
        "before": source.stat().st_size,
        "after": output.stat().st_size,
    }
    assert report["opset"]["after"] == onnx.load(str(output)).opset_import[0].version
    steps = [s["name"] for s in report["steps"]]
    assert steps[0] == "load" and steps[-2:] == ["check", "save"]
    assert all(isinstance(s["seconds"], float) and s["seconds"] >= 0 for s in report["steps"])
    assert report["check"]["backend"] in ("onnxruntime", "onnx.reference")

    # The human summary: plain text on a pipe, a before/after table and a status line.
    assert "\x1b[" not in result.stdout
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["before", "after"]
    assert any(
        line.split()[:1] == ["model", "bytes"] or "model bytes" in line for line in lines
    )
    assert lines[-1].startswith("PASSED | Runtime: ")
    assert f"{report['eyelike']['folded']} folded" in result.stdout
    onnx.checker.check_model(onnx.load(str(output)), full_check=True)


@pytest.mark.slow
def test_optimize_is_deterministic_and_idempotent(tmp_path: Path) -> None:
    source = SAMPLES / "torch_eye_chain.onnx"
    first, second = tmp_path / "a.onnx", tmp_path / "b.onnx"
    assert run("optimize", str(source), str(first), "-q").returncode == 0
    assert run("optimize", str(source), str(second), "-q").returncode == 0
    assert digest(first) == digest(second)
    again = tmp_path / "c.onnx"
    assert run("optimize", str(first), str(again), "-q").returncode == 0
    assert digest(again) == digest(first)


@pytest.mark.slow
def test_output_equal_to_input_in_place(tmp_path: Path) -> None:
    model = tmp_path / "m.onnx"
    shutil.copy(SAMPLES / "static_matmul.onnx", model)
    result = run("optimize", str(model), str(model), "--check", "-q")
    assert result.returncode == 0, result.stderr
    assert proto_op_counts(model).get("EyeLike", 0) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]  # no temporary left


# --- single flags ---------------------------------------------------------------------


def _report_of(tmp_path: Path, *args: str, sample: str = "static_matmul.onnx") -> dict:
    report_path = tmp_path / "r.json"
    status, _, err = cli(
        "optimize", str(SAMPLES / sample), str(tmp_path / "o.onnx"), "-q",
        "--report", str(report_path), *args,
    )  # fmt: skip
    assert status == 0, err
    report = json.loads(report_path.read_text())
    assert_report_schema(report)
    return report


@pytest.mark.parametrize(
    ("args", "actions"),
    [
        ([], ["folded", "folded"]),
        (["--no-fold"], ["inferred", "inferred"]),
        (["--size-limit", "64"], ["folded", "folded"]),  # 4x4 float32 is 64 bytes
        (["--size-limit", "63"], ["inferred", "inferred"]),
        (["--size-limit", "1K"], ["folded", "folded"]),
    ],
    ids=["default", "no-fold", "limit-at-size", "limit-below-size", "limit-suffix"],
)
def test_fold_flags(tmp_path: Path, args: list[str], actions: list[str]) -> None:
    report = _report_of(tmp_path, *args)
    assert [n["action"] for n in report["nodes"]] == actions
    assert proto_op_counts(tmp_path / "o.onnx").get("EyeLike", 0) == actions.count("inferred")


@pytest.mark.parametrize(
    ("args", "opset_after"),
    [([], 22), (["--no-upgrade"], 17), (["--target-opset", "21"], 21)],
    ids=["default-upgrade", "no-upgrade", "target-21"],
)
def test_opset_flags(tmp_path: Path, args: list[str], opset_after: int) -> None:
    report = _report_of(tmp_path, *args, sample="torch_eye_chain.onnx")
    assert report["opset"] == {"before": 17, "after": opset_after}
    model = onnx.load(str(tmp_path / "o.onnx"))
    assert {o.domain: o.version for o in model.opset_import}[""] == opset_after


def test_target_opset_never_lowers(tmp_path: Path) -> None:
    report = _report_of(tmp_path, "--target-opset", "13")
    assert report["opset"] == {"before": 22, "after": 22}


def test_input_shape_folds_a_dynamic_eyelike(tmp_path: Path) -> None:
    dynamic = _report_of(tmp_path, sample="dynamic_batch.onnx")
    assert [n["action"] for n in dynamic["nodes"]] == ["inferred"]
    pinned = _report_of(
        tmp_path, "--input-shape", "x:3,6", "--check", sample="dynamic_batch.onnx"
    )
    assert [n["action"] for n in pinned["nodes"]] == ["folded"]
    assert pinned["nodes"][0]["shape"] == [3, 6]
    assert pinned["check"]["inputs"] == {"x": [3, 6]}
    output = onnx.load(str(tmp_path / "o.onnx"))
    dims = [d.dim_value for d in output.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [3, 6]


def test_check_defaults_symbolic_dims_and_says_so(tmp_path: Path) -> None:
    report = _report_of(tmp_path, "--check", sample="dynamic_batch.onnx")
    assert report["check"]["defaulted_dims"] == {"batch": report["check"]["inputs"]["x"][0]}
    _, out, _ = cli("optimize", str(SAMPLES / "dynamic_batch.onnx"), str(tmp_path / "p.onnx"),
                    "--check")  # fmt: skip
    assert "symbolic dims at batch=2 then batch=3 (choose with --check-shape)" in out


def test_quiet_prints_nothing(tmp_path: Path) -> None:
    quiet = cli(
        "optimize", str(SAMPLES / "static_matmul.onnx"), str(tmp_path / "o.onnx"), "-q"
    )
    assert quiet == (0, "", "")
    _, loud, _ = cli("optimize", str(SAMPLES / "static_matmul.onnx"), str(tmp_path / "o.onnx"))
    assert "WRITTEN" in loud and "PASSED" not in loud  # nothing was checked


def test_external_data_flag(tmp_path: Path) -> None:
    output = tmp_path / "o.onnx"
    report = _report_of(tmp_path, "--external-data", sample="paddle_zeros.onnx")
    data = tmp_path / "o.onnx.data"
    assert data.exists() and report["output"]["data_path"] == str(data)
    assert report["model_bytes"]["after"] == output.stat().st_size + data.stat().st_size
    model = onnx.load(str(output))  # loads the data too
    eye = next(t for t in model.graph.initializer if t.name == "eye")
    np.testing.assert_array_equal(
        onnx.numpy_helper.to_array(eye), np.eye(64, dtype=np.float32)
    )
    plain_dir = tmp_path / "plain"
    plain_dir.mkdir()
    status, _, _ = cli(
        "optimize", str(SAMPLES / "paddle_zeros.onnx"), str(plain_dir / "o.onnx")
    )
    assert status == 0 and sorted(os.listdir(plain_dir)) == ["o.onnx"]


def test_no_fold_with_size_limit_warns(tmp_path: Path) -> None:
    model, output = str(SAMPLES / "static_matmul.onnx"), str(tmp_path / "o.onnx")
    status, _, err = cli("optimize", model, output, "--no-fold", "--size-limit", "2K", "-q")
    assert status == 0
    assert "warning: --size-limit has no effect with --no-fold" in err
    assert cli("optimize", model, output, "--size-limit", "2K", "-q") == (0, "", "")


# --- inspect --------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", SAMPLE_NAMES, ids=lambda n: n[:-5])
def test_inspect_json_matches_optimize_and_writes_nothing(tmp_path: Path, name: str) -> None:
    shutil.copy(SAMPLES / name, tmp_path / name)
    before = listing(tmp_path)
    result = run("inspect", str(tmp_path / name), "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert listing(tmp_path) == before
    report = json.loads(result.stdout)
    assert_report_schema(report)
    assert report["eyelike"]["total"] == proto_op_counts(tmp_path / name).get("EyeLike", 0)
    optimized = optimize_with_report(load_model(SAMPLES / name)).report.to_dict()
    assert [(n["name"], n["graph"], n["action"], n["reason"]) for n in report["nodes"]] == [
        (n["name"], n["graph"], n["action"], n["reason"]) for n in optimized["nodes"]
    ]
    for node in report["nodes"]:
        assert {"input_dtype", "opset"} <= set(node)


def test_inspect_table_is_readable() -> None:
    result = run("inspect", str(SAMPLES / "dynamic_batch.onnx"))
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    header = next(line for line in lines if line.startswith("NODE"))
    for column in ("GRAPH", "INPUT", "OUTPUT", "K", "OPSET", "ACTION", "WHY"):
        assert column in header.split()
    row = lines[lines.index(header) + 1].split()
    assert row[:4] == ["eye", "main", "FLOAT[batch,6]", "FLOAT"]
    assert "inferred" in row and "dynamic" in result.stdout


def test_inspect_takes_input_shapes() -> None:
    status, out, _ = cli("inspect", str(SAMPLES / "dynamic_batch.onnx"), "--json")
    assert status == 0 and json.loads(out)["eyelike"]["inferred"] == 1
    status, out, _ = cli(
        "inspect", str(SAMPLES / "dynamic_batch.onnx"), "--json", "--input-shape", "x:5,6"
    )
    (node,) = json.loads(out)["nodes"]
    assert status == 0 and node["action"] == "folded" and node["shape"] == [5, 6]
    assert cli("inspect", str(SAMPLES / "dynamic_batch.onnx"), "--input-shape", "q:1")[0] == 2


HUGE = """
<ir_version: 10, opset_import: ["" : 22]>
g (float[1099511627776, 1099511627776] x) => (float[1099511627776, 1099511627776] y) {
    y = EyeLike <k = 5> (x)
}
"""


@pytest.mark.slow
def test_inspect_huge_declared_shape_is_reported_not_allocated(tmp_path: Path) -> None:
    path = tmp_path / "huge.onnx"
    onnx.save(onnx.parser.parse_model(HUGE), str(path))
    result = subprocess.run(
        [sys.executable, "-m", "eyefold", "inspect", str(path), "--json"],
        capture_output=True, text=True, timeout=20,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (node,) = json.loads(result.stdout)["nodes"]
    assert node["action"] == "inferred" and node["bytes"] == (1 << 40) * (1 << 40) * 4
    assert "size limit" in node["reason"]
    # --check cannot feed it: a clear error, no output.
    failed = run("optimize", str(path), str(tmp_path / "o.onnx"), "--check")
    assert failed.returncode == 1 and "random inputs" in failed.stderr
    assert not (tmp_path / "o.onnx").exists()


# --- errors ---------------------------------------------------------------------------


def _bad_inputs(tmp_path: Path) -> dict[str, Path]:
    good = (SAMPLES / "paddle_zeros.onnx").read_bytes()
    (tmp_path / "garbage.onnx").write_bytes(b"definitely not a model \x00\xff" * 10)
    (tmp_path / "truncated.onnx").write_bytes(good[: len(good) // 2])
    return {
        "missing": tmp_path / "missing.onnx",
        "garbage": tmp_path / "garbage.onnx",
        "truncated": tmp_path / "truncated.onnx",
        "good": SAMPLES / "dynamic_batch.onnx",
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    ("source", "extra", "status", "message"),
    [
        ("missing", [], 1, "no such file"),
        ("garbage", [], 1, "not an ONNX model"),
        ("truncated", [], 1, "eyefold: error:"),
        ("good", ["--size-limit", "12Q"], 2, "not a byte size"),
        ("good", ["--size-limit", "-5"], 2, "not a byte size"),
        ("good", ["--input-shape", "nope:3,6"], 2, "no graph input 'nope'"),
        ("good", ["--input-shape", "x:3"], 2, "rank 2"),
        ("good", ["--input-shape", "x3,6"], 2, "expected NAME:D0,D1"),
        ("good", ["--target-opset", "99"], 2, "target_opset 99"),
    ],
    ids=[
        "missing-file",
        "non-onnx",
        "truncated",
        "bad-size-suffix",
        "negative-size",
        "unknown-input-name",
        "rank-mismatch",
        "input-shape-syntax",
        "opset-out-of-range",
    ],
)
def test_error_paths(
    tmp_path: Path, source: str, extra: list[str], status: int, message: str
) -> None:
    inputs = _bad_inputs(tmp_path)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    before = {k: digest(p) for k, p in inputs.items() if p.exists()}
    result = run("optimize", str(inputs[source]), str(out_dir / "o.onnx"), *extra)
    assert result.returncode == status, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    if status == 1:
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("eyefold: error: ")
    assert os.listdir(out_dir) == []
    assert {k: digest(p) for k, p in inputs.items() if p.exists()} == before


def test_missing_output_folder_is_an_error_before_any_work(tmp_path: Path) -> None:
    status, _, err = cli(
        "optimize", str(SAMPLES / "static_matmul.onnx"), str(tmp_path / "no/o")
    )
    assert status == 1 and "does not exist" in err


def test_verbose_shows_the_traceback(tmp_path: Path) -> None:
    plain = cli("optimize", str(tmp_path / "missing.onnx"), str(tmp_path / "o.onnx"))
    verbose = cli("-v", "optimize", str(tmp_path / "missing.onnx"), str(tmp_path / "o.onnx"))
    assert "Traceback" not in plain[2] and "Traceback" in verbose[2]
    assert plain[0] == verbose[0] == 1


# --- --check catches a broken result --------------------------------------------------


def _wrong_eye(rows: int, cols: int, k: int = 0, dtype: Any = None, **kw: Any) -> np.ndarray:
    """The kernel with an off-by-one diagonal: what a kernel bug would look like."""
    return original_eye(rows, cols, k + 1, dtype, **kw)


original_eye = kernel.eye


@pytest.mark.parametrize(
    "name", ["static_matmul.onnx", "bool_mask.onnx"], ids=["onnxruntime", "reference"]
)
def test_check_failure_writes_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
) -> None:
    model = tmp_path / name
    shutil.copy(SAMPLES / name, model)
    before = digest(model)
    output = tmp_path / "o.onnx"
    assert main(["optimize", str(model), str(output), "--check", "-q"]) == 0
    assert output.exists()
    output.unlink()
    capsys.readouterr()

    monkeypatch.setattr(kernel, "eye", _wrong_eye)
    assert main(["optimize", str(model), str(output), "--check"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("eyefold: error: --check failed: output")
    assert not output.exists()
    # In place too: the input survives a failed check untouched.
    assert (
        main(["optimize", str(model), str(model), "--check", "--report", str(tmp_path / "r")])
        == 1
    )
    assert digest(model) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
    # Without --check the broken fold would have been written: the check is what stops it.
    assert main(["optimize", str(model), str(output), "-q"]) == 0


# --- opset upgrades -------------------------------------------------------------------


def default_opset(path: Path) -> int:
    """The default-domain opset the model file at ``path`` imports."""
    model = onnx.load(str(path))
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


@pytest.mark.slow
def test_cli_upgrade_failure_exits_1_and_writes_nothing(
    tmp_path: Path, upgrade_models: ModuleType
) -> None:
    source = tmp_path / "bad.onnx"
    onnx.save(upgrade_models.unsqueeze_with_axes_attribute_at_13(), source)
    out = tmp_path / "out.onnx"
    completed = run("optimize", str(source), str(out))
    assert completed.returncode == 1
    assert completed.stderr.startswith("eyefold: error: ")
    assert "the model is invalid at opset 13 at op Unsqueeze" in completed.stderr
    assert "Traceback" not in completed.stderr and completed.stderr.count("\n") == 1
    assert not out.exists()
    # With --no-upgrade the opset is kept and nothing needs converting.
    kept = run("optimize", str(source), str(out), "--no-upgrade", "-q")
    assert kept.returncode == 0, kept.stderr
    assert default_opset(out) == 13


@pytest.mark.slow
def test_eyelike_with_dtype_on_an_untyped_input_does_not_crash_onnx(
    tmp_path: Path, upgrade_models: ModuleType
) -> None:
    # onnx's shape inference (which its converter and checker run) segfaults on such an
    # EyeLike; the upgrade hands onnx placeholders only. A subprocess shows a crash as -11.
    nodes = [
        helper.make_node("Opaque", ["x"], ["u"], domain="pkg.custom"),
        helper.make_node("EyeLike", ["u"], ["y"], dtype=TensorProto.FLOAT),
    ]
    float_info = upgrade_models.float_info
    graph = helper.make_graph(
        nodes, "untyped", [float_info("x", [3, 3])], [float_info("y", [3, 3])]
    )
    opsets = [helper.make_opsetid("", 11), helper.make_opsetid("pkg.custom", 1)]
    source = tmp_path / "untyped.onnx"
    onnx.save(helper.make_model(graph, opset_imports=opsets), source)
    out = tmp_path / "out.onnx"
    completed = run("optimize", str(source), str(out), "-q")
    assert completed.returncode == 0, completed.stderr
    upgraded = onnx.load(out)
    assert default_opset(out) == 22
    (eye,) = [n for n in upgraded.graph.node if n.op_type == "EyeLike"]
    assert helper.get_attribute_value(eye.attribute[0]) == TensorProto.FLOAT
    kept = run("optimize", str(source), str(out), "-q", "--no-upgrade")
    assert kept.returncode == 0, kept.stderr
    assert default_opset(out) == 11


def test_cli_target_opset_and_report(tmp_path: Path, upgrade_models: ModuleType) -> None:
    source = tmp_path / "chain.onnx"
    onnx.save(upgrade_models.torch_eye_chain(9), source)
    out, report = tmp_path / "out.onnx", tmp_path / "report.json"
    assert main(["optimize", str(source), str(out), "--target-opset", "21",
                 "--report", str(report), "-q"]) == 0  # fmt: skip
    data = json.loads(report.read_text())
    assert data["opset"] == {"before": 9, "after": 21}
    assert data["eyelike"]["folded"] == 1
    assert default_opset(out) == 21


# --- terminals: colour and progress ---------------------------------------------------


@pytest.mark.slow
def test_terminal_gets_colour_and_progress(tmp_path: Path) -> None:
    primary, secondary = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    process = subprocess.Popen(
        [sys.executable, "-m", "eyefold", "optimize", str(SAMPLES / "static_matmul.onnx"),
         str(tmp_path / "o.onnx"), "--check"],
        stdout=secondary, stderr=secondary, env=env,
    )  # fmt: skip
    os.close(secondary)
    chunks = []
    while True:
        ready, _, _ = select.select([primary], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(primary)
    text = b"".join(chunks).decode()
    assert process.wait(timeout=60) == 0, text
    assert "loading " in text and "checking the result" in text and "saving " in text
    assert "\x1b[1;32m" in text  # the EyeLike count went down: highlighted
