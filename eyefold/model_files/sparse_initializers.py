"""Sparse initializers, which onnx-ir does not read: made dense before it reads the model.

onnx-ir skips a graph's ``sparse_initializer`` field: its nodes would read a value nothing
defines (a false dangling reference) and a save would drop the tensor. A model whose
sparse initializers go through onnx-ir (the whole-model path) therefore gets each as the
dense initializer of the same name, type, shape and values: onnxruntime runs it and
computes the same outputs. Past :data:`DENSE_LIMIT_BYTES` a dense copy would cost more
than the model is worth, and the model is refused with the tensor named.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import onnx
from onnx import numpy_helper

from eyefold.core.proto_subgraphs import may_hold_subgraphs, node_subgraphs
from eyefold.errors import InvalidModelError

__all__ = ["DENSE_LIMIT_BYTES", "with_dense_initializers"]

# The largest sparse initializer made dense (its dense size), in bytes.
DENSE_LIMIT_BYTES = 256 << 20


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    yield graph
    for node in graph.node:
        if may_hold_subgraphs(node):
            for subgraph in node_subgraphs(node):
                yield from _graphs(subgraph)


def _dense(sparse: onnx.SparseTensorProto) -> onnx.TensorProto:
    """The dense tensor ``sparse`` stands for (indices linear, or one row per value)."""
    name = sparse.values.name
    dims = tuple(sparse.dims)
    try:
        values = numpy_helper.to_array(sparse.values)
        item_bytes = values.dtype.itemsize
        if math.prod(dims) * item_bytes > DENSE_LIMIT_BYTES:
            raise InvalidModelError(
                f"sparse initializer {name!r} of shape {list(dims)} would be"
                f" {math.prod(dims) * item_bytes} bytes dense; eyefold writes sparse"
                f" initializers dense and only up to {DENSE_LIMIT_BYTES} bytes"
            )
        indices = numpy_helper.to_array(sparse.indices).astype(np.int64)
        if indices.ndim == 2:
            indices = np.ravel_multi_index(tuple(indices.T), dims)
        dense = np.zeros(math.prod(dims), dtype=values.dtype)
        dense[indices.reshape(-1)] = values.reshape(-1)
    except (ValueError, TypeError, IndexError) as error:
        raise InvalidModelError(
            f"sparse initializer {name!r} cannot be read: {error}"
        ) from None
    tensor = numpy_helper.from_array(dense.reshape(dims), name)
    tensor.data_type = sparse.values.data_type  # bfloat16 and the 8-bit floats stay so
    return tensor


def with_dense_initializers(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` itself when no graph of it holds sparse initializers, else a dense copy.

    Raises:
        InvalidModelError: a sparse initializer that cannot be read, or too large dense.
    """
    if not any(graph.sparse_initializer for graph in _graphs(proto.graph)):
        return proto
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    for graph in _graphs(copy.graph):
        graph.initializer.extend(_dense(sparse) for sparse in graph.sparse_initializer)
        del graph.sparse_initializer[:]
    return copy
