"""Large tensors written into a model file straight from their arrays, once.

A tensor serialized into a ModelProto is copied twice (``tobytes``, then protobuf's copy
into the message), and writing the proto copies it a third time (``SerializeToString``).
For a large fold that is most of a run's peak memory: measured on either path
(``benchmarks/stream_writes.py``), a 64 MiB identity peaks at 155 MB written from its
array against 347 MB through protobuf (0.1-0.2 s of CPU against 0.3-0.4 s), and 256 MiB
at 347 MB against 1115 MB; at the default 1 MiB limit the saving is 3 MB. So the data of
each large in-memory initializer is left out of the proto: its TensorProto holds
everything else, its ``raw_data`` a random 16-byte marker. Saving then writes the file
in pieces: protobuf's serialization of the proto as it is, with each marker's field
replaced by the tensor's bytes, written straight from its array, and the two length
prefixes that enclose it (the initializer entry's, the graph field's) rewritten.

One writer serves both paths, so only this module knows how a streamed tensor sits in the
file: the file path's splice appends its new initializers (:meth:`DeferredTensors.add`),
and the whole-model path's save serializes its onnx-ir model with every large in-memory
initializer of the main graph marked (:meth:`DeferredTensors.of_model`). Either way the
file holds exactly the bytes ``SerializeToString`` gives for the filled-in proto, which an
unstreamed save writes too: whether a tensor was streamed never shows in the file. Whoever
needs the proto itself (the library's result, ``--check``, a save with a data file) fills
it in first (:meth:`DeferredTensors.fill`), each tensor serialized once, straight into its
place. (Protobuf also reads a message written in several pieces, so the large tensors
could be appended after the rest of the graph; but that file differs from the filled-in
proto's, in its bytes and in the order of its initializers.)

Finding the places: the markers are searched for from the end of the graph field, the
last initializer's first, each search ending where the one after it was found (large
initializers are new ones, usually its last, and the bytes after them are scanned once,
however many there are); the bytes around each must be exactly the placeholder's own
serialization, and the graph field is found by reading the model's top-level fields.
Anything unexpected writes the filled-in proto instead, which is always right. A marker
cannot occur by chance where it is looked for (16 random bytes: odds of 2^-128 per
position).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import sys
from collections.abc import Iterator
from typing import BinaryIO

import numpy as np
import onnx
import onnx_ir as ir

from eyefold.model_files.wire import (
    GRAPH_INITIALIZER_FIELD,
    MODEL_GRAPH_FIELD,
    TENSOR_RAW_DATA_FIELD,
    WIRE_FIXED32,
    WIRE_FIXED64,
    WIRE_LENGTH_DELIMITED,
    WIRE_VARINT,
    length_delimited_header,
    read_varint,
)

__all__ = ["STREAM_MIN_BYTES", "DeferredTensors", "streamable_array"]

# Below this, streaming saves nothing measurable; above it, a copy costs real memory.
STREAM_MIN_BYTES = 1 << 20
_MARKER_BYTES = 16


def streamable_array(value: ir.Value) -> np.ndarray | None:
    """The array behind a large plain in-memory initializer, if its bytes are its raw_data."""
    tensor = value.const_value
    if type(tensor) is not ir.Tensor or tensor.nbytes < STREAM_MIN_BYTES:
        return None
    if tensor.dtype == ir.DataType.STRING or tensor.dtype.bitwidth % 8:
        return None  # strings and packed 4-bit types are not a plain byte copy
    if sys.byteorder != "little":
        return None  # raw_data is little-endian; onnx-ir swaps the bytes of such an array
    array = tensor.numpy()
    if not array.flags.c_contiguous or array.dtype.byteorder == ">":
        return None
    return array


class _LayoutError(Exception):
    """The serialized proto is not laid out as the pieces assume (it is written whole)."""


class _MarkedTensor:
    """A tensor that serializes as itself, except that its bytes are a random marker.

    Serialized by onnx-ir's own serializer, so the placeholder holds every field the
    filled-in TensorProto will hold, in the same form.
    """

    def __init__(self, tensor: ir.Tensor) -> None:
        self.tensor = tensor
        self.marker = os.urandom(_MARKER_BYTES)

    def __getattr__(self, name: str) -> object:
        return getattr(self.tensor, name)

    def tobytes(self) -> bytes:
        return self.marker


@dataclasses.dataclass
class _Deferred:
    """One deferred tensor: its initializer's position and name, its array and marker.

    The name is the initializer's, kept apart from the tensor's own: one tensor may back
    several initializers, and the caller's tensor is not renamed.
    """

    position: int
    name: str
    tensor: ir.Tensor
    array: np.ndarray
    marker: bytes


@dataclasses.dataclass
class _Place:
    """Where a deferred tensor's placeholder entry sits in the serialized proto."""

    start: int
    end: int
    entry: bytes
    deferred: _Deferred


