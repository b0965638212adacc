"""Nothing lost through file names and writes, on the real command line.

* OUTPUT, its data file and ``--report`` may not be the input, a data file it reads, or
  each other: a usage error before anything is written (batches too).
* Two saves racing to one OUTPUT never leave it reading the other's data.
* An in-place run keeps an old data file another model reads, and says so.
* Exit 1 leaves OUTPUT and the report untouched, even when the report is what failed.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import eyefold
from eyefold.model_files import data_file, load_model, save_model

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file semantics")

RUNNER = pathlib.Path(__file__).parents[1] / "helpers" / "patched_cli.py"


def _model(fill: float, name: str = "g") -> onnx.ModelProto:
    """``y = x + EyeLike(x)`` (folds) and ``z = Identity(w)``, ``w`` 2 KiB of ``fill``."""
    weight = numpy_helper.from_array(np.full(512, fill, np.float32), "w")
    graph = helper.make_graph(
        [
            helper.make_node("EyeLike", ["x"], ["e"]),
            helper.make_node("Add", ["x", "e"], ["y"]),
            helper.make_node("Identity", ["w"], ["z"]),
        ],
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, [512]),
        ],
        [weight],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _save_with_data(model: onnx.ModelProto, path: pathlib.Path, location: str) -> None:
    onnx.save(
        model,
        path,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=location,
        size_threshold=0,
    )


def _weights(path: pathlib.Path) -> np.ndarray:
    """``w`` as eyefold loads it: refused if its data file is missing or short."""
    return load_model(path).graph.initializers["w"].const_value.numpy()


def _snapshot(folder: pathlib.Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _eyefold(*args: object, cwd: pathlib.Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "eyefold", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
    )


def _patched(*args: object, cwd: pathlib.Path, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(RUNNER), *map(str, args)],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )


@pytest.fixture
def with_data(tmp_path: pathlib.Path) -> pathlib.Path:
    """A folder holding ``m.onnx``, which reads ``m.onnx.data``."""
    _save_with_data(_model(3.0), tmp_path / "m.onnx", "m.onnx.data")
    return tmp_path


# --- 1. paths checked before anything is written -------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["m.onnx", "m.onnx.data"], ["OUTPUT m.onnx.data", "m.onnx.data of the input m.onnx"]),
        (
            ["m.onnx", "o.onnx", "--report", "m.onnx.data"],
            ["--report m.onnx.data", "m.onnx.data of the input m.onnx"],
        ),
        (["m.onnx", "o.onnx", "--report", "m.onnx"], ["--report m.onnx", "the input m.onnx"]),
        (["m.onnx", "o.onnx", "--report", "o.onnx"], ["--report o.onnx", "OUTPUT o.onnx"]),
        (
            ["m.onnx", "m.onnx", "--report", "m.onnx.data.1"],
            ["--report m.onnx.data.1", "data file of OUTPUT m.onnx"],
        ),
        (
            ["m.onnx", "o.onnx", "--report", "./sub/../o.onnx"],
            ["--report ./sub/../o.onnx", "OUTPUT o.onnx"],
        ),
    ],
    ids=[
        "output-is-input-data",
        "report-is-input-data",
        "report-is-input",
        "report-is-output",
        "report-takes-a-data-name",
        "report-is-output-spelled-otherwise",
    ],
)
def test_a_path_slip_is_a_usage_error_and_writes_nothing(
    with_data: pathlib.Path, args: list[str], names: list[str]
):
    (with_data / "sub").mkdir()
    before = _snapshot(with_data)
    result = _eyefold("optimize", *args, cwd=with_data)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("eyefold: error: ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr
    for name in names:
        assert name in result.stderr
    assert _snapshot(with_data) == before
    assert np.array_equal(_weights(with_data / "m.onnx"), np.full(512, 3.0, np.float32))


@pytest.mark.slow
def test_a_report_hard_linked_to_the_input_is_refused(with_data: pathlib.Path):
    """Identity, not spelling: a hard link to the input is that file."""
    os.link(with_data / "m.onnx", with_data / "link.json")
    before = _snapshot(with_data)
    result = _eyefold("optimize", "m.onnx", "o.onnx", "--report", "link.json", cwd=with_data)
    assert result.returncode == 2
    assert "--report link.json would replace the input m.onnx" in result.stderr
    assert _snapshot(with_data) == before


@pytest.mark.slow
def test_a_data_file_named_as_the_input_is_refused(tmp_path: pathlib.Path):
    """OUTPUT o.onnx writes o.onnx.data, here the input model itself."""
    _save_with_data(_model(3.0), tmp_path / "o.onnx.data", "w.bin")
    before = _snapshot(tmp_path)
    result = _eyefold("optimize", "o.onnx.data", "o.onnx", cwd=tmp_path)
    assert result.returncode == 2
    assert "the data file" in result.stderr and "the input o.onnx.data" in result.stderr
    assert _snapshot(tmp_path) == before


@pytest.mark.slow
def test_in_place_stays_allowed(with_data: pathlib.Path):
    result = _eyefold("optimize", "m.onnx", "m.onnx", "--report", "r.json", cwd=with_data)
    assert result.returncode == 0, result.stderr
    assert np.array_equal(_weights(with_data / "m.onnx"), np.full(512, 3.0, np.float32))
    assert json.loads((with_data / "r.json").read_text())["output"]["kept_data_files"] == []


@pytest.mark.slow
def test_a_batch_report_onto_an_input_data_file_is_refused_before_any_model(
    with_data: pathlib.Path,
):
    before = _snapshot(with_data)
    result = _eyefold(
        "optimize", "m.onnx", "--output-dir", "out", "--report", "m.onnx.data", cwd=with_data
    )
    assert result.returncode == 2
    assert "--report m.onnx.data would replace the data file" in result.stderr
    assert _snapshot(with_data) == before and not (with_data / "out").exists()


@pytest.mark.slow
def test_a_batch_report_onto_an_output_is_refused(with_data: pathlib.Path):
    (with_data / "out").mkdir()
    result = _eyefold(
        "optimize", "m.onnx", "--output-dir", "out", "--report", "out/m.onnx", cwd=with_data
    )
    assert result.returncode == 2 and "would replace OUTPUT" in result.stderr
    assert list((with_data / "out").iterdir()) == []


def test_a_batch_model_whose_output_is_another_input_data_fails_alone(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
):
    """``src/a.onnx`` reads ``src/a.onnx.data``; a model given as ``b/a.onnx.data`` would
    be written over it. That model fails with the reason, the other one runs."""
    src, other = tmp_path / "src", tmp_path / "b"
    src.mkdir()
    other.mkdir()
    _save_with_data(_model(3.0), src / "a.onnx", "a.onnx.data")
    onnx.save(_model(4.0), other / "a.onnx.data")
    monkeypatch.chdir(src)  # the input with a data file named from its own folder
    results = eyefold.optimize_files(["a.onnx", "../b/a.onnx.data"], ".")
    assert [r.status for r in results] == ["ok", "failed"]
    assert "would replace the data file" in results[1].error
    assert np.array_equal(_weights(src / "a.onnx"), np.full(512, 3.0, np.float32))


# --- 3. writers never mix -------------------------------------------------------------


def _two_inputs(tmp_path: pathlib.Path) -> pathlib.Path:
    """Folders A and B, each with m.onnx reading m.onnx.data (weights 1.0 and 2.0)."""
    for role, fill in (("A", 1.0), ("B", 2.0)):
        (tmp_path / role).mkdir()
        _save_with_data(_model(fill, name=role), tmp_path / role / "m.onnx", "m.onnx.data")
    out = tmp_path / "out"
    out.mkdir()
    return out


def _race(tmp_path: pathlib.Path) -> pathlib.Path:
    """A and B save to out/o.onnx at once, their renames forced into the order that
    mixed them: A's data, B's data, B's model, A's model. Returns the barrier folder."""
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    schedule = {"PATCHED_SCHEDULE": "A1 B1 B2 A2", "PATCHED_BARRIER": str(barrier)}
    runs = [
        _patched(
            "optimize",
            "m.onnx",
            "../out/o.onnx",
            "-q",
            cwd=tmp_path / role,
            PATCHED_ROLE=role,
            **schedule,
        )
        for role in ("A", "B")
    ]
    for process in runs:
        process.wait(timeout=300)
    assert [p.returncode for p in runs] == [0, 0], [p.stderr.read() for p in runs]
    return barrier


def _assert_one_writer_whole(output: pathlib.Path) -> None:
    """OUTPUT is one writer's model reading that writer's own data."""
    model = load_model(output)
    fill = {"A": 1.0, "B": 2.0}[model.graph.name]
    assert np.array_equal(_weights(output), np.full(512, fill, np.float32))


@pytest.mark.slow
def test_two_racing_saves_never_mix_model_and_data(tmp_path: pathlib.Path):
    """Two real processes save different models to one OUTPUT (which already reads
    o.onnx.data), their renames forced into the order that mixed them. OUTPUT must be
    one writer's model with its own data."""
    out = _two_inputs(tmp_path)
    # Each input is named from its own folder.
    first = _eyefold("optimize", "m.onnx", "../out/o.onnx", cwd=tmp_path / "A")
    assert first.returncode == 0, first.stderr
    assert (out / "o.onnx.data").exists()
    barrier = _race(tmp_path)
    assert (barrier / "A2").exists() and (barrier / "B2").exists()  # the order was forced
    _assert_one_writer_whole(out / "o.onnx")


