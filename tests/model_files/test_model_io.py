"""Loading and atomic saving, external data, OUTPUT == INPUT, and a > 2 GiB round trip."""

from __future__ import annotations

import errno
import hashlib
import os
import time
from pathlib import Path
from typing import BinaryIO

import ml_dtypes
import numpy as np
import onnx
import onnx.numpy_helper
import onnx_ir as ir
import pytest

from eyefold.errors import ModelIOError
from eyefold.model_files import (
    EXTERNAL_DATA_THRESHOLD_BYTES,
    data_file,
    external_data_files,
    load_model,
    save_model,
)
from eyefold.model_files.atomic_write import STALE_TEMPORARY_SECONDS
from eyefold.model_files.sparse_write import write_tensor
from eyefold.model_files.tensors import referenced_files
from tests.helpers.cli import run_measured

GiB = 1 << 30


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _weighted_model(rows: int = 256, cols: int = 1024) -> tuple[ir.Model, np.ndarray]:
    """x: float[4,4] -> MatMul(x, EyeLike(x)), plus a random weight w reduced to s."""
    weight = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    model = ir.from_onnx_text(
        """
        <ir_version: 10, opset_import: ["" : 22]>
        g (float[4, 4] x) => (float[4, 4] y, float s) <float[2] small = {1, 2}> {
            eye = EyeLike(x)
            y = MatMul(x, eye)
            s0 = ReduceSum <keepdims = 0> (small)
            s = Add(s0, s0)
        }
        """
    )
    value = ir.Value(
        name="w",
        shape=ir.Shape(weight.shape),
        type=ir.TensorType(ir.DataType.FLOAT),
        const_value=ir.tensor(weight, name="w"),
    )
    model.graph.register_initializer(value)
    reduce = ir.node("ReduceSum", [value], attributes={"keepdims": 0}, name="rw")
    reduce.outputs[0].name = "sw"
    reduce.outputs[0].type = ir.TensorType(ir.DataType.FLOAT)
    reduce.outputs[0].shape = ir.Shape([])
    model.graph.append(reduce)
    model.graph.outputs.append(reduce.outputs[0])
    return model, weight


def _weight_of(path: Path) -> np.ndarray:
    proto = onnx.load(str(path))
    return next(
        onnx.numpy_helper.to_array(t) for t in proto.graph.initializer if t.name == "w"
    )


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


# --- loading -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        (b"this is not a protobuf \xff\xfe", "not an ONNX model"),
        (b"", "not an ONNX model"),
    ],
    ids=["missing", "garbage", "empty"],
)
def test_load_rejects(tmp_path: Path, content: bytes | None, message: str) -> None:
    path = tmp_path / "m.onnx"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ModelIOError, match=message):
        load_model(path)


