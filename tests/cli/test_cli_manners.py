"""What a user hits at once on the command line: a closed pipe, ``-v`` after the
subcommand, batch totals, how warnings and errors are spelled, what a lowering says."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import onnx
import onnx_ir as ir
import pytest

import eyefold
from eyefold import PipelineOptions
from eyefold.errors import EyefoldError
from eyefold.runtime.cache import cache_path
from eyefold.runtime.installed import installed_version

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_models"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eyefold", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [["rules"], ["inspect", str(SAMPLES / "dynamic_batch.onnx")]],
    ids=["rules", "inspect"],
)
def test_a_reader_that_stops_early_gets_no_traceback(args: list[str]) -> None:
    """``eyefold rules | head -3``: the reader is gone before eyefold writes (the read
    end is closed first, so every write fails, as it does once head has exited)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "eyefold", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait(timeout=120) == 141  # 128 + SIGPIPE, as the shell reports it
    assert err == ""


@pytest.mark.slow
def test_head_of_rules_in_a_shell_pipeline() -> None:
    shell = shutil.which("sh")
    if shell is None:
        pytest.skip("no sh")
    command = f"{sys.executable} -m eyefold rules | head -3"
    done = subprocess.run([shell, "-c", command], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0
    assert len(done.stdout.splitlines()) == 3
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("where", ["before", "after"])
def test_verbose_works_after_the_subcommand_as_before_it(where: str, tmp_path: Path) -> None:
    paths = [str(SAMPLES / "torch_eye_chain.onnx"), str(tmp_path / "out.onnx")]
    args = ["-v", "optimize", *paths] if where == "before" else ["optimize", *paths, "-v"]
    done = run(*args, "-q")
    assert done.returncode == 0, done.stderr
    assert "eyefold: info: EyeLike nodes folded: 1" in done.stderr.splitlines()


@pytest.mark.slow
def test_without_verbose_nothing_is_logged(tmp_path: Path) -> None:
    done = run(
        "optimize", str(SAMPLES / "torch_eye_chain.onnx"), str(tmp_path / "o.onnx"), "-q"
    )
    assert done.returncode == 0 and done.stderr == ""


def _chain_with_removed(path: Path) -> None:
    """EyeLike(EyeLike(x)): the outer folds; the inner only fed it and is removed."""
    text = """<ir_version: 10, opset_import: ["" : 22]>
    g (float[3, 3] x) => (float[3, 3] y) { a = EyeLike (x)  y = EyeLike <k = 1> (a) }"""
    onnx.save(ir.to_proto(ir.from_onnx_text(text)), path)


@pytest.mark.slow
def test_batch_totals_add_up_with_a_removed_column(tmp_path: Path) -> None:
    models = tmp_path / "in"
    models.mkdir()
    _chain_with_removed(models / "chain.onnx")
    shutil.copy(SAMPLES / "torch_eye_chain.onnx", models / "torch_eye_chain.onnx")
    report = tmp_path / "report.json"
    done = run(
        "optimize", str(models), "--output-dir", str(tmp_path / "out"), "--report", str(report)
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == [
        "MODEL", "STATUS", "FOLDED", "INFERRED", "KEPT", "REMOVED", "OPSET", "SECONDS"
    ]  # fmt: skip
    chain_row = next(line for line in lines if "chain.onnx" in line and "torch" not in line)
    assert chain_row.split()[2:6] == ["1", "0", "0", "1"]  # folded, inferred, kept, removed
    assert "EyeLike: 3 found, 2 folded, 0 inferred, 0 kept, 1 removed" in lines[-1]
    totals = json.loads(report.read_text())["total"]["eyelike"]
    assert totals == {"total": 3, "folded": 2, "inferred": 0, "kept": 0, "removed": 1}
    assert totals["total"] == sum(v for k, v in totals.items() if k != "total")


@pytest.mark.slow
@pytest.mark.parametrize("batch", [False, True], ids=["one-model", "two-workers"])
def test_warnings_print_as_eyefold_warning_lines(batch: bool, tmp_path: Path) -> None:
    """An unreadable runtime-support cache file is a warning (the run goes on), in the
    process itself and in batch mode's spawned workers."""
    version = installed_version("onnxruntime")
    assert version is not None
    env = {"EYEFOLD_CACHE_DIR": str(tmp_path / "cache")}
    target = tmp_path / "cache" / cache_path("onnxruntime", version).name
    target.parent.mkdir(parents=True)
    target.write_text("{not json", encoding="utf-8")
    model = SAMPLES / "dynamic_batch.onnx"
    if batch:
        models = tmp_path / "in"
        models.mkdir()
        for name in ("a.onnx", "b.onnx"):
            shutil.copy(model, models / name)
        paths = [str(models), "--output-dir", str(tmp_path / "out"), "-j", "2"]
    else:
        paths = [str(model), str(tmp_path / "out.onnx")]
    done = run("optimize", *paths, "--target-runtime", "onnxruntime", "-q", env=env)
    assert done.returncode == 0, done.stderr
    warning = next(line for line in done.stderr.splitlines() if "cache file" in line)
    assert warning.startswith("eyefold: warning: ignoring the unreadable cache file ")
    assert "WARNING:" not in done.stderr


@pytest.mark.slow
def test_library_errors_name_keywords_and_the_command_line_names_flags(tmp_path: Path) -> None:
    model = onnx.load(str(SAMPLES / "dynamic_batch.onnx"))  # x: float[batch, 6]
    with pytest.raises(EyefoldError) as library:
        eyefold.optimize(model, input_shapes={"x": [2, 6, 1]})
    assert "input_shapes" in str(library.value)
    assert "--" not in str(library.value)
    done = run(
        "optimize",
        str(SAMPLES / "dynamic_batch.onnx"),
        str(tmp_path / "o.onnx"),
        "--input-shape",
        "x:2,6,1",
    )
    assert done.returncode == 2
    assert done.stderr.startswith(
        "eyefold: error: --input-shape x:2,6,1: input 'x' has rank 2"
    )
    assert "input_shapes" not in done.stderr


def test_a_relaxed_rule_without_relaxed_names_the_keyword_in_the_library() -> None:
    with pytest.raises(EyefoldError, match=r"\(relaxed=True\)") as error:
        PipelineOptions(rules=["matmul_float_identity"])
    assert "--relaxed" not in str(error.value)


def test_an_unknown_target_runtime_lists_every_accepted_one() -> None:
    with pytest.raises(EyefoldError) as error:
        PipelineOptions(target_runtime="trt")
    listed = str(error.value).split("supported: ")[1].split(", ")
    assert sorted(listed) == ["onnxruntime", "openvino", "tensorrt", "tract", "tvm"]


def _ops(path: Path) -> set[str]:
    return {node.op_type for node in onnx.load(str(path)).graph.node}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sample", "wrote", "did_not_write"),
    [
        ("bool_mask.onnx", ["Range", "Equal"], ["Cast", "Where"]),
        ("dynamic_batch.onnx", ["Range", "Equal", "Cast"], ["Where"]),
    ],
)
def test_a_tensorrt_lowering_says_what_it_wrote_and_is_removed(
    sample: str, wrote: list[str], did_not_write: list[str], tmp_path: Path
) -> None:
    source, output, report = SAMPLES / sample, tmp_path / "out.onnx", tmp_path / "r.json"
    done = run(
        "optimize", str(source), str(output), "--target-runtime", "tensorrt", "--no-fold",
        "--report", str(report), "-q",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (node,) = json.loads(report.read_text())["nodes"]
    assert node["action"] == "removed" and node["lowered"] is True
    said = re.match(r"lowered to (\S+) with k=0", node["reason"])
    assert said is not None, node["reason"]
    ops = _ops(output)
    assert "EyeLike" not in ops
    for op in wrote:
        assert op in said.group(1) and op in ops
    for op in did_not_write:
        assert op not in said.group(1) and (op not in ops or op in _ops(source))


def test_the_quick_start_output_is_ignored_by_git() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"eyefold optimize sample_models/torch_eye_chain\.onnx (\S+)", readme)
    assert match is not None
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    done = subprocess.run([git, "check-ignore", "-q", match.group(1)], cwd=ROOT, timeout=60)
    assert done.returncode == 0, f"{match.group(1)} is not in .gitignore"


DIAGONAL = SAMPLES / "dynamo_diagonal.onnx"  # torch.diagonal as dynamo exports it
RELAXED_LINE = (
    "note: rule diagonal_float matches 1 EyeLike node(s) but is relaxed (not exact for inf,"
    " NaN and -0.0): --relaxed runs it"
)


@pytest.mark.slow
def test_inspect_says_when_only_relaxed_stands_before_the_diagonal_rewrite() -> None:
    done = run("inspect", str(DIAGONAL))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines().count(RELAXED_LINE) == 1


@pytest.mark.slow
def test_optimize_says_so_too_and_relaxed_then_does_it(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    done = run("optimize", str(DIAGONAL), str(tmp_path / "o.onnx"), "--report", str(report))
    assert done.returncode == 0, done.stderr
    assert RELAXED_LINE in done.stdout.splitlines()
    document = json.loads(report.read_text())
    assert document["rules_withheld"] == {"diagonal_float": 1}
    (node,) = document["nodes"]
    assert node["action"] == "inferred"
    assert [d["rule"] for d in node["rules_declined"]] == ["diagonal_float"]
    relaxed = tmp_path / "relaxed.json"
    done = run(
        "optimize",
        str(DIAGONAL),
        str(tmp_path / "r.onnx"),
        "--relaxed",
        "--report",
        str(relaxed),
    )
    assert done.returncode == 0, done.stderr
    assert "note: rule" not in done.stdout
    (node,) = json.loads(relaxed.read_text())["nodes"]
    assert (node["action"], node["reason"]) == ("removed", "removed by rule diagonal_float")


def test_the_library_report_names_the_keyword() -> None:
    result = eyefold.optimize_with_report(onnx.load(str(DIAGONAL)))
    assert result.report.extra["rules_withheld"] == {"diagonal_float": 1}
    (declined,) = result.report.nodes[0].rules_declined
    assert "relaxed=True" in declined["reason"] and "--relaxed" not in declined["reason"]


@pytest.mark.slow
def test_no_relaxed_line_without_a_pattern_a_relaxed_rule_matches(tmp_path: Path) -> None:
    # The torch chain's EyeLike folds and feeds a MatMul: no EyeLike is left to rewrite.
    done = run("optimize", str(SAMPLES / "torch_eye_chain.onnx"), str(tmp_path / "o.onnx"))
    assert done.returncode == 0, done.stderr
    assert "note: rule" not in done.stdout
