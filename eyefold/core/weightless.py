"""Weightless copies of a graph, as eyefold hands them to onnx's C++ code.

onnx's shape inference, version converter and checker take protos, and copying a model's
weights into one costs time and memory for nothing: they need shapes and small constants
(axes, shape values), not weights. So every copy eyefold makes for them (the upgrade's
bodies, the inference slices, from onnx-ir or from a proto) keeps the tensors up to
:data:`~eyefold.core.limits.WEIGHTLESS_TENSOR_LIMIT_BYTES` and declares the others as
typed graph inputs, with the pieces below; :func:`weightless_model` wraps a slice the
one way onnx's inference may be handed it (EyeLike ``dtype`` defused). This is the one
place to change when onnx's C++ code needs a model in another form.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterable

import numpy as np
import onnx
import onnx_ir as ir

from eyefold.core.domains import DEFAULT_DOMAINS
from eyefold.core.limits import WEIGHTLESS_TENSOR_LIMIT_BYTES
from eyefold.core.onnx_safety import DefusedEyeLikes, defuse_eyelike_dtype

__all__ = [
    "LargeTensor",
    "ir_constant_input",
    "ir_large_constant",
    "ir_large_tensor",
    "is_large",
    "proto_large_constant",
    "proto_large_tensor",
    "proto_nbytes",
    "typed_input",
    "typed_value_input",
    "weightless_model",
]


def is_large(nbytes: int) -> bool:
    """Whether a tensor of ``nbytes`` stays out of the weightless copy."""
    return nbytes > WEIGHTLESS_TENSOR_LIMIT_BYTES


@functools.cache
def _itemsize(data_type: int) -> int | None:
    """Bytes per element of a whole-byte numeric type (None: strings, packed types)."""
    try:
        dtype = ir.DataType(data_type)
    except ValueError:
        return None
    if dtype == ir.DataType.STRING or dtype.bitwidth % 8:
        return None
    return dtype.bitwidth // 8


def proto_nbytes(tensor: onnx.TensorProto) -> int:
    """The tensor's data size, as onnx-ir counts it (no data is read)."""
    itemsize = _itemsize(tensor.data_type)
    if itemsize is None:
        return ir.serde.deserialize_tensor(tensor).nbytes
    return math.prod(tensor.dims) * itemsize


def proto_large_constant(node: onnx.NodeProto) -> onnx.TensorProto | None:
    """The tensor of a default-domain Constant node too large for the copy, else None."""
    if node.op_type != "Constant" or node.domain not in DEFAULT_DOMAINS:
        return None
    for attribute in node.attribute:
        if attribute.name == "value" and attribute.type == onnx.AttributeProto.TENSOR:
            return attribute.t if is_large(proto_nbytes(attribute.t)) else None
    return None


def ir_large_constant(node: ir.Node) -> bool:
    """Whether ``node`` is a default-domain Constant whose tensor is too large for the copy."""
    if node.op_type != "Constant" or node.domain not in DEFAULT_DOMAINS:
        return False
    value = node.attributes.get("value")
    if value is None or value.type != ir.AttributeType.TENSOR:
        return False
    # attr.value, not as_tensor(): the latter's runtime Protocol check costs ~80 us a call.
    return is_large(value.value.nbytes)


def typed_input(name: str, tensor: onnx.TensorProto) -> onnx.ValueInfoProto:
    """A graph input standing for ``tensor``: its name, element type and dims."""
    return onnx.helper.make_tensor_value_info(name, tensor.data_type, list(tensor.dims))


def ir_constant_input(name: str, tensor: ir.TensorProtocol) -> onnx.ValueInfoProto:
    """A graph input standing for a large Constant's ``tensor``: its element type and dims.

    A Constant's shape is its tensor's whatever the model declares, and a shape chain may
    read it (a rotary table sliced to the sequence length).
    """
    dims = [int(dim) for dim in tensor.shape.numpy()]
    return onnx.helper.make_tensor_value_info(name, tensor.dtype.value, dims)


def typed_value_input(
    value: ir.Value, tensor: ir.TensorProtocol | None
) -> onnx.ValueInfoProto:
    """A graph input declaring ``value``, typed from its tensor where the value is not."""
    proto = ir.serde.serialize_value(value)
    if tensor is None:
        return proto
    tensor_type = proto.type.tensor_type
    if not tensor_type.elem_type:
        tensor_type.elem_type = tensor.dtype.value
    if not tensor_type.HasField("shape"):
        tensor_type.shape.SetInParent()
        for dim in tensor.shape.numpy():
            tensor_type.shape.dim.add().dim_value = int(dim)
    return proto


