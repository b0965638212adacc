"""Protobuf's wire format, the little of it eyefold writes and reads by hand.

Streaming a tensor from its array into a model file (:mod:`.stream_write`,
:mod:`.deferred_tensors`) means writing the keys and length prefixes protobuf would
write around it.
"""

from __future__ import annotations

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


def length_delimited_header(field: int, length: int) -> bytes:
    """The key and length prefix of a length-delimited field of ``length`` bytes."""
    return varint(field << 3 | WIRE_LENGTH_DELIMITED) + varint(length)
