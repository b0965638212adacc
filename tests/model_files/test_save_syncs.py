"""What a save flushes to disk: the model file always, the folder only before a removal.

On a busy disk each flush costs milliseconds, more than all the rest of a small model's
save, so a save flushes only what its crash guarantee needs
(:mod:`eyefold.model_files.save`): the new file before the rename that puts it in place,
and the folder once more only when old data files are removed after that rename.
"""

from __future__ import annotations

import os
import pathlib
import stat

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from eyefold.cli.main import main


def _model() -> onnx.ModelProto:
    """``y = Add(x, EyeLike(x))`` and ``z = Identity(w)``, ``w`` 2 KiB (over the 1 KiB
    threshold, so ``--external-data`` puts it in a data file)."""
    weight = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[512])
    weight.raw_data = np.arange(512, dtype=np.float32).tobytes()
    graph = helper.make_graph(
        [
            helper.make_node("EyeLike", ["x"], ["e"], name="eye"),
            helper.make_node("Add", ["x", "e"], ["y"], name="add"),
            helper.make_node("Identity", ["w"], ["z"], name="keep"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, [512]),
        ],
        initializer=[weight],
    )
    return helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 22)])


@pytest.fixture
def operations(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The run's flushes, ("file" or "folder", path), and removals, ("remove", path)."""
    ran: list[tuple[str, str]] = []
    real_fsync, real_remove = os.fsync, os.remove

    def fsync(fd: int) -> None:
        kind = "folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"
        ran.append((kind, os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def remove(path: str, *args: object, **kwargs: object) -> None:
        ran.append(("remove", os.fspath(path)))
        real_remove(path, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "remove", remove)
    return ran


pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")


def test_a_plain_save_flushes_only_the_model_file(
    tmp_path: pathlib.Path, operations: list[tuple[str, str]]
) -> None:
    source = tmp_path / "in.onnx"
    onnx.save(_model(), source)
    output = tmp_path / "out.onnx"
    assert main(["optimize", str(source), str(output), "-q"]) == 0
    flushes = [(kind, os.path.basename(path)) for kind, path in operations if kind != "remove"]
    assert len(flushes) == 1, operations
    kind, name = flushes[0]
    assert kind == "file" and name.startswith(".out.onnx.") and name.endswith(".tmp")
    assert "EyeLike" not in [n.op_type for n in onnx.load(output).graph.node]


def test_the_folder_is_flushed_before_an_old_data_file_is_removed(
    tmp_path: pathlib.Path, operations: list[tuple[str, str]]
) -> None:
    source = tmp_path / "in.onnx"
    onnx.save(_model(), source)
    output = tmp_path / "out.onnx"
    assert main(["optimize", str(source), str(output), "-q", "--external-data"]) == 0
    old_data = tmp_path / "out.onnx.data"
    assert old_data.is_file()
    operations.clear()
    assert main(["optimize", str(source), str(output), "-q"]) == 0  # now one file
    assert not old_data.exists()
    removed = operations.index(("remove", str(old_data)))
    assert ("folder", str(tmp_path)) in operations[:removed], operations
    weights = onnx.load(output).graph.initializer
    assert "w" in [w.name for w in weights]
    assert not any(w.external_data for w in weights)
