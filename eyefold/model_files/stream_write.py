"""Write a model file with its large in-memory initializers streamed from their arrays.

``ir.save`` turns every tensor into ``raw_data`` bytes (``tobytes``, a copy), protobuf copies
them again into the message and once more into the serialized string: three extra copies of
a folded 64 MiB identity before the write. Protobuf's wire format lets the fields of a
message come in any order and a message be written as several pieces, so the large
initializers are left out of the serialized message and appended to its ``graph`` field as
hand-encoded ``TensorProto`` entries whose ``raw_data`` is written straight from the numpy
buffer. A standard parser reads the same model.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

import numpy as np
import onnx
import onnx_ir as ir

from eyefold.model_files.wire import (
    GRAPH_INITIALIZER_FIELD,
    MODEL_GRAPH_FIELD,
    TENSOR_RAW_DATA_FIELD,
    length_delimited_header,
)

__all__ = ["STREAM_MIN_BYTES", "streamable_array", "write_model"]

# Below this, streaming saves nothing measurable; above it, a copy costs real memory.
STREAM_MIN_BYTES = 1 << 20


def streamable_array(value: ir.Value) -> np.ndarray | None:
    """The array behind a large plain in-memory initializer, if its bytes are its raw_data."""
    tensor = value.const_value
    if type(tensor) is not ir.Tensor or tensor.nbytes < STREAM_MIN_BYTES:
        return None
    if tensor.dtype == ir.DataType.STRING or tensor.dtype.bitwidth % 8:
        return None  # strings and packed 4-bit types are not a plain byte copy
    if value.meta.get("quant_parameter_tensor_names"):
        return None  # keep quantization annotations on the ordinary path
    array = tensor.numpy()
    if not array.flags.c_contiguous or array.dtype.byteorder == ">":
        return None
    return array


def _tensor_header(value: ir.Value, tensor: ir.Tensor) -> onnx.TensorProto:
    header = onnx.TensorProto(
        name=value.name or "", data_type=int(tensor.dtype), dims=list(tensor.shape.numpy())
    )
    if tensor.doc_string:
        header.doc_string = tensor.doc_string
    for key, text in tensor.metadata_props.items():
        header.metadata_props.add(key=key, value=text)
    return header


def _pieces(value: ir.Value, array: np.ndarray) -> list[bytes | memoryview]:
    """One encoded ``GraphProto.initializer`` entry: headers, then the array's own bytes."""
    tensor = value.const_value
    assert isinstance(tensor, ir.Tensor)
    header = _tensor_header(value, tensor).SerializeToString()
    raw = memoryview(array.reshape(-1).view(np.uint8))
    raw_header = length_delimited_header(TENSOR_RAW_DATA_FIELD, raw.nbytes)
    tensor_length = len(header) + len(raw_header) + raw.nbytes
    entry = length_delimited_header(GRAPH_INITIALIZER_FIELD, tensor_length)
    return [entry, header, raw_header, raw]


def _serialize_without(model: ir.Model, streamed: dict[str, np.ndarray]) -> onnx.ModelProto:
    """The model proto with the streamed initializers' data left out (headers too)."""
    graph = model.graph
    originals = {name: graph.initializers[name].const_value for name in streamed}
    try:
        for name, array in streamed.items():
            graph.initializers[name].const_value = ir.Tensor(np.empty((0,), array.dtype))
        proto = ir.serde.serialize_model(model)
    finally:
        for name, tensor in originals.items():
            graph.initializers[name].const_value = tensor
    kept = [t for t in proto.graph.initializer if t.name not in streamed]
    del proto.graph.initializer[:]
    proto.graph.initializer.extend(kept)
    return proto


def _chunks(model: ir.Model) -> Iterator[bytes | memoryview]:
    streamed = {
        name: array
        for name, value in model.graph.initializers.items()
        if (array := streamable_array(value)) is not None
    }
    if not streamed:
        yield ir.serde.serialize_model(model).SerializeToString()
        return
    proto = _serialize_without(model, streamed)
    graph_bytes = proto.graph.SerializeToString()
    proto.ClearField("graph")
    entries = [
        _pieces(model.graph.initializers[name], array) for name, array in streamed.items()
    ]
    graph_length = len(graph_bytes) + sum(sum(len(p) for p in e) for e in entries)
    yield proto.SerializeToString()
    yield length_delimited_header(MODEL_GRAPH_FIELD, graph_length)
    yield graph_bytes
    for entry in entries:
        yield from entry


def write_model(model: ir.Model, handle: BinaryIO) -> int:
    """Serializes ``model`` into ``handle``; returns the bytes written.

    Raises:
        ValueError: protobuf refuses the (non-streamed) message, e.g. over 2 GiB.
        onnx_ir.serde.SerdeError: a value cannot be serialized.
    """
    written = 0
    for chunk in _chunks(model):
        handle.write(chunk)
        written += len(chunk) if isinstance(chunk, bytes) else chunk.nbytes
    return written