def test_load_rejects_truncated_and_folder(tmp_path: Path) -> None:
    model, _ = _weighted_model()
    full = tmp_path / "full.onnx"
    save_model(model, full)
    truncated = tmp_path / "cut.onnx"
    truncated.write_bytes(full.read_bytes()[: full.stat().st_size // 2])
    with pytest.raises(ModelIOError):
        load_model(truncated)
    with pytest.raises(ModelIOError, match="not a regular file"):
        load_model(tmp_path)
    assert load_model(full).graph.initializers["w"].const_value.shape == ir.Shape([256, 1024])


def test_load_keeps_external_data_lazy(tmp_path: Path) -> None:
    model, weight = _weighted_model()
    ir.save(model, tmp_path / "m.onnx", external_data="m.bin")
    loaded = load_model(tmp_path / "m.onnx")
    tensor = loaded.graph.initializers["w"].const_value
    assert isinstance(tensor, ir.ExternalTensor)
    assert external_data_files(loaded) == [str(tmp_path / "m.bin")]
    np.testing.assert_array_equal(tensor.numpy(), weight)


@pytest.mark.parametrize(
    ("location", "data_bytes", "message"),
    [
        ("../m.bin", None, "outside the model's folder"),
        ("gone.bin", None, "does not exist"),
        ("short.bin", 100, "the tensor ends at byte"),
    ],
    ids=["traversal", "missing", "short"],
)
def test_load_rejects_bad_external_data(
    tmp_path: Path, location: str, data_bytes: int | None, message: str
) -> None:
    model, _ = _weighted_model()
    (tmp_path / "inner").mkdir()
    ir.save(model, tmp_path / "m.onnx", external_data="m.bin")
    if data_bytes is not None:
        (tmp_path / "inner" / location).write_bytes(b"\0" * data_bytes)
    proto = onnx.load(str(tmp_path / "m.onnx"), load_external_data=False)
    for tensor in proto.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = location
    onnx.save(proto, str(tmp_path / "inner" / "m.onnx"))
    with pytest.raises(ModelIOError, match=message):
        load_model(tmp_path / "inner" / "m.onnx")
    # The untouched original loads, with the same data file one folder up.
    assert external_data_files(load_model(tmp_path / "m.onnx")) == [str(tmp_path / "m.bin")]


# --- saving --------------------------------------------------------------------------


def test_save_inline_round_trip(tmp_path: Path) -> None:
    model, weight = _weighted_model()
    saved = save_model(model, tmp_path / "m.onnx")
    assert saved.data_path is None
    assert saved.bytes == (tmp_path / "m.onnx").stat().st_size
    np.testing.assert_array_equal(_weight_of(tmp_path / "m.onnx"), weight)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]
    # A plain open() would give 0o666 less the umask; so must the renamed temporary file.
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "m.onnx").stat().st_mode & 0o777 == 0o666 & ~umask


def test_save_external_data_beside_output(tmp_path: Path) -> None:
    model, weight = _weighted_model()
    saved = save_model(model, tmp_path / "m.onnx", external_data=True)
    data = tmp_path / "m.onnx.data"
    assert saved.data_path == str(data)
    assert saved.external_tensors == 1  # only w is over the threshold
    assert data.stat().st_size == weight.nbytes
    assert saved.bytes == data.stat().st_size + (tmp_path / "m.onnx").stat().st_size
    proto = onnx.load(str(tmp_path / "m.onnx"), load_external_data=False)
    locations = {
        t.name: {e.key: e.value for e in t.external_data}.get("location")
        for t in proto.graph.initializer
    }
    assert locations == {"small": None, "w": "m.onnx.data"}
    np.testing.assert_array_equal(_weight_of(tmp_path / "m.onnx"), weight)
    # The in-memory model is unchanged by the save.
    assert not isinstance(model.graph.initializers["w"].const_value, ir.ExternalTensor)
    assert weight.nbytes > EXTERNAL_DATA_THRESHOLD_BYTES
    assert _leftovers(tmp_path) == []


def test_external_input_saved_elsewhere_gets_its_own_data_file(tmp_path: Path) -> None:
    model, weight = _weighted_model()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ir.save(model, tmp_path / "a" / "m.onnx", external_data="weights.bin")
    before = _digest(tmp_path / "a" / "weights.bin")
    loaded = load_model(tmp_path / "a" / "m.onnx")
    saved = save_model(
        loaded, tmp_path / "b" / "out.onnx", source_path=tmp_path / "a" / "m.onnx"
    )
    assert saved.data_path == str(tmp_path / "b" / "out.onnx.data")
    np.testing.assert_array_equal(_weight_of(tmp_path / "b" / "out.onnx"), weight)
    assert _digest(tmp_path / "a" / "weights.bin") == before


@pytest.mark.parametrize("rounds", [1, 2], ids=["foreign-data-name", "own-data-name"])
def test_output_equal_to_input_with_lazy_external_data(tmp_path: Path, rounds: int) -> None:
    """Round 2 rewrites m.onnx.data while the model's tensors are still mapped from it."""
    model, weight = _weighted_model()
    path = tmp_path / "m.onnx"
    ir.save(model, path, external_data="m.onnx.data" if rounds == 2 else "weights.bin")
    for _ in range(rounds):
        loaded = load_model(path)
        tensor = loaded.graph.initializers["w"].const_value
        assert isinstance(tensor, ir.ExternalTensor)
        tensor.numpy()  # mapped now, like a pass that read it
        save_model(loaded, path, source_path=path)
        np.testing.assert_array_equal(_weight_of(path), weight)
        # The saved model object still reads correct values afterwards.
        after = loaded.graph.initializers["w"].const_value
        np.testing.assert_array_equal(after.numpy(), weight)
    assert _leftovers(tmp_path) == []


