"""A model's tensor bytes, as the save's 2 GiB check counts them, for every kind of tensor.

Weights deserialized from a proto are sized from the proto's dims (onnx-ir builds a new
shape object at each size query); the total must stay what the element types and shapes
say, sub-byte types rounded up.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
from onnx import TensorProto, helper

from eyefold.model_files.tensors import tensor_bytes, tensor_inventory


def _model() -> ir.Model:
    """A model whose weights are TensorProtoTensors of several types, one in an attribute,
    plus one in-memory tensor added after the load."""
    weights = [
        helper.make_tensor("f32", TensorProto.FLOAT, [3, 5], np.zeros(15, np.float32)),
        helper.make_tensor("i4", TensorProto.INT4, [3], [1, 2, 3]),  # 1.5 bytes -> 2
        helper.make_tensor("bf16", TensorProto.BFLOAT16, [7], [0] * 7),
        helper.make_tensor("u8", TensorProto.UINT8, [0, 4], []),
        helper.make_tensor("scalar", TensorProto.DOUBLE, [], [1.0]),
    ]
    constant = helper.make_node(
        "Constant",
        [],
        ["c"],
        value=helper.make_tensor("c", TensorProto.INT64, [2, 2], [1, 2, 3, 4]),
    )
    graph = helper.make_graph(
        [constant, helper.make_node("Identity", ["f32"], ["y"])],
        "g",
        [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5])],
        initializer=weights,
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 22)])
    model = ir.serde.deserialize_model(proto)
    added = ir.Value(name="added", const_value=ir.tensor(np.zeros(9, np.float16)))
    model.graph.register_initializer(added)
    return model


def test_tensor_bytes_count_every_type_and_shape() -> None:
    model = _model()
    # f32 15*4, i4 ceil(3/2), bf16 7*2, empty 0, scalar double 8, Constant 4*8, added 9*2
    expected = 60 + 2 + 14 + 0 + 8 + 32 + 18
    assert tensor_bytes(model) == expected
    assert tensor_inventory(model) == ([], expected)
