"""Tests of eyefold.runtime.support: the onnxruntime probe, its cache and the fallback."""

from __future__ import annotations

import json
import logging
import pathlib
import subprocess
import sys

import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import helper

import eyefold
from eyefold.errors import EyefoldError
from eyefold.runtime import support as runtime_support
from eyefold.runtime.support import (
    FALLBACK_NATIVE,
    FALLBACK_SUPPORTED,
    all_combinations,
    cache_dir,
    cache_path,
    fallback_support,
    get_support,
    probe_onnxruntime,
)


@pytest.fixture
def cache(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    """An empty cache folder of this test's own."""
    folder = tmp_path / "cache"
    monkeypatch.setenv(runtime_support.CACHE_DIR_ENV, str(folder))
    return folder


def _bool_eyelike_model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("EyeLike", ["x"], ["y"], dtype=onnx.TensorProto.BOOL)],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["n", "m"])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.BOOL, ["n", "m"])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)], ir_version=10)


# --- combinations ---


@pytest.mark.parametrize(
    ("version", "types"),
    [pytest.param(22, 13, id="EyeLike-22"), pytest.param(9, 12, id="EyeLike-9")],
)
def test_all_combinations_counts_every_type_pair_and_the_absent_dtype(
    version: int, types: int
):
    combinations = all_combinations(version)
    assert len(combinations) == types * (types + 1)
    assert len(set(combinations)) == len(combinations)
    has_bfloat16 = any(ir.DataType.BFLOAT16 in c for c in combinations)
    assert has_bfloat16 == (version == 22)


def test_fallback_table_is_the_measured_37():
    assert len(FALLBACK_SUPPORTED) == 37
    assert FALLBACK_NATIVE < FALLBACK_SUPPORTED
    assert (ir.DataType.BOOL, ir.DataType.BOOL) not in FALLBACK_SUPPORTED
    assert (ir.DataType.FLOAT, ir.DataType.BOOL) not in FALLBACK_SUPPORTED


@pytest.mark.skipif(
    not ort.__version__.startswith("1.32."), reason="the fallback was measured with 1.32"
)
def test_fallback_table_matches_a_live_probe_of_onnxruntime_1_32():
    probed = probe_onnxruntime()
    for version in (9, 22):
        assert probed.supported[version] == FALLBACK_SUPPORTED
        assert probed.native[version] == FALLBACK_NATIVE


def test_probe_native_is_a_subset_of_supported():
    probed = probe_onnxruntime()
    assert probed.source == "probe"
    assert probed.version == ort.__version__
    for version in (9, 22):
        assert probed.native[version] <= probed.supported[version]
        assert probed.supported[version] <= set(all_combinations(version))


# --- the cache ---


def test_cache_is_created_once_then_reused(cache: pathlib.Path):
    first = get_support()
    path = cache_path("onnxruntime", ort.__version__)
    assert first.source == "probe"
    assert path.is_file()
    stamp = path.stat().st_mtime_ns
    second = get_support()
    assert second.source == "cache"  # no session was created for it
    assert path.stat().st_mtime_ns == stamp
    assert second.supported == first.supported
    assert second.native == first.native
    assert list(cache.iterdir()) == [path]  # no temporary file left behind


def _write_cache_file(path: pathlib.Path, version: str) -> None:
    data = fallback_support("onnxruntime", version).to_json()
    data["eyelike"] = {v: {"supported": [], "native": []} for v in ("9", "22")}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


def test_cache_written_for_another_version_is_ignored_and_refreshed(cache: pathlib.Path):
    path = cache_path("onnxruntime", ort.__version__)
    _write_cache_file(path, "0.0.1-other")  # an empty table, claiming another version
    support = get_support()
    assert support.source == "probe"
    assert support.supported[22]  # the live measurement, not the empty table
    assert json.loads(path.read_text(encoding="utf-8"))["version"] == ort.__version__
    assert get_support().source == "cache"


def test_cache_with_matching_version_is_trusted(cache: pathlib.Path):
    path = cache_path("onnxruntime", ort.__version__)
    _write_cache_file(path, ort.__version__)  # the same empty table, this version
    support = get_support()
    assert support.source == "cache"
    assert support.supported[22] == frozenset()


def test_cache_file_of_another_version_is_never_read(cache: pathlib.Path):
    _write_cache_file(cache_path("onnxruntime", "0.0.1"), "0.0.1")
    assert get_support().source == "probe"


def test_corrupt_cache_is_measured_again(cache: pathlib.Path, caplog):
    path = cache_path("onnxruntime", ort.__version__)
    path.parent.mkdir(parents=True)
    path.write_text("{not json", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="eyefold.runtime.support"):
        support = get_support()
    assert support.source == "probe"
    assert "unreadable cache file" in caplog.text
    assert json.loads(path.read_text(encoding="utf-8"))["version"] == ort.__version__


def _with_tables(tables: object) -> str:
    """A cache of the right format and version whose tables are ``tables``."""
    data = fallback_support("onnxruntime", ort.__version__).to_json()
    data["eyelike"] = tables
    return json.dumps(data)


