"""Streamed saves: large initializers written from their arrays parse as the same model."""

from __future__ import annotations

import io

import ml_dtypes
import numpy as np
import onnx
import onnx_ir as ir
import pytest

from eyefold.model_files import stream_write
from eyefold.testing import assert_same_outputs

BIG = stream_write.STREAM_MIN_BYTES


def _model_with(arrays: dict[str, np.ndarray], dtypes: dict[str, ir.DataType]) -> ir.Model:
    """y_i = Identity(initializer_i) for every array, plus one small Add of the input."""
    model = ir.from_onnx_text("""<ir_version: 10, opset_import: ["" : 22]>
    g (float[2] x) => (float[2] z) { z = Add(x, x) }""")
    for name, array in arrays.items():
        dtype = dtypes[name]
        value = ir.Value(name=name, shape=ir.Shape(array.shape), type=ir.TensorType(dtype))
        value.const_value = ir.Tensor(array, dtype=dtype, name=name)
        model.graph.register_initializer(value)
        node = ir.node("Identity", [value], name=f"id_{name}")
        node.outputs[0].name = f"out_{name}"
        node.outputs[0].shape = ir.Shape(array.shape)
        node.outputs[0].type = ir.TensorType(dtype)
        model.graph.append(node)
        model.graph.outputs.append(node.outputs[0])
    return model


def _sorted_initializers(proto: onnx.ModelProto) -> bytes:
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    initializers = sorted(copy.graph.initializer, key=lambda t: t.name)
    del copy.graph.initializer[:]
    copy.graph.initializer.extend(initializers)
    return copy.SerializeToString(deterministic=True)


def _streamed(model: ir.Model) -> onnx.ModelProto:
    buffer = io.BytesIO()
    written = stream_write.write_model(model, buffer)
    assert written == len(buffer.getvalue())
    return onnx.load_model_from_string(buffer.getvalue())


def test_large_initializers_of_every_width_round_trip():
    side = 600  # 600 x 600 x 4 bytes > 1 MiB; the 1-byte types get a bigger side
    arrays = {
        "f32": np.eye(side, dtype=np.float32),
        "bf16": np.eye(800, dtype=ml_dtypes.bfloat16),
        "f16": np.eye(800, dtype=np.float16),
        "b": np.eye(1100, dtype=np.bool_),
        "i64": np.arange(side * side, dtype=np.int64).reshape(side, side),
        "small": np.ones((3, 3), np.float32),
    }
    dtypes = {
        "f32": ir.DataType.FLOAT,
        "bf16": ir.DataType.BFLOAT16,
        "f16": ir.DataType.FLOAT16,
        "b": ir.DataType.BOOL,
        "i64": ir.DataType.INT64,
        "small": ir.DataType.FLOAT,
    }
    model = _model_with(arrays, dtypes)
    tensors_before = {n: v.const_value for n, v in model.graph.initializers.items()}
    streamed = _streamed(model)
    assert _sorted_initializers(streamed) == _sorted_initializers(ir.to_proto(model))
    # The model is left as it was: same tensor objects, same order.
    assert list(model.graph.initializers) == list(tensors_before)
    for name, value in model.graph.initializers.items():
        assert value.const_value is tensors_before[name]
    onnx.checker.check_model(streamed, full_check=True)
    feeds = {"x": np.array([1.0, -2.0], np.float32)}
    assert_same_outputs(ir.to_proto(model), streamed, feeds)


def test_without_large_initializers_the_bytes_are_protobufs_own():
    model = _model_with({"small": np.ones((4, 4), np.float32)}, {"small": ir.DataType.FLOAT})
    buffer = io.BytesIO()
    stream_write.write_model(model, buffer)
    assert buffer.getvalue() == ir.to_proto(model).SerializeToString()


@pytest.mark.parametrize(
    ("array", "dtype"),
    [
        pytest.param(np.zeros(BIG * 2 + 2, np.uint8), ir.DataType.INT4, id="int4-packed"),
        pytest.param(np.eye(600, dtype=np.float32)[:, ::2], ir.DataType.FLOAT, id="strided"),
    ],
)
def test_tensors_that_are_not_a_plain_byte_copy_take_the_ordinary_path(array, dtype):
    if dtype == ir.DataType.INT4:
        array = array.astype(ml_dtypes.int4)
    value = ir.Value(name="t", shape=ir.Shape(array.shape), type=ir.TensorType(dtype))
    value.const_value = ir.Tensor(array, dtype=dtype, name="t")
    assert stream_write.streamable_array(value) is None
