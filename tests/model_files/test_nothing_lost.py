"""Nothing lost: a kill during save leaves the old OUTPUT or none, never a partial file.

A real ``python -m eyefold optimize`` subprocess saves a ~300 MB model, so the save takes
long enough to interrupt. The test polls OUTPUT's folder until the temporary file eyefold
writes first has grown, then sends SIGKILL (no handler, no cleanup can run) and checks
what is left. OUTPUT == INPUT is covered the same way, and once run to completion.

With external data there are two files to switch. A forked save SIGKILLs itself after each
file operation in turn (creating, flushing, renaming, removing); after every one OUTPUT
must load as the old model reading its old data or the new one reading its new data.
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
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

from eyefold.model_files import load_model, save_model
from eyefold.model_files.tensors import referenced_files
from eyefold.testing import check_model_safely

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


@pytest.mark.slow
def test_kill_mid_save_leaves_no_output(big_model: pathlib.Path, tmp_path: pathlib.Path):
    output = tmp_path / "out.onnx"
    _kill_until_caught(big_model, output, lambda: output.unlink(missing_ok=True))
    assert not output.exists()
    assert _visible(tmp_path) == []


@pytest.mark.slow
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


@pytest.mark.slow
def test_kill_mid_save_onto_the_input_leaves_the_input(tmp_path: pathlib.Path, big_model):
    source = tmp_path / "model.onnx"
    os.link(big_model, source)  # same bytes, no copy; the save replaces the name only
    before = _sha256(source)
    _kill_until_caught(source, source, lambda: None)
    assert _sha256(source) == before
    assert _visible(tmp_path) == ["model.onnx"]


@pytest.mark.slow
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


@pytest.mark.slow
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


# --- external data: a kill after every file operation of the save ------------------

# The os functions through which a save creates, flushes, renames and removes files.
FILE_OPERATIONS = ("open", "fsync", "chmod", "replace", "remove")


def _weights(fill: float) -> np.ndarray:
    # 2 KiB: over the 1 KiB threshold, so w goes to the data file.
    return np.full(512, fill, np.float32)


def _generation_of(path: pathlib.Path) -> tuple[str, np.ndarray]:
    """The model file's own mark (its doc string) and the w it reads, as eyefold loads
    them: refused if a data file is missing, short or misplaced."""
    model = load_model(path)
    return model.doc_string, model.graph.initializers["w"].const_value.numpy()


def _marked(floats: int, values: np.ndarray, mark: str) -> onnx.ModelProto:
    model = _model(floats, values)
    model.doc_string = mark
    return model


def _prepare_output(folder: pathlib.Path, generations: int) -> pathlib.Path:
    """OUTPUT saved ``generations`` times with external data: it reads .data, then .data.1."""
    source = folder / "old.onnx"
    onnx.save(_marked(512, _weights(1.0), "old"), source)
    output = folder / "out.onnx"
    for _ in range(generations):
        save_model(load_model(source), output, external_data=True, source_path=source)
    source.unlink()
    return output


def _new_model(folder: pathlib.Path, output: pathlib.Path, in_place: bool):
    """The model to save over OUTPUT, and its source: OUTPUT itself, or another file."""
    if in_place:
        model = load_model(output)
        model.graph.initializers["w"].const_value.numpy()  # mapped, like a pass read it
        model.graph.initializers["w"].const_value = ir.tensor(_weights(2.0), name="w")
        model.doc_string = "new"
        return model, output
    source = folder / "new.onnx"
    onnx.save(_marked(512, _weights(2.0), "new"), source)
    return load_model(source), source


def _save_in_child(
    folder: pathlib.Path, output: pathlib.Path, in_place: bool, kill_after: int
) -> tuple[int, list[str]]:
    """Saves in a forked child that SIGKILLs itself after its ``kill_after``-th file
    operation (0: never); returns its wait status and the operations it ran."""
    log = folder.parent / f"{folder.name}.ops"
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 1
        try:
            model, source = _new_model(folder, output, in_place)
            ran: list[str] = []

            def counted(name: str, real):
                def operation(*args, **kwargs):
                    try:
                        return real(*args, **kwargs)
                    finally:
                        ran.append(name)
                        if len(ran) == kill_after:
                            os.kill(os.getpid(), signal.SIGKILL)

                return operation

            for name in FILE_OPERATIONS:
                setattr(os, name, counted(name, getattr(os, name)))
            save_model(model, output, external_data=True, source_path=source)
            log.write_text("\n".join(ran))
            status = 0
        finally:
            os._exit(status)
    deadline = time.monotonic() + TIMEOUT_S
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            pytest.fail(f"the save killed after step {kill_after} hung")
        time.sleep(0.005)
    return done[1], log.read_text().split("\n") if log.exists() else []


@pytest.mark.slow
@pytest.mark.parametrize("generations", [1, 2], ids=["reads-data", "reads-data.1"])
@pytest.mark.parametrize("in_place", [False, True], ids=["other-input", "output-is-input"])
def test_a_kill_at_every_step_of_an_external_data_save(
    tmp_path: pathlib.Path, in_place: bool, generations: int
):
    """After a SIGKILL at any step, OUTPUT is the whole old model with its old data or the
    whole new one with its new data; the next save then completes."""
    old, new = _weights(1.0), _weights(2.0)
    uncut = tmp_path / "uncut"
    uncut.mkdir()
    status, operations = _save_in_child(
        uncut, _prepare_output(uncut, generations), in_place, kill_after=0
    )
    assert status == 0 and operations.count("replace") == 2 and "remove" in operations
    seen = []
    for step in range(1, len(operations) + 1):
        folder = tmp_path / f"step{step}"
        folder.mkdir()
        output = _prepare_output(folder, generations)
        status, _ = _save_in_child(folder, output, in_place, kill_after=step)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, step
        mark, w = _generation_of(output)
        expected = old if mark == "old" else new
        assert mark in ("old", "new") and np.array_equal(w, expected), (step, mark, w[0])
        seen.append(mark)
        # The next save completes, whatever the kill left behind.
        model, source = _new_model(folder, output, in_place)
        saved = save_model(model, output, external_data=True, source_path=source)
        mark, w = _generation_of(output)
        assert mark == "new" and np.array_equal(w, new)
        assert referenced_files(str(output)) == [saved.data_path]
    # The switch from old to new happens once, at the rename of OUTPUT, not before.
    switch = seen.index("new")  # seen[i]: killed after operations[i]
    assert seen == ["old"] * switch + ["new"] * (len(seen) - switch)
    # Old up to the rename of the data file included, new from the rename of OUTPUT on.
    assert operations[switch - 1 : switch + 1] == ["replace", "replace"]