def test_refuses_to_overwrite_the_inputs_data_file(tmp_path: Path) -> None:
    """a.onnx keeps its tensors in b.onnx.data: saving to b.onnx must not replace it."""
    model, weight = _weighted_model()
    ir.save(model, tmp_path / "a.onnx", external_data="b.onnx.data")
    before = _digest(tmp_path / "b.onnx.data")
    loaded = load_model(tmp_path / "a.onnx")
    with pytest.raises(ModelIOError, match="holds the input's tensors"):
        save_model(loaded, tmp_path / "b.onnx", source_path=tmp_path / "a.onnx")
    assert _digest(tmp_path / "b.onnx.data") == before
    assert not (tmp_path / "b.onnx").exists()
    np.testing.assert_array_equal(_weight_of(tmp_path / "a.onnx"), weight)
    # Saving under another name works and leaves a.onnx's data alone.
    save_model(loaded, tmp_path / "c.onnx", source_path=tmp_path / "a.onnx")
    assert _digest(tmp_path / "b.onnx.data") == before


def test_failed_write_keeps_previous_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, _ = _weighted_model()
    path = tmp_path / "m.onnx"
    save_model(model, path, external_data=True)
    model_before, data_before = _digest(path), _digest(tmp_path / "m.onnx.data")

    def disk_full(tensor: ir.TensorProtocol, handle: BinaryIO, *checked: object) -> None:
        handle.write(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(data_file, "write_tensor", disk_full)
    with pytest.raises(ModelIOError, match="No space left"):
        save_model(model, path, external_data=True)
    assert (_digest(path), _digest(tmp_path / "m.onnx.data")) == (model_before, data_before)
    assert _leftovers(tmp_path) == []


def _data_names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".data" in p.name)


def test_saves_over_one_output_alternate_between_two_data_names(tmp_path: Path) -> None:
    """The data file the old OUTPUT reads is never overwritten: each save writes the other
    name, then removes the old one."""
    model, weight = _weighted_model()
    path = tmp_path / "m.onnx"
    names = []
    for _ in range(3):
        saved = save_model(model, path, external_data=True)
        names.append(os.path.basename(saved.data_path))
        assert referenced_files(str(path)) == [saved.data_path]
        assert _data_names(tmp_path) == [names[-1]]  # the old one is gone
        np.testing.assert_array_equal(_weight_of(path), weight)
    assert names == ["m.onnx.data", "m.onnx.data.1", "m.onnx.data"]
    assert _leftovers(tmp_path) == []


def test_a_file_left_at_the_other_name_is_kept_and_skipped(tmp_path: Path) -> None:
    """m.onnx.data.1 left by an interrupted save (or anyone): never written, never removed."""
    model, weight = _weighted_model()
    path = tmp_path / "m.onnx"
    save_model(model, path, external_data=True)
    (tmp_path / "m.onnx.data.1").write_bytes(b"not ours to judge")
    saved = save_model(model, path, external_data=True)
    assert saved.data_path == str(tmp_path / "m.onnx.data.2")
    assert (tmp_path / "m.onnx.data.1").read_bytes() == b"not ours to judge"
    assert _data_names(tmp_path) == ["m.onnx.data.1", "m.onnx.data.2"]
    np.testing.assert_array_equal(_weight_of(path), weight)


