"""Putting a caller's ``onnx_ir.Model`` back as it was when a run on it fails.

The library changes an ``onnx_ir.Model`` in place, and a step can fail once an earlier
one changed it: an invalid EyeLike in a branch is found only after the upgrade raised the
opset and converted every node. On failure the caller must hold the model it gave, not a
half-converted one. What is saved depends on what the steps before the EyeLike checks
rewrite:

* an opset upgrade or pinned input shapes rewrite the whole model, and a size limit
  raised above the default lets a fold fail to allocate its output after earlier folds
  changed the model: a serialized snapshot is taken (about 1 s for 100,000 nodes, a few
  percent of an upgrade; external tensors are references in it, and the main graph's
  large in-memory tensors are left out and their own immutable tensor objects put back);
* otherwise the steps before those checks change only the types and shapes of the EyeLike
  inputs (the inference step) and the node order of unsorted graphs: those are saved,
  which costs one walk of the nodes instead of a serialization that would cost more than
  the run. The steps after those checks raise no EyefoldError at the default size limit
  (an EyeLike refused, an unknown runtime, a rank other than 2 are all found before).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import onnx
import onnx_ir as ir

from eyefold.core.domains import default_opset
from eyefold.core.scopes import is_eyelike, iter_scopes
from eyefold.core.weightless import is_large
from eyefold.model_files.tensors import iter_external_tensors
from eyefold.options import DEFAULT_SIZE_LIMIT_BYTES, PipelineOptions

__all__ = ["undo_point"]

Undo = Callable[[], None]

# Where a large tensor set aside during the snapshot claims to live; never read.
_SET_ASIDE = "eyefold-set-aside"

# What an onnx_ir.Model holds besides its graph, functions and metadata.
_MODEL_FIELDS = (
    "ir_version",
    "producer_name",
    "producer_version",
    "domain",
    "model_version",
    "doc_string",
    "device_configurations",
)


def undo_point(model: ir.Model, options: PipelineOptions) -> Undo:
    """What puts ``model`` back as it is now, for a pipeline run with ``options``."""
    opset = default_opset(model.opset_imports)
    upgrades = options.upgrade and opset is not None and opset < options.target_opset
    if upgrades or options.input_shapes or options.size_limit > DEFAULT_SIZE_LIMIT_BYTES:
        return _snapshot(model)
    return _eyelike_inputs_and_order(model)


def _snapshot(model: ir.Model) -> Undo:
    """A serialized copy of ``model`` without the bytes of its large in-memory tensors.

    Those tensors are immutable and put back as they are, so while the model is
    serialized each stands aside for a reference that serializes without its data (a
    copy of every weight would double the run's peak memory).
    """
    kept: dict[str, ir.TensorProtocol] = {}
    for name, value in model.graph.initializers.items():
        tensor = value.const_value
        if tensor is None or isinstance(tensor, ir.ExternalTensor):
            continue
        if is_large(tensor.nbytes):
            kept[name] = tensor
            value.const_value = ir.ExternalTensor(
                _SET_ASIDE,
                offset=None,
                length=tensor.nbytes,
                dtype=tensor.dtype,
                shape=tensor.shape,
                name=tensor.name or name,
            )
    try:
        snapshot = ir.serde.serialize_model(model)
    finally:
        for name, tensor in kept.items():
            model.graph.initializers[name].const_value = tensor
    base_dir = next((t.base_dir for t in iter_external_tensors(model)), None)

    def undo() -> None:
        _restore(model, snapshot, kept, base_dir)

    return undo


def _restore(
    model: ir.Model,
    snapshot: onnx.ModelProto,
    kept: dict[str, ir.TensorProtocol],
    base_dir: str | os.PathLike[str] | None,
) -> None:
    """Puts the model ``snapshot`` holds back into ``model`` (the caller's object)."""
    restored = ir.serde.deserialize_model(snapshot)
    for name, tensor in kept.items():
        restored.graph.initializers[name].const_value = tensor
    if base_dir is not None:
        ir.external_data.set_base_dir(restored.graph, base_dir)
    model.graph = restored.graph
    for field in _MODEL_FIELDS:
        setattr(model, field, getattr(restored, field))
    model.functions.clear()
    model.functions.update(restored.functions)
    model.metadata_props.clear()
    model.metadata_props.update(restored.metadata_props)


def _eyelike_inputs_and_order(model: ir.Model) -> Undo:
    orders = [(scope.graph, list(scope.graph)) for scope in iter_scopes(model)]
    inputs = [
        (value, value.type, None if value.shape is None else value.shape.copy())
        for _, nodes in orders
        for node in nodes
        if is_eyelike(node)
        for value in node.inputs[:1]
        if value is not None
    ]

    def undo() -> None:
        for value, type_, shape in inputs:
            value.type, value.shape = type_, shape
        for graph, nodes in orders:
            now = list(graph)
            if now != nodes and {id(n) for n in now} == {id(n) for n in nodes}:
                graph.remove(now)  # sorted: the same nodes, put back in their order
                graph.extend(nodes)

    return undo
