"""Protobuf's wire format, the little of it eyefold writes and reads by hand.

Streaming a tensor from its array into a model file (:mod:`.deferred_tensors`) means
writing the keys and length prefixes protobuf would write around it. Refusing a file that
cannot be a model before protobuf reads all of it (:func:`top_level_problem`) means
reading the keys and length prefixes of its top level.
"""

from __future__ import annotations

from typing import BinaryIO

__all__ = [
    "GRAPH_INITIALIZER_FIELD",
    "MODEL_GRAPH_FIELD",
    "TENSOR_RAW_DATA_FIELD",
    "WIRE_FIXED32",
    "WIRE_FIXED64",
    "WIRE_LENGTH_DELIMITED",
    "WIRE_VARINT",
    "length_delimited_header",
    "read_varint",
    "top_level_problem",
    "varint",
]

# The field numbers (onnx.proto) of what is written by hand.
MODEL_GRAPH_FIELD = 7  # ModelProto.graph
GRAPH_INITIALIZER_FIELD = 5  # GraphProto.initializer
TENSOR_RAW_DATA_FIELD = 9  # TensorProto.raw_data
# The wire types a field's key carries in its low three bits (3 and 4 are obsolete groups).
WIRE_VARINT, WIRE_FIXED64, WIRE_LENGTH_DELIMITED, WIRE_FIXED32 = 0, 1, 2, 5


def varint(number: int) -> bytes:
    """``number`` (not negative) as a protobuf varint."""
    out = bytearray()
    while True:
        byte = number & 0x7F
        number >>= 7
        if number:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def read_varint(data: bytes, offset: int) -> tuple[int, int]:
    """The varint at ``offset`` in ``data`` and the offset just after it.

    Raises:
        ValueError: the varint runs past the end of ``data``.
    """
    value, shift = 0, 0
    while offset < len(data):
        byte = data[offset]
        value |= (byte & 0x7F) << shift
        offset += 1
        if not byte & 0x80:
            return value, offset
        shift += 7
    raise ValueError("a varint runs past the end of the data")


def _skip(data: bytes, wire_type: int) -> int | None:
    """Bytes the value of ``wire_type`` takes after its key; None for an invalid type.

    ``data`` starts at the value; a length-delimited value counts its prefix and payload.
    """
    if wire_type == WIRE_VARINT:
        return read_varint(data[:_MAX_VARINT_BYTES], 0)[1]
    if wire_type == WIRE_FIXED64:
        return 8
    if wire_type == WIRE_FIXED32:
        return 4
    if wire_type == WIRE_LENGTH_DELIMITED:
        length, after = read_varint(data[:_MAX_VARINT_BYTES], 0)
        return after + length
    return None


_MAX_VARINT_BYTES = 10
_MAX_FIELD_NUMBER = (1 << 29) - 1
_WIRE_START_GROUP, _WIRE_END_GROUP = 3, 4
# Top-level fields walked at most: a model has a dozen; past this, protobuf decides.
_MAX_TOP_LEVEL_FIELDS = 4096


def top_level_problem(handle: BinaryIO, size: int) -> str | None:
    """Why the ``size`` bytes of ``handle`` cannot be one protobuf message, or None.

    Only the top level's keys and length prefixes are read, seeking past each value, so a
    many-GB file of zeros or random bytes is refused after a few bytes, and a file cut
    short is known without reading the graph. Unknown field numbers pass (protobuf keeps
    them); what this cannot judge (groups, a very long field list) is left to protobuf.
    """
    position = 0
    for _ in range(_MAX_TOP_LEVEL_FIELDS):
        if position == size:
            return None
        handle.seek(position)
        head = handle.read(2 * _MAX_VARINT_BYTES)
        try:
            key, after = read_varint(head[:_MAX_VARINT_BYTES], 0)
            field, wire_type = key >> 3, key & 7
            if wire_type == _WIRE_START_GROUP:
                return None
            if field == 0 or field > _MAX_FIELD_NUMBER or wire_type == _WIRE_END_GROUP:
                return f"invalid field key {key} at byte {position}"
            taken = _skip(head[after:], wire_type)
        except ValueError:  # a varint of over 10 bytes, or cut by the end of the file
            return f"a malformed or cut field at byte {position}"
        if taken is None:
            return f"invalid wire type {wire_type} at byte {position}"
        if position + after + taken > size:
            return f"field {field} at byte {position} runs past the end of the file"
        position += after + taken
    return None


def length_delimited_header(field: int, length: int) -> bytes:
    """The key and length prefix of a length-delimited field of ``length`` bytes."""
    return varint(field << 3 | WIRE_LENGTH_DELIMITED) + varint(length)