def test_only_data_files_named_after_output_are_removed(tmp_path: Path) -> None:
    """weights.bin, which the old OUTPUT read, may be shared with other models: it stays.
    m.onnx.data, the old OUTPUT's own, goes when the new OUTPUT no longer reads it."""
    model, _ = _weighted_model()
    path = tmp_path / "m.onnx"
    ir.save(model, path, external_data="weights.bin")
    before = _digest(tmp_path / "weights.bin")
    save_model(model, path, external_data=True)
    assert _data_names(tmp_path) == ["m.onnx.data"]
    assert _digest(tmp_path / "weights.bin") == before
    save_model(model, path)  # inline now: m.onnx.data is read by nothing
    assert not (tmp_path / "m.onnx.data").exists()
    assert _digest(tmp_path / "weights.bin") == before
    assert referenced_files(str(path)) == []


def test_stale_temporary_files_of_output_are_removed(tmp_path: Path) -> None:
    """Left by killed saves: removed by the next save to the same OUTPUT once old enough."""
    model, _ = _weighted_model()
    old = time.time() - STALE_TEMPORARY_SECONDS - 60
    (tmp_path / ".other.onnx.2badcafe.tmp").write_bytes(b"partial")
    (tmp_path / ".m.onnx.4badcafe.tmp").symlink_to(tmp_path / ".other.onnx.2badcafe.tmp")
    for name, age in [
        (".m.onnx.0badcafe.tmp", old),  # OUTPUT's pattern, old: the only one removed
        (".m.onnx.1badcafe.tmp", time.time()),  # recent: a save may still be writing it
        (".m.onnx.3badcafe.tmp.keep", old),  # not the pattern
    ]:
        (tmp_path / name).write_bytes(b"partial")
        os.utime(tmp_path / name, (age, age))
    for name in [
        ".other.onnx.2badcafe.tmp",
        ".m.onnx.4badcafe.tmp",
    ]:  # another target's; a link
        os.utime(tmp_path / name, (old, old), follow_symlinks=False)
    save_model(model, tmp_path / "m.onnx", external_data=True)
    assert _leftovers(tmp_path) == [
        ".m.onnx.1badcafe.tmp",
        ".m.onnx.3badcafe.tmp.keep",
        ".m.onnx.4badcafe.tmp",
        ".other.onnx.2badcafe.tmp",
    ]


@pytest.mark.parametrize("target", ["missing/m.onnx", "."], ids=["no-folder", "a-folder"])
def test_save_rejects_bad_targets(tmp_path: Path, target: str) -> None:
    model, _ = _weighted_model()
    with pytest.raises(ModelIOError, match="cannot write"):
        save_model(model, tmp_path / target)


# --- large models --------------------------------------------------------------------


def _sparse_external_model(path: Path, tensors: int, tensor_bytes: int) -> None:
    """A model whose ``tensors`` float weights live in a sparse (unallocated) data file."""
    data = path.name + ".weights"
    initializers, nodes, outputs = [], [], []
    for i in range(tensors):
        tensor = onnx.TensorProto(
            name=f"w{i}", data_type=onnx.TensorProto.FLOAT, dims=[tensor_bytes // 4]
        )
        tensor.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (
            ("location", data),
            ("offset", str(i * tensor_bytes)),
            ("length", str(tensor_bytes)),
        ):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
        initializers.append(tensor)
        nodes.append(onnx.helper.make_node("Shape", [f"w{i}"], [f"s{i}"], name=f"shape{i}"))
        outputs.append(
            onnx.helper.make_tensor_value_info(f"s{i}", onnx.TensorProto.INT64, [1])
        )
    nodes.append(onnx.helper.make_node("EyeLike", ["x"], ["eye"], name="eye"))
    nodes.append(onnx.helper.make_node("MatMul", ["x", "eye"], ["y"], name="mm"))
    outputs.append(onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4, 4]))
    graph = onnx.helper.make_graph(
        nodes,
        "big",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 4])],
        outputs,
        initializer=initializers,
    )
    model = onnx.helper.make_model(
        graph, opset_imports=[onnx.helper.make_opsetid("", 22)], ir_version=10
    )
    onnx.save(model, str(path))
    with open(path.parent / data, "wb") as handle:
        handle.truncate(tensors * tensor_bytes)
        # A marker in the last tensor, to see that the right bytes were copied.
        handle.seek(tensors * tensor_bytes - 4)
        handle.write(np.float32(7.5).tobytes())


