"""Nothing lost: a kill during save leaves the old OUTPUT or none, never a partial file.

A real ``python -m eyefold optimize`` subprocess saves a ~300 MB model, so the save takes
long enough to interrupt. The test polls OUTPUT's folder until the temporary file eyefold
writes first has grown, then sends SIGKILL (no handler, no cleanup can run) and checks
what is left. OUTPUT == INPUT is covered the same way, and once run to completion.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from eyefold.cli import main
from eyefold.model_files import save
from eyefold.testing import check_model_safely, run_reference

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

BIG_FLOATS = 75 << 20  # 300 MiB of float32
STARTED_BYTES = 1 << 20  # the temporary file holds at least this much: mid-write
ATTEMPTS = 3
TIMEOUT_S = 120


def _model(floats: int, values: np.ndarray | None = None) -> onnx.ModelProto:
    """``y = Add(x, EyeLike(x))`` (folds) and ``z = Identity(w)``, ``w`` of ``floats``
    float32s (``values``, else 0, 1, 2...)."""
    weight = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[floats])
    if values is None:
        values = np.arange(floats, dtype=np.float32)
    weight.raw_data = values.astype(np.float32).tobytes()
    nodes = [
        helper.make_node("EyeLike", ["x"], ["e"], name="eye"),
        helper.make_node("Add", ["x", "e"], ["y"], name="add"),
        helper.make_node("Identity", ["w"], ["z"], name="keep"),
    ]
    graph = helper.make_graph(
        nodes,
        "big",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, [floats]),
        ],
        [weight],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)], ir_version=10)


@pytest.fixture(scope="module")
def big_model(tmp_path_factory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("big") / "big.onnx"
    path.write_bytes(_model(BIG_FLOATS).SerializeToString())
    return path


def _sha256(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 24), b""):
            digest.update(block)
    return digest.hexdigest()


EYEFOLD = [sys.executable, "-m", "eyefold", "optimize"]
# What a non-atomic saver does: write OUTPUT in place. Used to show the kill test catches it.
NAIVE_COPY = [
    sys.executable,
    "-c",
    "import shutil, sys; shutil.copyfile(sys.argv[1], sys.argv[2])",
]


def _start(
    source: pathlib.Path, output: pathlib.Path, command: list[str] = EYEFOLD
) -> subprocess.Popen:
    extra = ["-q"] if command is EYEFOLD else []
    return subprocess.Popen(
        [*command, str(source), str(output), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _kill_mid_save(
    source: pathlib.Path, output: pathlib.Path, command: list[str] = EYEFOLD
) -> bool:
    """Runs optimize and SIGKILLs it while a new file in OUTPUT's folder is being written.

    Returns False when the run finished before a partial file could be seen.
    """
    folder = output.parent
    existing = {entry.name for entry in os.scandir(folder)}
    old_size = output.stat().st_size if output.exists() else 0
    process = _start(source, output, command)
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while process.poll() is None and time.monotonic() < deadline:
            # A new file (eyefold's temporary), or OUTPUT itself growing (a naive writer).
            growing = [
                entry
                for entry in os.scandir(folder)
                if entry.name not in existing
                or (entry.name == output.name and entry.stat().st_size > old_size)
            ]
            if any(entry.stat().st_size >= STARTED_BYTES for entry in growing):
                process.send_signal(signal.SIGKILL)
                process.wait(TIMEOUT_S)
                return process.returncode == -signal.SIGKILL
            time.sleep(0.002)
        return False
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _kill_until_caught(
    source: pathlib.Path, output: pathlib.Path, reset, command: list[str] = EYEFOLD
) -> None:
    for _ in range(ATTEMPTS):
        reset()
        if _kill_mid_save(source, output, command):
            return
    pytest.fail(f"never caught a save in progress in {ATTEMPTS} runs")


def _visible(folder: pathlib.Path) -> list[str]:
    """File names a user sees (the temporary file of a killed save is hidden)."""
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))


def test_kill_mid_save_leaves_no_output(big_model: pathlib.Path, tmp_path: pathlib.Path):
    output = tmp_path / "out.onnx"
    _kill_until_caught(big_model, output, lambda: output.unlink(missing_ok=True))
    assert not output.exists()
    assert _visible(tmp_path) == []


def test_kill_mid_save_leaves_the_old_output(big_model: pathlib.Path, tmp_path: pathlib.Path):
    output = tmp_path / "out.onnx"
    old = _model(4).SerializeToString()
    _kill_until_caught(big_model, output, lambda: output.write_bytes(old))
    assert output.read_bytes() == old
    assert _visible(tmp_path) == ["out.onnx"]


def test_the_kill_test_catches_a_writer_that_is_not_atomic(
    big_model: pathlib.Path, tmp_path: pathlib.Path
):
    """The negative twin: killed the same way, an in-place copy leaves a partial OUTPUT."""
    output = tmp_path / "out.onnx"
    old = _model(4).SerializeToString()
    _kill_until_caught(big_model, output, lambda: output.write_bytes(old), NAIVE_COPY)
    assert output.read_bytes() != old
    assert 0 < output.stat().st_size < big_model.stat().st_size


def test_kill_mid_save_onto_the_input_leaves_the_input(tmp_path: pathlib.Path, big_model):
    source = tmp_path / "model.onnx"
    os.link(big_model, source)  # same bytes, no copy; the save replaces the name only
    before = _sha256(source)
    _kill_until_caught(source, source, lambda: None)
    assert _sha256(source) == before
    assert _visible(tmp_path) == ["model.onnx"]


def test_a_completed_big_save_is_whole(big_model: pathlib.Path, tmp_path: pathlib.Path):
    """The twin of the kills: left alone, the same run writes a complete, valid model."""
    output = tmp_path / "out.onnx"
    output.write_bytes(_model(4).SerializeToString())
    process = _start(big_model, output)
    _, stderr = process.communicate(timeout=TIMEOUT_S)
    assert process.returncode == 0, stderr
    optimized = onnx.load(output)
    assert [n.op_type for n in optimized.graph.node] == ["Add", "Identity"]
    (weight,) = (t for t in optimized.graph.initializer if t.name == "w")
    assert (
        hashlib.sha256(weight.raw_data).digest()
        == hashlib.sha256(np.arange(BIG_FLOATS, dtype=np.float32).tobytes()).digest()
    )
    assert _visible(tmp_path) == ["out.onnx"]


def test_output_equal_to_input_is_replaced_atomically(tmp_path: pathlib.Path):
    """OUTPUT == INPUT: the file is replaced by a rename (a new inode), never rewritten."""
    source = tmp_path / "model.onnx"
    source.write_bytes(_model(16).SerializeToString())
    inode = source.stat().st_ino
    process = _start(source, source)
    _, stderr = process.communicate(timeout=TIMEOUT_S)
    assert process.returncode == 0, stderr
    assert source.stat().st_ino != inode
    optimized = onnx.load(source)
    check_model_safely(optimized)
    assert "EyeLike" not in [n.op_type for n in optimized.graph.node]
    assert _visible(tmp_path) == ["model.onnx"]


def _z_of(path: pathlib.Path) -> float:
    outputs = run_reference(onnx.load(path), {"x": np.zeros((4, 4), np.float32)})
    return float(outputs[1][0])


@pytest.mark.xfail(
    strict=True,
    reason="external data: OUTPUT.data is renamed into place before OUTPUT, so a crash"
    " between the two renames leaves the old OUTPUT reading the new data",
)
def test_crash_between_the_renames_of_an_external_data_save(
    tmp_path: pathlib.Path, monkeypatch
):
    old, new, output = tmp_path / "old.onnx", tmp_path / "new.onnx", tmp_path / "out.onnx"
    # 2 KiB weights: over the 1 KiB threshold, so they go to the data file.
    onnx.save(_model(512, np.full(512, 1.0)), old)
    onnx.save(_model(512, np.full(512, 2.0)), new)
    assert main(["optimize", str(old), str(output), "-q", "--external-data"]) == 0
    assert _z_of(output) == 1.0
    real_replace, renamed = os.replace, []

    def crash_on_second_rename(source, target):
        renamed.append(target)
        if len(renamed) == 2:
            raise KeyboardInterrupt("the process dies here")
        real_replace(source, target)

    monkeypatch.setattr(save.os, "replace", crash_on_second_rename)
    with pytest.raises(KeyboardInterrupt):
        main(["optimize", str(new), str(output), "-q", "--external-data"])
    monkeypatch.undo()
    assert _z_of(output) in (1.0, 2.0) and len(renamed) == 2
    assert _z_of(output) == 1.0  # the old OUTPUT, whole: its own data
