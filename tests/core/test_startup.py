"""Start-up: what each command imports (nothing heavy for --version and --help)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import eyefold.rules
from eyefold.cli import main
from eyefold.rule_registry import rule_names

SAMPLES = Path(__file__).resolve().parents[2] / "sample_models"
HEAVY = ("onnx", "onnx_ir", "numpy", "onnxscript", "onnxruntime", "sympy", "ml_dtypes")

# Runs the command line in a fresh interpreter, then prints the heavy modules it imported.
_PROBE = """
import json, sys
from eyefold.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
heavy = {heavy!r}
print(json.dumps(sorted(m for m in heavy if m in sys.modules)), file=sys.stderr)
"""


def imported_by(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=HEAVY), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return json.loads(done.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["optimize", "--help"]])
def test_version_and_help_import_nothing_heavy(args: list[str]) -> None:
    assert imported_by(*args) == []


@pytest.mark.slow
def test_optimize_imports_no_runtime_unless_asked(tmp_path: Path) -> None:
    # Without --check or a target runtime, onnxruntime's table is read from the cache or
    # the built-in fallback: its version comes from package metadata, not an import.
    output = tmp_path / "o.onnx"
    imported = imported_by("optimize", str(SAMPLES / "torch_eye_chain.onnx"), str(output))
    assert output.exists()
    assert "onnxruntime" not in imported
    assert {"onnx", "onnx_ir"} <= set(imported)


@pytest.mark.slow
def test_onnxscript_is_imported_only_when_a_rule_can_match(tmp_path: Path) -> None:
    # The torch chain's EyeLike reads a ConstantOfShape and feeds a MatMul; the rules
    # before folding look at Cast, Transpose, Mul and shape-preserving producers, and
    # the exact rules after folding at MatMul next to an integer identity: none can match.
    chain = imported_by("optimize", str(SAMPLES / "torch_eye_chain.onnx"), str(tmp_path / "c"))
    assert "onnxscript" not in chain
    # An EyeLike feeding a Cast (in an If branch): cast_to_dtype can match.
    branch = imported_by("optimize", str(SAMPLES / "if_branch.onnx"), str(tmp_path / "b"))
    assert "onnxscript" in branch
    assert "onnxscript" not in imported_by("rules")


@pytest.mark.slow
def test_rule_specs_are_read_without_onnxscript() -> None:
    code = (
        "import sys; from eyefold.rules import ALL_RULES;"
        " from eyefold.rule_registry import describe_rules, select_rules;"
        " names = [s.name for s in select_rules(relaxed=True)]; describe_rules();"
        " print(len(names), 'onnxscript' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.split() == [str(len(eyefold.rules.ALL_RULES)), "False"]


def test_import_eyefold_cli_loads_no_public_api_until_used() -> None:
    code = (
        "import sys, eyefold.cli.main;"
        " print('eyefold.passes' in sys.modules, 'onnx' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.split() == ["False", "False"]


def test_lazy_public_api_resolves_every_name() -> None:
    for name in eyefold.__all__:
        assert getattr(eyefold, name) is not None, name
    assert eyefold.passes.default_pipeline is not None
    with pytest.raises(AttributeError):
        _ = eyefold.no_such_name


def test_registry_order_and_modules_are_the_same() -> None:
    assert [module.spec.name for module in eyefold.rules.RULE_MODULES] == list(rule_names())
    assert [spec.name for spec in eyefold.rules.ALL_RULES] == list(rule_names())


@pytest.mark.slow
def test_runtime_version_comes_from_metadata_without_importing_it() -> None:
    code = (
        "import sys; from eyefold.runtime.support import get_support;"
        " s = get_support(probe=False); print(s.version, 'onnxruntime' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    import onnxruntime

    assert done.stdout.split() == [onnxruntime.__version__, "False"]


# The eyefold process: its exit status and stderr are main's, its atexit handlers still
# run, and it froze the collector's objects before the interpreter's shutdown walked them.
_PROCESS = """
import atexit, gc, sys
atexit.register(lambda: print("frozen", gc.get_freeze_count() > 0, file=sys.stderr))
sys.argv = ["eyefold", *sys.argv[1:]]
from eyefold.cli.process import run
run()
"""


@pytest.mark.slow
@pytest.mark.parametrize("name, status", [("torch_eye_chain.onnx", 0), ("missing.onnx", 1)])
def test_process_exits_with_main_status_after_freezing(
    tmp_path: Path, name: str, status: int
) -> None:
    output = tmp_path / "o.onnx"
    args = ["optimize", str(SAMPLES / name), str(output), "-q"]
    done = subprocess.run(
        [sys.executable, "-c", _PROCESS, *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == status
    lines = done.stderr.splitlines()
    assert lines[-1] == "frozen True"
    assert output.exists() == (status == 0)
    if status:
        assert len(lines) == 2 and "missing.onnx" in lines[0], done.stderr


def test_main_leaves_the_collector_alone(tmp_path: Path) -> None:
    import gc

    before = gc.get_freeze_count()
    sample = str(SAMPLES / "torch_eye_chain.onnx")
    assert main(["optimize", sample, str(tmp_path / "o"), "-q"]) == 0
    assert gc.get_freeze_count() == before


def test_console_script_is_the_process_entry() -> None:
    import tomllib

    project = tomllib.loads((SAMPLES.parent / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["eyefold"] == "eyefold.cli.process:run"
