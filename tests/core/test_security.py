"""Security: external data is read only inside the model's folder and written only beside
OUTPUT, and nothing on the load path can run code from a file.

onnx and onnx-ir refuse external data outside the model's folder, but onnx-ir checks only
when it knows that folder: with a bare file name (``model.onnx`` in the current folder)
its base folder is an empty string and every check is skipped. These tests prove the
guards hold through eyefold's own code paths (``eyefold.model_files.load_model`` and the
command line), including for relative paths and symlinks, and show the unguarded case
that eyefold avoids.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import re

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import eyefold
from eyefold.cli import main
from eyefold.errors import ModelIOError
from eyefold.testing import check_model_safely

PACKAGE = pathlib.Path(eyefold.__file__).resolve().parent
RULES = PACKAGE.parent / "rules"
SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "sample_models"
SECRET = np.arange(16, dtype=np.float32) + 1000  # recognizable bytes outside the folder


def _secret_file(path: pathlib.Path) -> pathlib.Path:
    path.write_bytes(SECRET.tobytes())
    return path


def _dotdot(folder: pathlib.Path) -> str:
    _secret_file(folder.parent / "secret.bin")
    return "../secret.bin"


def _absolute(folder: pathlib.Path) -> str:
    return str(_secret_file(folder.parent / "secret.bin"))


def _symlink_out(folder: pathlib.Path) -> str:
    (folder / "data.bin").symlink_to(_secret_file(folder.parent / "secret.bin"))
    return "data.bin"


def _symlinked_folder(folder: pathlib.Path) -> str:
    (folder / "sub").symlink_to(folder.parent, target_is_directory=True)
    _secret_file(folder.parent / "secret.bin")
    return "sub/secret.bin"


def _hard_link(folder: pathlib.Path) -> str:
    os.link(_secret_file(folder.parent / "secret.bin"), folder / "data.bin")
    return "data.bin"


OUTSIDE = {
    "dotdot": _dotdot,
    "absolute-path": _absolute,
    "symlink-to-file-outside": _symlink_out,
    "symlink-to-folder-outside": _symlinked_folder,
    "hard-link": _hard_link,
}


@pytest.fixture
def outside_model(request, tmp_path: pathlib.Path, external_data_model) -> pathlib.Path:
    """A model in ``tmp_path/model`` whose tensor ``w`` points outside that folder."""
    folder = tmp_path / "model"
    folder.mkdir()
    return external_data_model(folder, OUTSIDE[request.param](folder))


@pytest.fixture
def inside_model(tmp_path: pathlib.Path, external_data_model) -> pathlib.Path:
    """The twin: the data is inside the folder, reached through a symlink inside it."""
    folder = tmp_path / "model"
    (folder / "weights").mkdir(parents=True)
    (folder / "weights" / "w.bin").write_bytes(SECRET.tobytes())
    (folder / "link.bin").symlink_to(folder / "weights" / "w.bin")
    return external_data_model(folder, "link.bin")


outside_cases = pytest.mark.parametrize(
    "outside_model", list(OUTSIDE), ids=list(OUTSIDE), indirect=True
)


@outside_cases
def test_load_model_refuses_data_outside_the_folder(outside_model: pathlib.Path):
    with pytest.raises(ModelIOError, match="tensor 'w'"):
        eyefold.model_files.load_model(outside_model)


@outside_cases
def test_load_model_refuses_it_for_a_relative_path_too(
    outside_model: pathlib.Path, monkeypatch
):
    monkeypatch.chdir(outside_model.parent)
    with pytest.raises(ModelIOError, match="tensor 'w'"):
        eyefold.model_files.load_model("model.onnx")


def test_load_model_reads_data_inside_the_folder(inside_model: pathlib.Path, monkeypatch):
    monkeypatch.chdir(inside_model.parent)
    model = eyefold.model_files.load_model("model.onnx")
    np.testing.assert_array_equal(
        model.graph.initializers["w"].const_value.numpy(), SECRET.reshape(4, 4)
    )


@outside_cases
def test_onnx_ir_guard_holds_for_the_absolute_path_eyefold_uses(outside_model: pathlib.Path):
    """Below eyefold's own check, onnx-ir refuses to read the data once its folder is known."""
    model = ir.load(str(outside_model))
    with pytest.raises(ValueError, match=r"outside the base directory|hard link"):
        model.graph.initializers["w"].const_value.numpy()


@pytest.mark.parametrize("outside_model", ["dotdot"], indirect=True)
def test_onnx_ir_has_no_guard_for_a_bare_file_name(outside_model: pathlib.Path, monkeypatch):
    """Why eyefold makes the path absolute: with ``model.onnx`` onnx-ir reads outside."""
    monkeypatch.chdir(outside_model.parent)
    model = ir.load("model.onnx")
    leaked = model.graph.initializers["w"].const_value.numpy()
    np.testing.assert_array_equal(leaked, SECRET.reshape(4, 4))


@outside_cases
def test_onnx_guard_holds_for_the_check_option(outside_model: pathlib.Path, monkeypatch):
    """``--check`` reads the original with onnx.load; onnx refuses too, relative or not."""
    with pytest.raises(onnx.checker.ValidationError):
        onnx.load(str(outside_model))
    monkeypatch.chdir(outside_model.parent)
    with pytest.raises(onnx.checker.ValidationError):
        onnx.load("model.onnx")