@pytest.mark.parametrize(
    "content",
    [
        "[]",
        "7",
        "\x00garbage{",
        _with_tables([]),
        _with_tables({"9": 5, "22": {"supported": [["FLOAT"]]}}),
    ],
    ids=["list", "number", "garbage", "tables-a-list", "tables-of-wrong-shape"],
)
def test_corrupt_cache_costs_one_warning_on_the_command_line(
    cache: pathlib.Path, tmp_path: pathlib.Path, content: str
):
    """Whatever the file holds, the run succeeds, says so once and rewrites the file."""
    path = cache_path("onnxruntime", ort.__version__)
    path.parent.mkdir(parents=True)
    path.write_text(content, encoding="utf-8")
    model = tmp_path / "m.onnx"
    onnx.save(_bool_eyelike_model(), model)
    argv = ["optimize", str(model), str(tmp_path / "o.onnx"), "-q"]
    result = subprocess.run(
        [sys.executable, "-m", "eyefold", *argv, "--target-runtime", "onnxruntime"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("eyefold: warning: ignoring the unreadable cache file"), line
    assert str(path) in line
    rewritten = json.loads(path.read_text(encoding="utf-8"))
    assert rewritten["version"] == ort.__version__
    assert get_support(probe=False).source == "cache"  # the new file is trusted


def test_unwritable_cache_still_gives_the_measurement(tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    monkeypatch.setenv(runtime_support.CACHE_DIR_ENV, str(blocker / "cache"))
    with caplog.at_level(logging.WARNING, logger="eyefold.runtime.support"):
        support = get_support()
    assert support.source == "probe"
    assert "cannot write the runtime-support cache" in caplog.text


def test_no_probe_without_cache_gives_the_fallback_and_writes_nothing(cache: pathlib.Path):
    support = get_support(probe=False)
    assert support.source == "fallback"
    assert support.supported[22] == FALLBACK_SUPPORTED
    assert not cache.exists()


def test_no_probe_uses_an_existing_cache(cache: pathlib.Path):
    get_support()
    assert get_support(probe=False).source == "cache"


def test_the_installed_version_is_read_once_per_process(cache, monkeypatch):
    import importlib.metadata

    from eyefold.runtime import installed

    reads = []
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda n: reads.append(n) or real(n))
    installed.installed_version.cache_clear()
    try:
        for _ in range(3):
            eyefold.optimize(_bool_eyelike_model())
    finally:
        installed.installed_version.cache_clear()
    # onnxruntime's for its table; the other runtimes' for the form a node would take
    # (it must keep running where it ran): each once, however many runs.
    assert reads[0] == "onnxruntime"
    assert sorted(reads) == sorted(set(reads))


def test_an_unchanged_cache_file_is_read_once(cache: pathlib.Path, monkeypatch):
    from eyefold.runtime import cache as support_cache

    get_support()  # measures and writes the cache file
    reads = []
    real = support_cache._read
    monkeypatch.setattr(support_cache, "_read", lambda *a: reads.append(a) or real(*a))
    first = get_support(probe=False)
    assert get_support(probe=False) is first
    assert first.source == "cache" and len(reads) == 1
    path = cache_path("onnxruntime", ort.__version__)
    _write_cache_file(path, ort.__version__)  # changed: read again
    assert get_support(probe=False).supported[22] == frozenset()
    assert len(reads) == 2


def test_optimize_without_target_runtime_never_probes(cache: pathlib.Path):
    model = _bool_eyelike_model()
    optimized = eyefold.optimize(model)
    assert not cache.exists()
    assert [n.op_type for n in optimized.graph.node] == ["EyeLike"]


def test_optimize_with_target_runtime_probes_and_caches(cache: pathlib.Path):
    eyefold.optimize(_bool_eyelike_model(), target_runtime="onnxruntime")
    assert cache_path("onnxruntime", ort.__version__).is_file()


# --- where the cache lives ---


def test_cache_dir_prefers_the_eyefold_variable(monkeypatch, tmp_path):
    monkeypatch.setenv(runtime_support.CACHE_DIR_ENV, str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "mine"


def test_cache_dir_uses_xdg_cache_home(monkeypatch, tmp_path):
    monkeypatch.delenv(runtime_support.CACHE_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "eyefold"


def test_cache_dir_defaults_to_home_dot_cache(monkeypatch, tmp_path):
    monkeypatch.delenv(runtime_support.CACHE_DIR_ENV, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_dir() == tmp_path / ".cache" / "eyefold"


def test_cache_file_name_keeps_odd_version_strings_inside_the_folder(cache: pathlib.Path):
    path = cache_path("onnxruntime", "1.2.3/../../evil")
    assert path.parent == cache
    assert "/" not in path.name


# --- without onnxruntime, and unknown runtimes ---


def test_missing_onnxruntime_falls_back_to_the_table(cache, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # makes `import onnxruntime` fail
    support = get_support()
    assert support.source == "fallback"
    assert support.version is None
    assert support.supported[22] == FALLBACK_SUPPORTED
    assert not cache.exists()
    with pytest.raises(EyefoldError, match="not installed"):
        probe_onnxruntime()


def test_missing_onnxruntime_still_legalizes_with_the_fallback(cache, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "onnxruntime", None)
        result = eyefold.optimize_with_report(
            _bool_eyelike_model(), target_runtime="onnxruntime"
        )
    assert result.report.extra["runtime"]["source"] == "fallback"
    assert [n.op_type for n in result.model.graph.node] == ["EyeLike", "Cast"]
    ort.InferenceSession(result.model.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("name", ["mnn", "", "ONNXRUNTIME"])  # tensorrt: lowered
def test_unknown_runtime_is_a_clear_error(name: str, cache: pathlib.Path):
    with pytest.raises(EyefoldError, match="unknown target runtime"):
        get_support(name)
    with pytest.raises(EyefoldError, match="unknown target runtime"):
        eyefold.optimize(_bool_eyelike_model(), target_runtime=name)
    assert not cache.exists()