@pytest.mark.slow
def test_two_racing_saves_to_a_new_output_never_mix(tmp_path: pathlib.Path):
    """No OUTPUT yet: the first claims o.onnx.data, the other sees it claimed (empty, read
    by nobody) and takes o.onnx.data.1. Both finish; OUTPUT is one of them, whole."""
    out = _two_inputs(tmp_path)
    _race(tmp_path)
    _assert_one_writer_whole(out / "o.onnx")


@pytest.mark.slow
def test_a_name_left_claimed_by_a_killed_save_does_not_block_the_next(with_data):
    """A save killed after claiming o.onnx.data leaves it empty; the next one goes on."""
    (with_data / "o.onnx.data").touch()
    result = _eyefold("optimize", "m.onnx", "o.onnx", cwd=with_data)
    assert result.returncode == 0, result.stderr
    assert np.array_equal(_weights(with_data / "o.onnx"), np.full(512, 3.0, np.float32))
    assert (with_data / "o.onnx.data").stat().st_size == 0  # never written nor removed


# --- 4. an in-place run never deletes data another model reads --------------------------


@pytest.mark.slow
def test_in_place_keeps_a_data_file_another_model_reads(tmp_path: pathlib.Path):
    _save_with_data(_model(3.0), tmp_path / "a.onnx", "a.onnx.data")
    (tmp_path / "b.onnx").write_bytes((tmp_path / "a.onnx").read_bytes())  # reads it too
    result = _eyefold("optimize", "a.onnx", "a.onnx", "--report", "r.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = str(tmp_path / "a.onnx.data")
    assert f"warning: kept the old data file {data}: {tmp_path / 'b.onnx'} reads it" in (
        result.stdout
    )
    kept = json.loads((tmp_path / "r.json").read_text())["output"]["kept_data_files"]
    assert kept == [{"path": data, "reason": f"{tmp_path / 'b.onnx'} reads it"}]
    for name in ("a.onnx", "b.onnx"):
        assert np.array_equal(_weights(tmp_path / name), np.full(512, 3.0, np.float32))


@pytest.mark.slow
def test_in_place_keeps_the_old_data_when_a_sibling_cannot_be_read(tmp_path: pathlib.Path):
    _save_with_data(_model(3.0), tmp_path / "a.onnx", "a.onnx.data")
    (tmp_path / "c.onnx").write_bytes(b"location \xff\xff\xff not a model")
    result = _eyefold("optimize", "a.onnx", "a.onnx", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "warning: kept the old data file" in result.stdout
    assert f"cannot tell whether {tmp_path / 'c.onnx'} reads it" in result.stdout
    assert (tmp_path / "a.onnx.data").exists()


def test_in_place_keeps_the_old_data_when_the_folder_is_over_the_scan_budget(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
):
    """The library save, with the folder's scan budget lowered to one model: two other
    models are more than eyefold reads, so the old data file stays, with the reason."""
    monkeypatch.setattr(data_file, "_MAX_MODELS_SCANNED", 1)
    _save_with_data(_model(3.0), tmp_path / "a.onnx", "a.onnx.data")
    for name in ("b.onnx", "c.onnx"):
        onnx.save(_model(5.0), tmp_path / name)
    saved = save_model(
        load_model(tmp_path / "a.onnx"), tmp_path / "a.onnx", source_path=tmp_path / "a.onnx"
    )
    assert [k.path for k in saved.kept_data_files] == [str(tmp_path / "a.onnx.data")]
    assert "holds 2 other models" in saved.kept_data_files[0].reason
    assert (tmp_path / "a.onnx.data").exists() and saved.data_path.endswith(".data.1")


@pytest.mark.slow
def test_in_place_removes_the_old_data_nobody_else_reads(tmp_path: pathlib.Path):
    _save_with_data(_model(3.0), tmp_path / "a.onnx", "a.onnx.data")
    onnx.save(_model(5.0), tmp_path / "inline.onnx")  # a neighbour without a data file
    result = _eyefold("optimize", "a.onnx", "a.onnx", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "warning: kept" not in result.stdout
    assert not (tmp_path / "a.onnx.data").exists() and (tmp_path / "a.onnx.data.1").exists()


# --- 5. exit 1 means OUTPUT and the report untouched ------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("external", [False, True], ids=["one-file", "with-data"])
def test_a_report_that_cannot_be_written_leaves_output_untouched(
    tmp_path: pathlib.Path, external: bool
):
    """The report's flush fails as on a full disk: exit 1, OUTPUT, its data file and the
    old report are as they were, and no temporary file is left."""
    onnx.save(_model(3.0), tmp_path / "m.onnx")
    old = _model(9.0, name="old")
    _save_with_data(old, tmp_path / "o.onnx", "o.onnx.data")
    (tmp_path / "r.json").write_text("old report\n")
    before = _snapshot(tmp_path)
    flags = ["--external-data"] if external else []
    run = _patched(
        "optimize",
        "m.onnx",
        "o.onnx",
        *flags,
        "--report",
        "r.json",
        cwd=tmp_path,
        PATCHED_FAIL_FSYNC=".r.json.",
    )
    _, stderr = run.communicate(timeout=300)
    assert run.returncode == 1, stderr
    assert stderr.startswith("eyefold: error: cannot write") and "r.json" in stderr
    assert _snapshot(tmp_path) == before
    assert np.array_equal(_weights(tmp_path / "o.onnx"), np.full(512, 9.0, np.float32))
