"""Reading constant tensors and recognizing exact identity matrices.

The rules match identity operands with these, and the rules pass uses the same test to
find the folded identities worth trying rules next to: one definition for both.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from eyefold.core.domains import DEFAULT_DOMAINS

__all__ = ["constant_tensor", "is_identity_array"]


def _has_itemsize(dtype: ir.DataType) -> bool:
    try:
        _ = dtype.itemsize
    except TypeError:  # UNDEFINED, STRING
        return False
    return True


# ``Attr.as_tensor()`` checks its value against onnx-ir's TensorProtocol at run time,
# reading each of the protocol's members: about 80 us a call, paid for every Constant of
# a model on every rules pass. A tensor deserialized from a proto passes that check
# exactly when its element type has an item size (reading ``nbytes`` raises otherwise),
# so such a tensor is returned without it.
_SIZED_DATA_TYPES = frozenset(int(d) for d in ir.DataType if _has_itemsize(d))


def is_identity_array(array: np.ndarray) -> bool:
    """True for an ``n x n`` array with ones on the diagonal and zeros elsewhere.

    Reads the diagonal first (``n`` elements, so a weight matrix is rejected at once) and
    only then counts non-zeros; no second full matrix is allocated. NaN counts as
    non-zero; -0.0 counts as zero.
    """
    if array.ndim != 2 or array.shape[0] != array.shape[1]:
        return False
    size = array.shape[0]
    if not bool(np.all(np.diagonal(array) == 1)):
        return False
    return int(np.count_nonzero(array)) == size


def constant_tensor(value: ir.Value) -> ir.TensorProtocol | None:
    """The tensor of an initializer or of a default-domain Constant's ``value``, or None.

    An initializer that is also a graph input is only a default the caller may replace,
    so it is not a constant.
    """
    if value.is_graph_input():
        return None
    if value.const_value is not None:
        return value.const_value
    producer = value.producer()
    if producer is None or producer.op_type != "Constant":
        return None
    if producer.domain not in DEFAULT_DOMAINS:
        return None
    attribute = producer.attributes.get("value")
    if attribute is None or attribute.type != ir.AttributeType.TENSOR:
        return None
    tensor = attribute.value
    if (
        type(tensor) is ir.serde.TensorProtoTensor
        and tensor.raw.data_type in _SIZED_DATA_TYPES
    ):
        return tensor  # what as_tensor() returns, without its protocol check
    return attribute.as_tensor()