@pytest.mark.slow
def test_over_2gib_model_round_trip(tmp_path: Path) -> None:
    """A 3 GiB model (sparse weights) in, optimized, out with external data, then in place.

    Peak memory stays far below the model size: weights are copied file to file, never held.
    """
    tensor_bytes, tensors = 256 << 20, 12  # 3 GiB
    source = tmp_path / "big.onnx"
    _sparse_external_model(source, tensors, tensor_bytes)
    model_digest = _digest(source)
    result, peak = run_measured(["optimize", str(source), str(tmp_path / "out.onnx"), "-q"])
    assert result.returncode == 0, result.stderr
    assert peak < GiB // 2, f"peak RSS {peak} bytes for a {tensors * tensor_bytes} byte model"
    data = tmp_path / "out.onnx.data"
    assert data.stat().st_size >= tensors * tensor_bytes > 2 * GiB
    assert _digest(source) == model_digest
    out = load_model(tmp_path / "out.onnx")
    assert not any(node.op_type == "EyeLike" for node in out.graph)
    last = out.graph.initializers[f"w{tensors - 1}"].const_value
    assert isinstance(last, ir.ExternalTensor) and last.location == "out.onnx.data"
    assert last.numpy()[-1] == np.float32(7.5)
    np.testing.assert_array_equal(out.graph.initializers["eye"].const_value.numpy(), np.eye(4))
    del out, last

    # In place: OUTPUT == INPUT, its data now read lazily from the file being replaced.
    result, peak = run_measured(
        ["optimize", str(tmp_path / "out.onnx"), str(tmp_path / "out.onnx"), "-q"]
    )
    assert result.returncode == 0, result.stderr
    assert peak < GiB // 2
    again = load_model(tmp_path / "out.onnx")
    assert again.graph.initializers[f"w{tensors - 1}"].const_value.numpy()[-1] == 7.5
    assert _leftovers(tmp_path) == []


@pytest.mark.slow
def test_folded_output_over_2gib_is_saved_with_external_data(tmp_path: Path) -> None:
    """No --external-data: a 2.15 GB folded constant cannot be inlined, so it goes external."""
    rows = 23200  # 23200^2 float32 = 2.15e9 bytes > 2 GiB - margin
    source = tmp_path / "huge.onnx"
    source.write_bytes(
        onnx.parser.parse_model(
            f"""
            <ir_version: 10, opset_import: ["" : 22]>
            g (float[{rows}, {rows}] x) => (float[{rows}, {rows}] y) {{
                eye = EyeLike <k = -1> (x)
                y = Add(x, eye)
            }}
            """
        ).SerializeToString()
    )
    result, peak = run_measured(
        ["optimize", str(source), str(tmp_path / "out.onnx"), "--size-limit", "3G", "-q"]
    )
    assert result.returncode == 0, result.stderr
    folded = rows * rows * 4
    assert peak < folded + GiB // 2  # the folded bytes plus a small constant
    out = load_model(tmp_path / "out.onnx")
    eye = out.graph.initializers["eye"].const_value
    assert isinstance(eye, ir.ExternalTensor) and eye.nbytes == folded
    array = eye.numpy()
    assert array[0].sum() == 0  # k = -1: the first row is empty
    middle = rows // 2
    assert array[middle].sum() == 1 and array[middle, middle - 1] == 1
    assert array[rows - 1, rows - 2] == 1


# --- sparse-aware tensor writing ------------------------------------------------------


def _identity(rows: int, dtype: type) -> np.ndarray:
    return np.eye(rows, dtype=dtype)


