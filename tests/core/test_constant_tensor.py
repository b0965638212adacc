"""A Constant's tensor is what onnx-ir's ``Attr.as_tensor()`` gives, or the same error.

The rules read every Constant of a model on each pass, so a tensor deserialized from a
proto skips ``as_tensor()``'s run-time protocol check where that check cannot fail; for
every element type onnx defines (and one it does not) the answer must stay that of the
check: the tensor, or the error it raises.
"""

from __future__ import annotations

import re

import onnx_ir as ir
import pytest
from onnx import TensorProto

from eyefold.core.constants import constant_tensor

DATA_TYPES = [*TensorProto.DataType.values(), 999]


def _constant_output(data_type: int) -> tuple[ir.Value, ir.Attr]:
    proto = TensorProto(name="c", data_type=data_type, dims=[2, 3])
    attribute = ir.AttrTensor("value", ir.serde.TensorProtoTensor(proto))
    node = ir.Node("", "Constant", [], attributes=[attribute])
    return node.outputs[0], attribute


@pytest.mark.parametrize("data_type", DATA_TYPES)
def test_a_constant_tensor_is_what_as_tensor_gives(data_type: int) -> None:
    value, attribute = _constant_output(data_type)
    try:
        expected = attribute.as_tensor()
    except (TypeError, ValueError) as error:
        with pytest.raises(type(error), match=re.escape(str(error))):
            constant_tensor(value)
        return
    assert constant_tensor(value) is expected
