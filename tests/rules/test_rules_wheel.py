"""rules/ ships as eyefold.rules in a built wheel, importable without the source tree."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Run from an unrelated folder with the installed copy first on sys.path, so neither the
# source tree nor the editable install can answer the import.
PROBE = """
import sys
sys.path.insert(0, sys.argv[1])
import onnx_ir as ir
import eyefold, eyefold.rules
from eyefold.passes import ApplyEyeLikeRulesPass
assert eyefold.rules.__file__.startswith(sys.argv[1]), eyefold.rules.__file__
assert eyefold.__file__.startswith(sys.argv[1]), eyefold.__file__
model = ir.from_onnx_text('''<ir_version: 10, opset_import: ["" : 22]>
agraph (float[3,3] x) => (int32[3,3] y) { e = EyeLike(x)  y = Cast<to=6>(e) }''')
result = ApplyEyeLikeRulesPass()(model)
print(len(eyefold.rules.ALL_RULES), result.hits["cast_to_dtype"])
"""


@pytest.mark.slow
def test_built_wheel_contains_and_imports_eyefold_rules(tmp_path: pathlib.Path):
    # Build from a copy, so the shared checkout gets no build/ or egg-info changes.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("eyefold", "rules"):
        shutil.copytree(ROOT / name, source / name, ignore=ignore)
    dist = tmp_path / "dist"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", str(source), "-w", str(dist)], check=True)
    (wheel,) = dist.glob("eyefold-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    rule_files = sorted(p.name for p in (ROOT / "rules").glob("*.py"))
    assert sorted(n.rsplit("/", 1)[1] for n in names if "/rules/" in n) == rule_files
    assert not any(n.startswith("rules/") for n in names)  # only as eyefold.rules

    site = tmp_path / "site"
    install = [*pip, "install", "--no-deps", "--target", str(site), str(wheel)]
    subprocess.run(install, check=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    probe = subprocess.run(
        [sys.executable, "-c", PROBE, str(site)],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        check=False,
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == [str(len(list(_rule_modules()))), "1"]


def _rule_modules():
    return (p for p in (ROOT / "rules").glob("*.py") if not p.name.startswith("_"))
