"""Many models in one run: ``eyefold optimize IN... --output-dir DIR [-j N]`` and
``eyefold.optimize_files``."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import eyefold
from eyefold.cli import main

SAMPLES = Path(__file__).resolve().parents[2] / "sample_models"
GOOD = ("torch_eye_chain.onnx", "bool_mask.onnx", "static_matmul.onnx")


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(list(args))
        except SystemExit as exit_:
            status = int(exit_.code or 0)
    return status, out.getvalue(), err.getvalue()


def digests(folder: Path) -> dict[str, str]:
    """The files under ``folder`` and their hashes; the outputs' claim files left out."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.name.endswith(".eyefold-source")
    }


@pytest.fixture
def zoo(tmp_path: Path) -> Path:
    """A folder of good models, one nested two levels down, and one broken model."""
    root = tmp_path / "zoo"
    (root / "a" / "b").mkdir(parents=True)
    shutil.copy(SAMPLES / GOOD[0], root / GOOD[0])
    shutil.copy(SAMPLES / GOOD[1], root / "a" / GOOD[1])
    shutil.copy(SAMPLES / GOOD[2], root / "a" / "b" / GOOD[2])
    (root / "a" / "broken.onnx").write_bytes(b"not a model at all")
    (root / "notes.txt").write_text("not a model", encoding="utf-8")
    return root