@outside_cases
@pytest.mark.parametrize("command", ["optimize", "inspect", "check"])
def test_command_line_refuses_data_outside_the_folder(
    outside_model: pathlib.Path, command: str, monkeypatch, capsys
):
    monkeypatch.chdir(outside_model.parent)  # relative INPUT, as a user would type it
    argv = {
        "optimize": ["optimize", "model.onnx", "../out.onnx", "-q"],
        "inspect": ["inspect", "model.onnx"],
        "check": ["optimize", "model.onnx", "../out.onnx", "-q", "--check"],
    }[command]
    assert main(argv) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("eyefold: error: ") and "tensor 'w'" in line
    assert not (outside_model.parent.parent / "out.onnx").exists()


def test_command_line_reads_data_inside_the_folder(
    inside_model: pathlib.Path, monkeypatch, capsys
):
    monkeypatch.chdir(inside_model.parent)
    assert main(["optimize", "model.onnx", "../out.onnx", "-q", "--check"]) == 0
    check_model_safely(onnx.load(inside_model.parent.parent / "out.onnx"))


def _tree(root: pathlib.Path) -> dict[str, str]:
    """Every file under ``root`` (symlinks as their target) with its sha256."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            found[str(path)] = "-> " + os.readlink(path)
        elif path.is_file():
            found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


@pytest.mark.parametrize("flag", [False, True], ids=["", "external-data-flag"])
@pytest.mark.parametrize(
    "source", ["inline", "external"], ids=["inline-input", "external-input"]
)
def test_files_are_written_only_beside_output(
    tmp_path: pathlib.Path, external_data_model, source: str, flag: bool, monkeypatch
):
    folder = tmp_path / "model"
    folder.mkdir()
    if source == "external":
        (folder / "w.bin").write_bytes(SECRET.tobytes())
        model_path = external_data_model(folder, "w.bin")
    else:
        model_path = folder / "model.onnx"
        model_path.write_bytes((SAMPLES / "paddle_zeros.onnx").read_bytes())
    out_folder = tmp_path / "out"
    out_folder.mkdir()
    monkeypatch.chdir(tmp_path)
    before = _tree(tmp_path)
    argv = ["optimize", str(model_path), "out/result.onnx", "-q"]
    assert main([*argv, "--external-data"] if flag else argv) == 0
    after = _tree(tmp_path)
    created = sorted(set(after) - set(before))
    assert all(path.startswith(str(out_folder) + os.sep) for path in created), created
    assert {p: h for p, h in after.items() if p in before} == before  # nothing else changed
    # A data file only when asked or when the input had one (its tensors are copied).
    expect_data = flag or source == "external"
    assert (out_folder / "result.onnx.data").exists() == expect_data
    check_model_safely(onnx.load(out_folder / "result.onnx"))


def test_a_symlink_at_the_data_path_is_never_written_through(
    tmp_path: pathlib.Path, inside_model: pathlib.Path, capsys
):
    """OUTPUT.data planted as a symlink to a victim file: refused, the victim untouched."""
    out_folder = tmp_path / "out"
    out_folder.mkdir()
    victim = tmp_path / "victim.bin"
    victim.write_bytes(b"precious")
    planted = out_folder / "result.onnx.data"
    planted.symlink_to(victim)
    argv = ["optimize", str(inside_model), str(out_folder / "result.onnx"), "-q"]
    assert main([*argv, "--external-data"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("eyefold: error: ") and "result.onnx.data" in line
    assert victim.read_bytes() == b"precious"
    assert planted.is_symlink()
    assert sorted(p.name for p in out_folder.iterdir()) == ["result.onnx.data"]


# -- no code execution on the load path ------------------------------------------------

# Calls that could run code or commands from (or because of) a model file.
DANGEROUS = re.compile(
    r"\bimport pickle\b|\bpickle\.|\bcPickle\b|\bdill\b|\bmarshal\.|\bshelve\b"
    r"|(?<![\w.])eval\(|(?<![\w.])exec\(|(?<![\w.])compile\(|__import__\("
    r"|\bsubprocess\b|\bos\.system\(|\bos\.popen\(|\bos\.exec\w*\(|\bos\.spawn\w*\("
    r"|shell\s*=\s*True|allow_pickle\s*=\s*True|\byaml\.load\("
)


def _dangerous_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if DANGEROUS.search(line)]


def test_package_source_has_no_pickle_eval_exec_or_shell():
    sources = [*PACKAGE.rglob("*.py"), *RULES.rglob("*.py")]
    assert len(sources) > 10  # the package and its rules were found
    found = {
        str(path.relative_to(PACKAGE.parent)): lines
        for path in sources
        if (lines := _dangerous_lines(path.read_text(encoding="utf-8")))
    }
    assert found == {}


@pytest.mark.parametrize(
    "line",
    [
        "import pickle",
        "data = pickle.loads(blob)",
        "value = eval(text)",
        "exec(code)",
        "subprocess.run(cmd)",
        "os.system('ls')",
        "run(cmd, shell=True)",
        "np.load(path, allow_pickle=True)",
        "__import__(name)",
    ],
)
def test_the_source_scan_detects_each_pattern(line: str):
    """The twin of the scan: each dangerous form is caught, so an empty result means it."""
    assert _dangerous_lines(f"x = 1\n    {line}\n") == [line]


@pytest.mark.parametrize(
    "line",
    ["model.graph.initializers['w']", "self.evaluator.run(None, feeds)", "ir.load(path)"],
)
def test_the_source_scan_ignores_harmless_code(line: str):
    assert _dangerous_lines(line) == []