@dataclasses.dataclass
class DeferredTensors:
    """A ModelProto and the large initializers whose data it does not hold yet.

    Attributes:
        proto: the model; its deferred initializers hold a marker as their data.
    """

    proto: onnx.ModelProto
    _pending: list[_Deferred] = dataclasses.field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self._pending)

    @classmethod
    def of_model(cls, model: ir.Model) -> DeferredTensors:
        """``model`` serialized, the large in-memory initializers of its main graph deferred.

        The model is left as it was: each tensor is put back once serialized, under its
        own name (onnx-ir's serializer names the stand-in after the value).

        Raises:
            onnx_ir.serde.SerdeError: a value cannot be serialized.
        """
        initializers = model.graph.initializers
        arrays = {
            name: array
            for name, value in initializers.items()
            if (array := streamable_array(value)) is not None
        }
        marked: dict[str, _MarkedTensor] = {}
        try:
            for name in arrays:
                value = initializers[name]
                assert isinstance(value.const_value, ir.Tensor)  # streamable_array checked it
                marked[name] = _MarkedTensor(value.const_value)
                value.const_value = marked[name]  # type: ignore[assignment]
            deferred = cls(ir.serde.serialize_model(model))
        finally:
            for name, mark in marked.items():
                initializers[name].const_value = mark.tensor
        if marked:
            for position, entry in enumerate(deferred.proto.graph.initializer):
                if (mark := marked.get(entry.name)) is not None:
                    deferred._pending.append(
                        _Deferred(
                            position, entry.name, mark.tensor, arrays[entry.name], mark.marker
                        )
                    )
        return deferred

    def add(self, value: ir.Value) -> None:
        """Appends ``value``'s tensor as the graph's next initializer, deferred if large.

        The entry is named after ``value``, whatever its tensor's name. A tensor that is
        not a plain array of at least a MiB (or on a big-endian machine, where its array
        is not its ``raw_data``) is serialized in place at once.
        """
        tensor = value.const_value
        assert tensor is not None and value.name
        graph = self.proto.graph
        placeholder = graph.initializer.add()
        array = streamable_array(value)
        if array is None:
            ir.serde.serialize_tensor_into(placeholder, tensor)
            placeholder.name = value.name
            return
        assert isinstance(tensor, ir.Tensor)  # streamable_array checked it
        marked = _MarkedTensor(tensor)
        ir.serde.serialize_tensor_into(placeholder, marked)  # type: ignore[arg-type]
        placeholder.name = value.name
        position = len(graph.initializer) - 1
        self._pending.append(_Deferred(position, value.name, tensor, array, marked.marker))

    def fill(self) -> onnx.ModelProto:
        """Serializes each deferred tensor into its place; returns the complete proto."""
        initializers = self.proto.graph.initializer
        for deferred in self._pending:
            placeholder = initializers[deferred.position]
            assert placeholder.raw_data == deferred.marker, "a deferred initializer moved"
            placeholder.Clear()
            ir.serde.serialize_tensor_into(placeholder, deferred.tensor)
            placeholder.name = deferred.name
        self._pending.clear()
        return self.proto

    def write(self, handle: BinaryIO) -> int:
        """Writes the complete model's serialization to ``handle``; returns its size.

        Raises:
            ValueError: protobuf refuses the message (over 2 GiB).
        """
        serialized = self.proto.SerializeToString()
        try:
            chunks = list(self._chunks(serialized)) if self._pending else [serialized]
        except (_LayoutError, ValueError):  # ValueError: a varint past the end
            chunks = [self.fill().SerializeToString()]
        written = 0
        for chunk in chunks:
            handle.write(chunk)
            written += memoryview(chunk).nbytes
        return written

    def _chunks(self, serialized: bytes) -> Iterator[bytes | memoryview]:
        """The complete serialization in pieces, the deferred data from its arrays."""
        view = memoryview(serialized)
        header, start, end = _graph_field(serialized)
        # Entries lie in the order of their positions: each search, last to first, ends
        # where the one after it was found, so every byte is scanned at most once.
        places: list[_Place] = []
        limit = end
        for deferred in sorted(self._pending, key=lambda d: d.position, reverse=True):
            places.append(_place(serialized, start, limit, deferred, self.proto))
            limit = places[-1].start
        places.reverse()
        if any(a.end > b.start for a, b in itertools.pairwise(places)):
            raise _LayoutError("two placeholders overlap")
        pieces: list[bytes | memoryview] = []
        cursor, growth = start, 0
        for place in places:
            entry_pieces = _filled_entry(place)
            growth += sum(memoryview(p).nbytes for p in entry_pieces) - (
                place.end - place.start
            )
            pieces += [view[cursor : place.start], *entry_pieces]
            cursor = place.end
        pieces.append(view[cursor:end])
        yield view[:header]
        yield length_delimited_header(MODEL_GRAPH_FIELD, end - start + growth)
        yield from pieces
        yield view[end:]