def test_one_failing_model_never_stops_the_others(zoo: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    status, text, err = cli("optimize", str(zoo), "--output-dir", str(out))
    assert status == 1
    assert set(digests(out)) == {GOOD[0], f"a/{GOOD[1]}", f"a/b/{GOOD[2]}"}
    # The failure's line is the single-model form's text, prefixed with its path.
    single = cli("optimize", str(zoo / "a" / "broken.onnx"), str(tmp_path / "x.onnx"))
    assert single[0] == 1
    message = single[2].strip().removeprefix("eyefold: error: ")
    assert err.strip() == f"eyefold: error: {zoo / 'a' / 'broken.onnx'}: {message}"
    assert not (tmp_path / "x.onnx").exists()
    rows = {line.split()[0]: line.split()[1] for line in text.splitlines()[1:-1]}
    assert rows[str(zoo / "a" / "broken.onnx")] == "FAILED"
    assert rows[str(zoo / GOOD[0])] == "written"  # not checked: never "passed"
    assert text.splitlines()[-1].startswith("FAILED | 4 models: 3 ok, 1 failed")


def test_nested_folders_keep_their_relative_paths_and_files_their_names(
    zoo: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    single = SAMPLES / "paddle_zeros.onnx"
    status, _, _ = cli("optimize", str(zoo / "a"), str(single), "--output-dir", str(out))
    assert status == 1  # a/broken.onnx
    assert set(digests(out)) == {GOOD[1], f"b/{GOOD[2]}", "paddle_zeros.onnx"}
    alone = tmp_path / "alone.onnx"
    assert cli("optimize", str(single), str(alone), "-q")[0] == 0
    assert (out / "paddle_zeros.onnx").read_bytes() == alone.read_bytes()


def test_the_same_input_named_twice_runs_once(tmp_path: Path) -> None:
    folder = tmp_path / "samples"  # the samples, without sample_models/real/'s exports
    folder.mkdir()
    for sample in SAMPLES.glob("*.onnx"):
        shutil.copy(sample, folder / sample.name)
    model = folder / GOOD[0]
    results = eyefold.optimize_files([model, model, folder], tmp_path / "out")
    names = [Path(r.input).name for r in results]
    assert names.count(GOOD[0]) == 1
    assert all(r.status == "ok" for r in results)
    assert len(results) == len(list(SAMPLES.glob("*.onnx")))


def test_two_inputs_with_one_output_path_fail_the_second_only(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(SAMPLES / GOOD[1], other / GOOD[0])  # another model, same name
    results = eyefold.optimize_files([SAMPLES / GOOD[0], other / GOOD[0]], tmp_path / "out")
    assert [r.status for r in results] == ["ok", "failed"]
    assert "already the output of" in (results[1].error or "")
    alone = eyefold.optimize_files([SAMPLES / GOOD[0]], tmp_path / "alone")
    assert (tmp_path / "out" / GOOD[0]).read_bytes() == Path(alone[0].output).read_bytes()


def test_an_output_landing_on_another_input_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    # b/m.onnx is both an input and (for a/m.onnx, with --output-dir b) an output.
    for name, sample in (("a", GOOD[0]), ("b", GOOD[1])):
        (tmp_path / name).mkdir()
        shutil.copy(SAMPLES / sample, tmp_path / name / "m.onnx")
    before = (tmp_path / "b" / "m.onnx").read_bytes()
    results = eyefold.optimize_files(
        [tmp_path / "a" / "m.onnx", tmp_path / "b" / "m.onnx"], tmp_path / "b"
    )
    assert [r.status for r in results] == ["failed", "ok"]
    assert "another input of this batch" in (results[0].error or "")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "m.onnx").write_bytes(before)
    (alone,) = eyefold.optimize_files([tmp_path / "c" / "m.onnx"], tmp_path / "alone")
    assert (tmp_path / "b" / "m.onnx").read_bytes() == Path(alone.output).read_bytes()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_output_folder_that_cannot_be_written_fails_every_model(
    zoo: Path, tmp_path: Path
) -> None:
    out = tmp_path / "readonly"
    out.mkdir()
    out.chmod(0o500)
    try:
        status, _, err = cli("optimize", str(zoo / GOOD[0]), "--output-dir", str(out))
    finally:
        out.chmod(0o700)
    assert status == 1
    assert "is not writable" in err and err.count("\n") == 1
    assert list(out.iterdir()) == []


def test_an_output_folder_blocked_by_a_file(zoo: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "out"
    blocker.write_text("a file where the folder should be", encoding="utf-8")
    status, _, err = cli("optimize", str(zoo), "--output-dir", str(blocker / "x"))
    assert status == 1
    assert err.count("eyefold: error:") == 4 and "Traceback" not in err
    assert "cannot create folder" in err


def test_json_report_lists_every_model_in_the_report_schema(zoo: Path, tmp_path: Path) -> None:
    report_path = tmp_path / "batch.json"
    status, _, _ = cli(
        "optimize", str(zoo), "--output-dir", str(tmp_path / "out"), "--report",
        str(report_path), "-q",
    )  # fmt: skip
    assert status == 1
    document = json.loads(report_path.read_text(encoding="utf-8"))
    by_path = {Path(entry["path"]).name: entry for entry in document["models"]}
    assert set(by_path) == {*GOOD, "broken.onnx"}
    broken = by_path.pop("broken.onnx")
    assert broken["status"] == "failed" and broken["error"]
    for entry in by_path.values():
        assert entry["status"] == "ok" and entry["error"] is None
        assert set(entry) >= {"opset", "eyelike", "nodes", "steps", "ops", "output"}
        assert entry["opset"]["after"] == 22
    assert by_path[GOOD[0]]["eyelike"]["folded"] == 1
    total = document["total"]
    assert (total["models"], total["ok"], total["failed"]) == (4, 3, 1)
    assert total["eyelike"]["folded"] == sum(e["eyelike"]["folded"] for e in by_path.values())


@pytest.mark.slow
def test_two_workers_write_the_same_bytes_as_one(zoo: Path, tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    assert cli("optimize", str(zoo), "--output-dir", str(one), "-q")[0] == 1
    # Through the installed command, as users run it: spawned workers included.
    done = subprocess.run(
        [sys.executable, "-m", "eyefold", "optimize", str(zoo), "--output-dir", str(two),
         "-j", "2", "-q"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "broken.onnx" in done.stderr and "Traceback" not in done.stderr
    assert digests(one) == digests(two)
    assert len(digests(one)) == 3


def test_the_single_model_form_is_unchanged(tmp_path: Path) -> None:
    output = tmp_path / "o.onnx"
    status, text, _ = cli("optimize", str(SAMPLES / GOOD[0]), str(output))
    assert status == 0 and output.exists()
    assert text.splitlines()[-1].startswith(f"WRITTEN {output} (not checked;")
    assert "EyeLike: 1 found, 1 folded" in text
    status, _, err = cli("optimize", str(SAMPLES / GOOD[0]))
    assert status == 2 and "INPUT OUTPUT" in err
    status, _, err = cli("optimize", str(SAMPLES / GOOD[0]), str(output), "-j", "2")
    assert status == 2 and "--output-dir" in err


def test_a_folder_without_models_is_an_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    status, _, err = cli("optimize", str(empty), "--output-dir", str(tmp_path / "out"))
    assert status == 1 and "no *.onnx model" in err


def test_a_symlink_loop_among_the_inputs_fails_alone(zoo: Path, tmp_path: Path) -> None:
    loop = tmp_path / "loop.onnx"
    loop.symlink_to(loop)
    out = tmp_path / "out"
    status, text, err = cli(
        "optimize", str(loop), str(zoo / GOOD[0]), "--output-dir", str(out)
    )
    assert status == 1
    assert (
        err == f"eyefold: error: {loop}: cannot read {loop}: its symbolic links form a loop\n"
    )
    assert set(digests(out)) == {GOOD[0]}
    assert text.splitlines()[-1].startswith("FAILED | 2 models: 1 ok, 1 failed")


def test_outputs_are_claimed_for_their_inputs(zoo: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    (result,) = eyefold.optimize_files([zoo / "a" / GOOD[1]], out)
    claim = out / f".{GOOD[1]}.eyefold-source"
    assert result.status == "ok"
    assert claim.read_text(encoding="utf-8") == f"{(zoo / 'a' / GOOD[1]).resolve()}\n"
    # A failed model leaves no claim behind: the name stays free for another input.
    (failed,) = eyefold.optimize_files([zoo / "a" / "broken.onnx"], out)
    assert failed.status == "failed" and not (out / ".broken.onnx.eyefold-source").exists()
