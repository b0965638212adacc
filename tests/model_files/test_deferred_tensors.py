"""Deferred tensors: a file written from the arrays holds the bytes of the filled-in proto.

On both paths: the file path's splice adds its new initializers to a proto, the
whole-model path's save defers those of an onnx-ir model.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import onnx_ir as ir
import pytest

import eyefold
from eyefold.cli import main
from eyefold.model_files import deferred_tensors
from eyefold.model_files.deferred_tensors import DeferredTensors, streamable_array
from eyefold.model_files.wire import varint
from eyefold.testing import assert_same_outputs
from tests.helpers.cli import run_measured

BIG = deferred_tensors.STREAM_MIN_BYTES


def _base_proto() -> onnx.ModelProto:
    """A model with fields on both sides of the initializers, in the graph and outside it."""
    proto = onnx.parser.parse_model(
        """<ir_version: 10, opset_import: ["" : 22, "dom" : 1], producer_name: "t",
            doc_string: "a model", metadata_props: ["k" : "v"]>
        g (float[2] x) => (float[2] z) <float[2] w = {1.0, 2.0}, float[2] mid> {
            mid = Add(x, w)
            z = dom.Twice(mid)
        }
        <domain: "dom", opset_import: ["" : 22]>
        Twice (a) => (b) { b = Add(a, a) }"""
    )
    proto.graph.doc_string = "the graph"
    proto.graph.metadata_props.add(key="gk", value="gv")
    return proto


def _value(name: str, array: np.ndarray, dtype: ir.DataType, **extra: object) -> ir.Value:
    tensor = ir.Tensor(array, dtype=dtype, name=name, **extra)  # type: ignore[arg-type]
    return ir.Value(name=name, shape=ir.Shape(array.shape), const_value=tensor)


def _values() -> list[ir.Value]:
    side = 600  # 600 x 600 x 4 bytes > 1 MiB; the narrower types get bigger sides
    return [
        _value("f32", np.eye(side, dtype=np.float32), ir.DataType.FLOAT),
        _value("small", np.eye(3, dtype=np.float32), ir.DataType.FLOAT),  # not deferred
        _value("bf16", np.eye(800, k=1, dtype=ml_dtypes.bfloat16), ir.DataType.BFLOAT16),
        _value(
            "doc",
            np.eye(800, dtype=np.float16),
            ir.DataType.FLOAT16,
            doc_string="a folded identity",
            metadata_props={"pkg.eyefold.folded_from": "eye"},
        ),
        _value("b", np.eye(1100, dtype=np.bool_), ir.DataType.BOOL),
        _value("i64", np.eye(side, k=-2, dtype=np.int64), ir.DataType.INT64),
    ]


def _deferred(proto: onnx.ModelProto, values: list[ir.Value]) -> DeferredTensors:
    deferred = DeferredTensors(proto)
    for value in values:
        deferred.add(value)
    return deferred


def _written(deferred: DeferredTensors) -> bytes:
    buffer = io.BytesIO()
    assert deferred.write(buffer) == len(buffer.getvalue())
    return buffer.getvalue()


def test_the_written_bytes_are_those_of_the_filled_in_proto() -> None:
    values = _values()
    deferred = _deferred(_base_proto(), values)
    assert deferred  # the large tensors wait for the save
    placeholders = [t for t in deferred.proto.graph.initializer if len(t.raw_data) == 16]
    assert len(placeholders) == 5
    written = _written(deferred)
    expected = _deferred(_base_proto(), values).fill().SerializeToString()
    assert written == expected
    loaded = onnx.load_model_from_string(written)
    by_name = {t.name: onnx.numpy_helper.to_array(t) for t in loaded.graph.initializer}
    np.testing.assert_array_equal(by_name["f32"], np.eye(600, dtype=np.float32))
    assert loaded.graph.initializer[-3].doc_string == "a folded identity"


def test_fill_after_a_write_gives_the_same_proto() -> None:
    values = _values()
    deferred = _deferred(_base_proto(), values)
    written = _written(deferred)
    assert deferred.fill().SerializeToString() == written
    assert not deferred


def test_small_or_unusual_tensors_are_serialized_in_place_at_once() -> None:
    strings = ir.StringTensor(np.array([b"a"] * 10), name="s")
    values = [
        _value("tiny", np.ones(4, dtype=np.float32), ir.DataType.FLOAT),
        ir.Value(name="s", shape=ir.Shape([10]), const_value=strings),
        _value("i4", np.zeros(BIG * 4, dtype=np.int8), ir.DataType.INT4),
    ]
    deferred = _deferred(_base_proto(), values)
    assert not deferred
    assert _written(deferred) == deferred.proto.SerializeToString()


def test_an_unexpected_layout_writes_the_filled_in_proto() -> None:
    # An obsolete group as an unknown top-level field (field 99: start and end keys).
    group = varint(99 << 3 | 3) + varint(99 << 3 | 4)
    values = _values()
    proto, twin = _base_proto(), _base_proto()
    proto.MergeFromString(group)
    twin.MergeFromString(group)
    with pytest.raises(deferred_tensors._LayoutError, match="wire type 3"):
        deferred_tensors._graph_field(proto.SerializeToString())
    filled = _deferred(twin, values).fill().SerializeToString()
    assert _written(_deferred(proto, values)) == filled


def test_a_marker_that_is_not_found_writes_the_filled_in_proto(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    values = _values()
    deferred = _deferred(_base_proto(), values)
    filled = _deferred(_base_proto(), values).fill().SerializeToString()
    monkeypatch.setattr(deferred_tensors, "_place", _fail)
    assert _written(deferred) == filled


def _fail(*args: object) -> None:
    raise deferred_tensors._LayoutError("as if a marker were missing")


def _chain(rows: int) -> onnx.ModelProto:
    return onnx.parser.parse_model(
        f"""<ir_version: 8, opset_import: ["" : 17]>
        g (float[{rows}, {rows}] x) => (float[{rows}, {rows}] y) {{
            shape = Shape(x)
            zeros = ConstantOfShape(shape)
            eye = EyeLike(zeros)
            y = MatMul(x, eye)
        }}"""
    )


def test_the_file_path_writes_a_large_fold_from_its_array(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, output = tmp_path / "chain.onnx", tmp_path / "out.onnx"
    onnx.save(_chain(700), source)
    expected = eyefold.optimize(onnx.load(source), size_limit=4 << 20).SerializeToString()

    def never(self: DeferredTensors) -> onnx.ModelProto:
        raise AssertionError("the fold was serialized into the proto")

    with monkeypatch.context() as patch:
        patch.setattr(DeferredTensors, "fill", never)
        status = main(["optimize", str(source), str(output), "-q", "--size-limit", "4M"])
    assert status == 0
    assert output.read_bytes() == expected
    (tensor,) = onnx.load(output).graph.initializer
    np.testing.assert_array_equal(
        onnx.numpy_helper.to_array(tensor), np.eye(700, dtype=np.float32)
    )


@pytest.mark.parametrize("extra", [["--check"], ["--external-data"]], ids=["check", "data"])
def test_check_and_data_files_get_the_filled_in_proto(
    tmp_path: Path, extra: list[str]
) -> None:
    source, output = tmp_path / "chain.onnx", tmp_path / "out.onnx"
    onnx.save(_chain(700), source)
    status = main(["optimize", str(source), str(output), "-q", "--size-limit", "4M", *extra])
    assert status == 0
    loaded = onnx.load(output)
    (tensor,) = loaded.graph.initializer
    np.testing.assert_array_equal(
        onnx.numpy_helper.to_array(tensor, base_dir=str(tmp_path)),
        np.eye(700, dtype=np.float32),
    )


def _ir_model(values: list[ir.Value]) -> ir.Model:
    """y_i = Identity(initializer_i) for every value, plus one small Add of the input."""
    model = ir.from_onnx_text("""<ir_version: 10, opset_import: ["" : 22]>
    g (float[2] x) => (float[2] z) { z = Add(x, x) }""")
    for value in values:
        tensor = value.const_value
        assert tensor is not None
        value.type = ir.TensorType(tensor.dtype)
        model.graph.register_initializer(value)
        node = ir.node("Identity", [value], name=f"id_{value.name}")
        node.outputs[0].name = f"out_{value.name}"
        node.outputs[0].shape = value.shape
        node.outputs[0].type = value.type
        model.graph.append(node)
        model.graph.outputs.append(node.outputs[0])
    return model


def test_an_onnx_ir_model_is_written_as_protobuf_writes_it() -> None:
    values = _values()
    values[0].const_value.name = "not_the_value_name"  # type: ignore[union-attr]
    values[0].meta["quant_parameter_tensor_names"] = {"SCALE_TENSOR": "s"}  # an annotation
    model = _ir_model(values)
    tensors_before = {n: v.const_value for n, v in model.graph.initializers.items()}
    deferred = DeferredTensors.of_model(model)
    placeholders = [t.name for t in deferred.proto.graph.initializer if len(t.raw_data) == 16]
    assert placeholders == ["f32", "bf16", "doc", "b", "i64"]
    written = _written(deferred)
    assert written == ir.to_proto(model).SerializeToString()
    # The model is left as it was: same tensor objects, same order.
    assert list(model.graph.initializers) == list(tensors_before)
    for name, value in model.graph.initializers.items():
        assert value.const_value is tensors_before[name]
    loaded = onnx.load_model_from_string(written)
    assert [a.tensor_name for a in loaded.graph.quantization_annotation] == ["f32"]
    onnx.checker.check_model(loaded, full_check=True)
    assert_same_outputs(ir.to_proto(model), loaded, {"x": np.array([1.0, -2.0], np.float32)})


def test_an_onnx_ir_model_filled_in_is_its_proto() -> None:
    model = _ir_model(_values())
    deferred = DeferredTensors.of_model(model)
    assert deferred.fill() == ir.to_proto(model)
    assert not deferred


def test_an_onnx_ir_model_without_large_initializers_defers_nothing() -> None:
    model = _ir_model([_value("small", np.ones((4, 4), np.float32), ir.DataType.FLOAT)])
    deferred = DeferredTensors.of_model(model)
    assert not deferred
    assert _written(deferred) == ir.to_proto(model).SerializeToString()


@pytest.mark.parametrize(
    ("array", "dtype"),
    [
        pytest.param(
            np.zeros(BIG * 2 + 2, np.uint8).astype(ml_dtypes.int4),
            ir.DataType.INT4,
            id="int4-packed",
        ),
        pytest.param(np.eye(1000, dtype=np.float32)[:, ::2], ir.DataType.FLOAT, id="strided"),
    ],
)
def test_tensors_that_are_not_a_plain_byte_copy_are_not_streamed(
    array: np.ndarray, dtype: ir.DataType
) -> None:
    value = ir.Value(name="t", shape=ir.Shape(array.shape), type=ir.TensorType(dtype))
    value.const_value = ir.Tensor(array, dtype=dtype, name="t")
    assert value.const_value.nbytes >= BIG  # large enough: only its layout keeps it out
    assert streamable_array(value) is None


# An EyeLike in a subgraph: it sends the whole model down the whole-model path.
_SUBGRAPH_EYE = """z = If (c) <then_branch = t () => (float[2, 2] o) { o = EyeLike (w) },
                            else_branch = f () => (float[2, 2] o) { o = Identity (w) }>"""


def _eye_beside(rows: int, z: str) -> onnx.ModelProto:
    """``y = x + eye`` on a float[rows, rows] input, beside ``z`` (a line computing z)."""
    return onnx.parser.parse_model(
        f"""<ir_version: 10, opset_import: ["" : 22]>
        g (float[{rows}, {rows}] x, bool c) => (float[{rows}, {rows}] y, float[2, 2] z)
            <float[2, 2] w = {{1.0, 2.0, 3.0, 4.0}}> {{
            e = EyeLike (x)
            y = Add (x, e)
            {z}
        }}"""
    )


def test_the_whole_model_path_writes_a_fold_from_its_array_as_protobuf_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An EyeLike in a subgraph sends the run to the whole-model path; the main graph's
    # 512 x 512 float identity is 1 MiB, folded at the default size limit.
    rows = 512
    source, output = tmp_path / "model.onnx", tmp_path / "out.onnx"
    onnx.save(_eye_beside(rows, _SUBGRAPH_EYE), source)
    expected = eyefold.optimize(onnx.load(source))

    def never(self: DeferredTensors) -> onnx.ModelProto:
        raise AssertionError("the fold was serialized into the proto")

    report = tmp_path / "report.json"
    with monkeypatch.context() as patch:
        patch.setattr(DeferredTensors, "fill", never)
        status = main(["optimize", str(source), str(output), "-q", "--report", str(report)])
    assert status == 0
    steps = json.loads(report.read_text())["steps"]
    assert steps[1]["name"].startswith("whole-model: an EyeLike sits in a subgraph")
    assert output.read_bytes() == expected.SerializeToString()
    assert onnx.load(output) == expected
    eye = next(t for t in expected.graph.initializer if t.dims == [rows, rows])
    np.testing.assert_array_equal(
        onnx.numpy_helper.to_array(eye), np.eye(rows, dtype=np.float32)
    )


@pytest.mark.slow
@pytest.mark.parametrize("route", ["neighbourhood", "whole-model"])
def test_a_streamed_fold_costs_about_one_copy_of_it(tmp_path: Path, route: str) -> None:
    # Serialized through protobuf, the fold would be held about four times (the array,
    # tobytes, the message, the serialization): 3.9 times its size in a measured run.
    rows = 2896  # 2896 x 2896 float32: 33.5 MB
    fold_bytes = rows * rows * 4
    extra = _SUBGRAPH_EYE if route == "whole-model" else "z = Identity (w)"
    source = tmp_path / "model.onnx"
    onnx.save(_eye_beside(rows, extra), source)
    peaks = {}
    for limit in ("1M", "64M"):  # 1M: the same run without the fold
        output, report = tmp_path / f"out_{limit}.onnx", tmp_path / f"{limit}.json"
        args = ["optimize", str(source), str(output), "-q", "--size-limit", limit]
        result, peaks[limit] = run_measured([*args, "--report", str(report)])
        assert result.returncode == 0, result.stderr
        assert json.loads(report.read_text())["steps"][1]["name"].startswith(route)
    assert (tmp_path / "out_64M.onnx").stat().st_size > fold_bytes
    assert peaks["64M"] - peaks["1M"] < 1.5 * fold_bytes, peaks


def _sharing_one_tensor(names: list[str]) -> list[ir.Value]:
    """Initializers backed by one large tensor, whose own name is none of theirs."""
    tensor = ir.Tensor(np.eye(600, dtype=np.float32), name="shared")
    return [
        ir.Value(name=name, shape=ir.Shape(tensor.shape), const_value=tensor) for name in names
    ]


def test_one_tensor_behind_two_initializers_gives_each_entry_its_own_name() -> None:
    model = _ir_model(_sharing_one_tensor(["first", "second"]))
    deferred = DeferredTensors.of_model(model)
    assert model.graph.initializers["first"].const_value.name == "shared"  # not renamed
    written = _written(deferred)
    filled = deferred.fill()
    assert [t.name for t in filled.graph.initializer] == ["first", "second"]
    assert filled.SerializeToString() == written
    # onnx-ir's own serializer names each entry after its value too (renaming the tensor).
    assert written == ir.to_proto(model).SerializeToString()


def test_a_tensor_added_under_two_names_gives_each_entry_its_own_name() -> None:
    values = _sharing_one_tensor(["first", "second"])
    deferred = _deferred(_base_proto(), values)
    written = _written(deferred)
    names = [t.name for t in deferred.fill().graph.initializer]
    assert names == ["w", "first", "second"]
    assert deferred.proto.SerializeToString() == written