@pytest.mark.parametrize(
    "tensor",
    [
        ir.tensor(np.zeros((3000, 1000), np.float32), name="t"),
        ir.tensor(_identity(3000, np.float32), name="t"),
        ir.tensor(_identity(700, np.float64)[:, :699].copy(), name="t"),  # odd tail
        ir.tensor(
            np.random.default_rng(1).standard_normal(12345).astype(np.float16), name="t"
        ),
        ir.tensor(_identity(2500, ml_dtypes.bfloat16), name="t"),
        ir.tensor(
            np.array([1, -2, 3, 0, 0, 7, -8], np.int8), dtype=ir.DataType.INT4, name="t"
        ),
        ir.tensor(np.eye(5000, dtype=np.bool_), name="t"),
        ir.tensor(np.arange(3, dtype=np.int64), name="t"),
        ir.tensor(np.zeros(0, np.float32), name="t"),
    ],
    ids=[
        "all-zero",
        "identity",
        "odd-size",
        "random-f16",
        "bf16-identity",
        "int4-packed",
        "bool",
        "tiny",
        "empty",
    ],
)
def test_write_tensor_reproduces_tobytes(tmp_path: Path, tensor: ir.Tensor) -> None:
    path = tmp_path / "data"
    with open(path, "wb") as handle:
        handle.write(b"head")
        write_tensor(tensor, handle)
        assert handle.tell() == 4 + tensor.nbytes
        handle.truncate(handle.tell())
    assert path.read_bytes() == b"head" + tensor.tobytes()


def test_write_tensor_copies_sparse_external_data_as_holes(tmp_path: Path) -> None:
    source = tmp_path / "src.bin"
    with open(source, "wb") as handle:
        handle.truncate(64 << 20)
        handle.seek(40 << 20)
        handle.write(b"\x01\x02\x03\x04")
    tensor = ir.ExternalTensor(
        "src.bin",
        1 << 20,
        48 << 20,
        ir.DataType.UINT8,
        shape=ir.Shape([48 << 20]),
        name="w",
        base_dir=str(tmp_path),
    )
    target = tmp_path / "out.bin"
    with open(target, "wb") as handle:
        write_tensor(tensor, handle)
        handle.truncate(handle.tell())
    data = target.read_bytes()
    assert data == tensor.tobytes()
    assert data[(39 << 20) : (39 << 20) + 4] == b"\x01\x02\x03\x04"
    if source.stat().st_blocks * 512 < (8 << 20):  # the filesystem keeps holes at all
        assert target.stat().st_blocks * 512 < (8 << 20)


def test_write_tensor_refuses_data_outside_base_dir(tmp_path: Path) -> None:
    (tmp_path / "inner").mkdir()
    (tmp_path / "secret.bin").write_bytes(b"\0" * 16)
    tensor = ir.ExternalTensor(
        "../secret.bin",
        0,
        16,
        ir.DataType.UINT8,
        shape=ir.Shape([16]),
        name="w",
        base_dir=str(tmp_path / "inner"),
    )
    with (
        open(tmp_path / "out.bin", "wb") as handle,
        pytest.raises(ValueError, match="outside"),
    ):
        write_tensor(tensor, handle)


@pytest.mark.parametrize(
    "existing_output",
    [None, "inline-model"],
    ids=["stray-data-file", "output-does-not-own-it"],
)
def test_refuses_a_data_file_output_does_not_own(
    tmp_path: Path, existing_output: str | None
) -> None:
    model, _ = _weighted_model()
    stray = tmp_path / "o.onnx.data"
    stray.write_bytes(b"another model's weights")
    if existing_output:
        save_model(model, tmp_path / "o.onnx")  # inline: references no data file
    before = {p.name: _digest(p) for p in tmp_path.iterdir()}
    with pytest.raises(ModelIOError, match="is not the data file of"):
        save_model(model, tmp_path / "o.onnx", external_data=True)
    assert {p.name: _digest(p) for p in tmp_path.iterdir()} == before


def test_resaving_over_own_external_data_is_allowed(tmp_path: Path) -> None:
    model, weight = _weighted_model()
    save_model(model, tmp_path / "o.onnx", external_data=True)
    model.graph.initializers["w"].const_value = ir.tensor(weight * 2, name="w")
    save_model(model, tmp_path / "o.onnx", external_data=True)
    np.testing.assert_array_equal(_weight_of(tmp_path / "o.onnx"), weight * 2)
    assert _leftovers(tmp_path) == []