def weightless_model(
    proto: onnx.ModelProto,
    *,
    ir_version: int,
    opset_imports: Iterable[onnx.OperatorSetIdProto],
    functions: Iterable[onnx.FunctionProto],
) -> tuple[onnx.ModelProto, DefusedEyeLikes]:
    """Makes ``proto``, whose graph holds a slice, a model onnx's inference can be handed.

    The slice is built in ``proto.graph`` by the caller (never copied into a model).

    Returns:
        The model, and the defused EyeLikes (their ``dtype`` moved to a Cast) (onnx's
        messages about them must be said in the user's terms).
    """
    proto.ir_version = max(ir_version, 4)
    proto.opset_import.extend(opset_imports)
    proto.functions.extend(functions)
    return proto, defuse_eyelike_dtype(proto)


@dataclasses.dataclass(frozen=True)
class LargeTensor:
    """A tensor the weightless copy leaves out, of which a shape chain may read a few elements.

    A rotary table, a lookup of lengths: a Gather at a constant index or a Slice with
    constant bounds reads a handful of its numbers, and those are all that is read.

    Attributes:
        dims: its shape.
        read: the elements at the given flat (row-major) positions, or None when its
            storage cannot be read in part.
    """

    dims: tuple[int, ...]
    read: Callable[[np.ndarray], np.ndarray | None]


# Where protobuf keeps the elements of a tensor not stored as raw bytes, by element type.
_TYPED_FIELDS = {
    onnx.TensorProto.INT64: "int64_data",
    onnx.TensorProto.INT32: "int32_data",
    onnx.TensorProto.INT16: "int32_data",
    onnx.TensorProto.INT8: "int32_data",
    onnx.TensorProto.UINT16: "int32_data",
    onnx.TensorProto.UINT8: "int32_data",
    onnx.TensorProto.BOOL: "int32_data",
    onnx.TensorProto.UINT32: "uint64_data",
    onnx.TensorProto.UINT64: "uint64_data",
    onnx.TensorProto.FLOAT: "float_data",
    onnx.TensorProto.DOUBLE: "double_data",
}


def _proto_elements(tensor: onnx.TensorProto, positions: np.ndarray) -> np.ndarray | None:
    """The elements of an in-memory TensorProto at flat ``positions``.

    Typed fields are indexed one element at a time; raw bytes are viewed, not converted
    (protobuf hands them out whole: one copy of the bytes, no array of the tensor).
    """
    if tensor.data_type not in _TYPED_FIELDS or tensor.data_location == tensor.EXTERNAL:
        return None
    dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)).newbyteorder("<")
    if tensor.HasField("raw_data"):
        return np.frombuffer(tensor.raw_data, dtype=dtype)[positions].astype(
            dtype.newbyteorder("=")
        )
    field = getattr(tensor, _TYPED_FIELDS[tensor.data_type])
    return np.array([field[int(p)] for p in positions]).astype(dtype.newbyteorder("="))


def proto_large_tensor(tensor: onnx.TensorProto) -> LargeTensor:
    """A large TensorProto held in memory (external data is not read here)."""
    return LargeTensor(tuple(tensor.dims), functools.partial(_proto_elements, tensor))


def _ir_elements(tensor: ir.TensorProtocol, positions: np.ndarray) -> np.ndarray | None:
    """The elements of an onnx-ir tensor at flat ``positions``.

    External data is a memory map and an in-memory tensor an array: indexing either reads
    only the positions asked for. A tensor still in its proto is read as the proto.
    """
    if isinstance(tensor, ir.TensorProtoTensor):
        return _proto_elements(tensor.raw, positions)
    if not isinstance(tensor, ir.Tensor | ir.ExternalTensor):
        return None
    return np.asarray(tensor.numpy()).reshape(-1)[positions]


def ir_large_tensor(tensor: ir.TensorProtocol) -> LargeTensor:
    """A large onnx-ir tensor (an initializer's, a Constant's)."""
    dims = tuple(int(dim) for dim in tensor.shape.numpy())
    return LargeTensor(dims, functools.partial(_ir_elements, tensor))
