"""Ctrl-C: one line (``eyefold: interrupted``), exit status 130, no traceback from the
command or its workers, no temporary file left, OUTPUT whole (the old one or none)."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import eyefold

SAMPLES = Path(__file__).resolve().parents[2] / "sample_models"
MODELS = ("torch_eye_chain.onnx", "bool_mask.onnx", "static_matmul.onnx")


# Starts a command as a terminal starts a foreground one: with SIGINT at its default. A
# shell running the tests in the background without job control hands them SIGINT
# ignored, and a process that starts so keeps ignoring Ctrl-C, as it should.
_WITH_DEFAULT_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


def interrupt_when(command: list[str], ready: Callable[[], bool]) -> tuple[int, str, str]:
    """Runs ``command`` and presses Ctrl-C (SIGINT to its process group) once ``ready()``."""
    run = subprocess.Popen(
        [sys.executable, "-c", _WITH_DEFAULT_SIGINT, *command],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not ready():
        assert run.poll() is None, "the run ended before it could be interrupted"
        assert time.monotonic() < deadline
        time.sleep(0.002)
    os.killpg(run.pid, signal.SIGINT)
    out, err = run.communicate(timeout=120)
    return run.returncode, out, err


def temporaries(folder: Path) -> list[str]:
    return [path.name for path in folder.iterdir() if path.name.endswith(".tmp")]


@pytest.fixture(scope="module")
def big_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 192 MB model with one EyeLike: its save lasts long enough to be interrupted."""
    weights = numpy_helper.from_array(np.arange(48_000_000, dtype=np.float32), "w")
    shape = numpy_helper.from_array(np.array([4, 4], dtype=np.int64), "s")
    graph = helper.make_graph(
        [
            helper.make_node("ConstantOfShape", ["s"], ["c"]),
            helper.make_node("EyeLike", ["c"], ["eye"]),
            helper.make_node("Add", ["x", "eye"], ["y"]),
            helper.make_node("Identity", ["w"], ["w_out"]),
        ],
        "big",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4]),
            helper.make_tensor_value_info("w_out", TensorProto.FLOAT, [48_000_000]),
        ],
        [weights, shape],
    )
    path = tmp_path_factory.mktemp("big") / "big.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.slow
def test_ctrl_c_while_saving_one_model_leaves_output_as_it_was(
    big_model: Path, tmp_path: Path
) -> None:
    output = tmp_path / "o.onnx"
    shutil.copy(SAMPLES / MODELS[0], output)  # the OUTPUT a finished run would replace
    before = hashlib.sha256(output.read_bytes()).hexdigest()
    status, out, err = interrupt_when(
        [sys.executable, "-m", "eyefold", "optimize", str(big_model), str(output)],
        lambda: bool(temporaries(tmp_path)),  # the save has begun
    )
    assert (status, out, err) == (130, "", "eyefold: interrupted\n")
    assert temporaries(tmp_path) == []
    assert hashlib.sha256(output.read_bytes()).hexdigest() == before


@pytest.mark.slow
def test_ctrl_c_in_a_batch_stops_the_workers_without_a_trace(tmp_path: Path) -> None:
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    for number in range(48):
        shutil.copy(SAMPLES / MODELS[number % 3], zoo / f"m{number:02}.onnx")
    alone = {
        Path(r.input).name: r.output for r in eyefold.optimize_files([zoo], tmp_path / "a")
    }
    out = tmp_path / "out"
    status, _, err = interrupt_when(
        [str(Path(sys.executable).parent / "eyefold"), "optimize", str(zoo),
         "--output-dir", str(out), "-j", "2"],
        lambda: out.is_dir() and any(path.suffix == ".onnx" for path in out.iterdir()),
    )  # fmt: skip
    assert (status, err) == (130, "eyefold: interrupted\n")
    assert temporaries(out) == []
    written = [path.name for path in out.glob("*.onnx")]
    assert 1 <= len(written) < 48
    for name in written:
        assert (out / name).read_bytes() == Path(alone[name]).read_bytes()


def test_a_temporary_file_an_interrupt_caught_before_its_try_is_removed(
    tmp_path: Path,
) -> None:
    """Ctrl-C right after a temporary file is created, before the code that owns it runs."""
    from eyefold.model_files.atomic_write import discard_unfinished, open_temporary

    temp_path, fd = open_temporary(str(tmp_path / "o.onnx"))
    os.close(fd)
    assert temporaries(tmp_path) == [Path(temp_path).name]
    discard_unfinished()  # what the command does on its way out
    assert temporaries(tmp_path) == []


def test_an_interrupt_as_output_is_renamed_keeps_the_data_it_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C raised just as the rename that switches OUTPUT returns: the new OUTPUT
    reads the new data file, which must not be removed as an unused claimed name."""
    import onnx_ir as ir

    from eyefold.model_files import load_model, save_model

    weight = helper.make_tensor(
        "w", TensorProto.FLOAT, [1024], np.arange(1024, dtype=np.float32).tobytes(), raw=True
    )
    graph = helper.make_graph(
        [helper.make_node("Identity", ["w"], ["z"])],
        "g",
        [],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1024])],
        [weight],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    output = tmp_path / "o.onnx"
    save_model(ir.serde.deserialize_model(proto), str(output), external_data=True)

    real_replace = os.replace

    def interrupted_replace(source, target):
        real_replace(source, target)
        if os.fspath(target) == str(output):
            raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted_replace)
    with pytest.raises(KeyboardInterrupt):
        save_model(ir.serde.deserialize_model(proto), str(output), external_data=True)
    monkeypatch.setattr(os, "replace", real_replace)
    loaded = load_model(str(output))
    values = loaded.graph.initializers["w"].const_value.numpy()
    assert np.array_equal(values, np.arange(1024, dtype=np.float32))
