"""Which element types EyeLike accepts, per opset version.

EyeLike-9 allows twelve types for its input (T1) and its ``dtype`` output (T2); EyeLike-22
adds bfloat16. Everything else (string, complex, float8, int4, float4...) is invalid.
"""

from __future__ import annotations

import onnx_ir as ir

from eyefold.errors import UnsupportedDtypeError

__all__ = [
    "EYELIKE_MIN_OPSET",
    "EYELIKE_TYPES_OPSET_9",
    "EYELIKE_TYPES_OPSET_22",
    "allowed_types",
    "check_eyelike_type",
    "to_data_type",
]

EYELIKE_MIN_OPSET = 9

EYELIKE_TYPES_OPSET_9: frozenset[ir.DataType] = frozenset(
    {
        ir.DataType.BOOL,
        ir.DataType.DOUBLE,
        ir.DataType.FLOAT,
        ir.DataType.FLOAT16,
        ir.DataType.INT8,
        ir.DataType.INT16,
        ir.DataType.INT32,
        ir.DataType.INT64,
        ir.DataType.UINT8,
        ir.DataType.UINT16,
        ir.DataType.UINT32,
        ir.DataType.UINT64,
    }
)
EYELIKE_TYPES_OPSET_22: frozenset[ir.DataType] = EYELIKE_TYPES_OPSET_9 | {ir.DataType.BFLOAT16}


def to_data_type(dtype: int | ir.DataType) -> ir.DataType:
    """Turns a TensorProto data-type code or an ``ir.DataType`` into an ``ir.DataType``.

    Raises:
        UnsupportedDtypeError: the code names no ONNX type.
    """
    if isinstance(dtype, ir.DataType):
        return dtype
    if isinstance(dtype, bool) or not isinstance(dtype, int):
        raise UnsupportedDtypeError(f"dtype must be an ONNX data-type code, got {dtype!r}")
    try:
        return ir.DataType(dtype)
    except ValueError:
        raise UnsupportedDtypeError(f"unknown ONNX data-type code {dtype}") from None


def allowed_types(opset: int | None) -> frozenset[ir.DataType]:
    """The EyeLike element types valid at ``opset`` (None: the newest EyeLike)."""
    if opset is not None and opset < 22:
        return EYELIKE_TYPES_OPSET_9
    return EYELIKE_TYPES_OPSET_22


def check_eyelike_type(
    dtype: int | ir.DataType, *, opset: int | None = None, what: str = "dtype"
) -> ir.DataType:
    """Returns ``dtype`` as an ``ir.DataType`` if EyeLike allows it at ``opset``.

    Raises:
        UnsupportedDtypeError: the type is not an EyeLike type at that opset; the message
            names the type and, for bfloat16 below opset 22, the opset it needs.
    """
    data_type = to_data_type(dtype)
    if data_type in allowed_types(opset):
        return data_type
    if data_type in EYELIKE_TYPES_OPSET_22:
        raise UnsupportedDtypeError(
            f"{what} {data_type.name} needs EyeLike-22 (opset 22), the model has opset {opset}"
        )
    raise UnsupportedDtypeError(
        f"{what} {data_type.name} ({data_type.value}) is not a valid EyeLike type"
    )