def _graph_field(serialized: bytes) -> tuple[int, int, int]:
    """(start of the graph field's key, start and end of its contents) at the top level."""
    found = None
    offset = 0
    while offset < len(serialized):
        key_at = offset
        key, offset = read_varint(serialized, offset)
        field, wire = key >> 3, key & 7
        if wire == WIRE_VARINT:
            _, offset = read_varint(serialized, offset)
        elif wire == WIRE_LENGTH_DELIMITED:
            length, offset = read_varint(serialized, offset)
            if field == MODEL_GRAPH_FIELD:
                if found is not None:
                    raise _LayoutError("the graph field occurs twice")
                found = (key_at, offset, offset + length)
            offset += length
        elif wire in (WIRE_FIXED64, WIRE_FIXED32):
            offset += 8 if wire == WIRE_FIXED64 else 4
        else:
            raise _LayoutError(f"wire type {wire} at the top level")
    if found is None or offset != len(serialized):
        raise _LayoutError("no graph field, or a field runs past the end")
    return found


def _place(
    serialized: bytes, start: int, end: int, deferred: _Deferred, proto: onnx.ModelProto
) -> _Place:
    """The placeholder's initializer entry in ``serialized``, its marker in start..end."""
    entry = proto.graph.initializer[deferred.position].SerializeToString()
    inside = entry.find(deferred.marker)
    at = serialized.rfind(deferred.marker, start, end)
    if inside < 0 or at < 0:
        raise _LayoutError("a marker is missing")
    whole = length_delimited_header(GRAPH_INITIALIZER_FIELD, len(entry)) + entry
    first = at - inside - (len(whole) - len(entry))
    if serialized[first : first + len(whole)] != whole:
        raise _LayoutError("the bytes around a marker are not its initializer entry")
    return _Place(first, first + len(whole), entry, deferred)


def _filled_entry(place: _Place) -> list[bytes | memoryview]:
    """The initializer entry with the tensor's bytes in place of the marker."""
    marker = place.deferred.marker
    raw_field = length_delimited_header(TENSOR_RAW_DATA_FIELD, len(marker)) + marker
    split = place.entry.find(raw_field)
    if split < 0:
        raise _LayoutError("the marker is not the placeholder's raw_data")
    data = memoryview(place.deferred.array.reshape(-1).view(np.uint8))
    before, after = place.entry[:split], place.entry[split + len(raw_field) :]
    raw_key = length_delimited_header(TENSOR_RAW_DATA_FIELD, data.nbytes)
    length = len(before) + len(raw_key) + data.nbytes + len(after)
    entry_key = length_delimited_header(GRAPH_INITIALIZER_FIELD, length)
    return [entry_key + before + raw_key, data, after]
