"""Differential-testing helpers: run a model before and after, compare bit for bit.

Shipped with the package (like ``onnxscript.rewriter.testing``) so tests, benchmarks and
users verifying their own models share one implementation.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

import numpy as np
import onnx
import onnx_ir as ir
from onnx.reference import ReferenceEvaluator

from eyefold.core.onnx_safety import defuse_eyelike_dtype
from eyefold.core.proto_subgraphs import nested_graphs

__all__ = [
    "as_proto",
    "assert_same_outputs",
    "canonical",
    "check_model_safely",
    "count_ops",
    "onnxruntime_loads",
    "random_inputs",
    "run_onnxruntime",
    "run_reference",
]


def as_proto(model: onnx.ModelProto | ir.Model) -> onnx.ModelProto:
    """A ModelProto for either model type (an ir.Model is serialized, not changed)."""
    return model if isinstance(model, onnx.ModelProto) else ir.to_proto(model)


def check_model_safely(model: onnx.ModelProto | ir.Model) -> None:
    """``onnx.checker.check_model(full_check=True)`` without onnx's EyeLike segfault.

    Raises:
        onnx.checker.ValidationError: the model is invalid; the message names the model's
            own EyeLike nodes and values, not the defused copies the check ran on.
    """
    proto = copy.deepcopy(as_proto(model))
    defused = defuse_eyelike_dtype(proto)
    try:
        onnx.checker.check_model(proto, full_check=True)
    except Exception as error:  # ValidationError, InferenceError and others
        raise onnx.checker.ValidationError(defused.restore(str(error))) from None


def count_ops(model: onnx.ModelProto | ir.Model, op_type: str) -> int:
    """Nodes of ``op_type`` in the main graph, all subgraphs and all functions."""
    proto = as_proto(model)
    outer = [node for body in [proto.graph, *proto.functions] for node in body.node]
    nested = [node for graph in nested_graphs(outer) for node in graph.node]
    return sum(node.op_type == op_type for node in [*outer, *nested])


def _random_array(elem_type: int, shape: list[int], rng: np.random.Generator) -> np.ndarray:
    np_dtype = ir.DataType(elem_type).numpy()
    if elem_type == onnx.TensorProto.BOOL:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(np_dtype, np.integer):
        return rng.integers(
            -5 if np.issubdtype(np_dtype, np.signedinteger) else 0, 9, size=shape
        ).astype(np_dtype)
    return rng.standard_normal(size=shape).astype(np.float32).astype(np_dtype)


def random_inputs(
    model: onnx.ModelProto | ir.Model,
    *,
    seed: int = 0,
    default_dim: int = 3,
    dims: Mapping[str, int] | None = None,
) -> dict[str, np.ndarray]:
    """Random feeds for every graph input; symbolic dims take ``dims[name]`` or the default."""
    proto = as_proto(model)
    rng = np.random.default_rng(seed)
    initializers = {init.name for init in proto.graph.initializer}
    feeds: dict[str, np.ndarray] = {}
    for value in proto.graph.input:
        if value.name in initializers:
            continue
        tensor_type = value.type.tensor_type
        shape = [
            d.dim_value
            if d.HasField("dim_value")
            else (dims or {}).get(d.dim_param, default_dim)
            for d in tensor_type.shape.dim
        ]
        feeds[value.name] = _random_array(tensor_type.elem_type, shape, rng)
    return feeds


def run_reference(model: onnx.ModelProto | ir.Model, feeds: Mapping[str, np.ndarray]) -> list:
    """Outputs under onnx's reference evaluator."""
    return list(ReferenceEvaluator(as_proto(model)).run(None, dict(feeds)))


def onnxruntime_loads(model: onnx.ModelProto | ir.Model) -> bool:
    """Whether onnxruntime's CPU provider loads ``model`` (the never-worse question)."""
    import onnxruntime as ort  # a test dependency, imported only when used

    options = ort.SessionOptions()
    options.log_severity_level = 3  # its constant-folding warnings are not failures
    try:
        ort.InferenceSession(
            as_proto(model).SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
    except Exception:  # onnxruntime raises its own exception types for unloadable models
        return False
    return True


def run_onnxruntime(
    model: onnx.ModelProto | ir.Model, feeds: Mapping[str, np.ndarray]
) -> list | None:
    """Outputs under onnxruntime's CPU provider, or None when it cannot run the model.

    "Cannot run" means it refuses to load it, or an input or output has a type (bfloat16)
    its Python binding cannot exchange as a numpy array.
    """
    import onnxruntime as ort  # a test dependency, imported only when used

    try:
        session = ort.InferenceSession(
            as_proto(model).SerializeToString(), providers=["CPUExecutionProvider"]
        )
    except Exception:  # onnxruntime raises its own exception types for unloadable models
        return None
    if any(
        value.type == "tensor(bfloat16)"
        for value in [*session.get_inputs(), *session.get_outputs()]
    ):
        return None
    return list(session.run(None, dict(feeds)))


def _assert_bits_equal(actual: list, expected: list, what: str) -> None:
    assert len(actual) == len(expected), f"{what}: {len(actual)} outputs != {len(expected)}"
    for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
        got, want = np.asarray(got), np.asarray(want)
        assert got.dtype == want.dtype, f"{what} output {index}: {got.dtype} != {want.dtype}"
        assert got.shape == want.shape, f"{what} output {index}: {got.shape} != {want.shape}"
        assert got.tobytes() == want.tobytes(), f"{what} output {index} differs"


def assert_same_outputs(
    original: onnx.ModelProto | ir.Model,
    optimized: onnx.ModelProto | ir.Model,
    feeds: Mapping[str, np.ndarray] | None = None,
) -> list[str]:
    """Asserts the optimized model reproduces the original bit for bit.

    Always under the reference evaluator; also under onnxruntime when it loads both.

    Returns:
        The runtimes that were compared, e.g. ``["reference", "onnxruntime"]``.
    """
    original, optimized = as_proto(original), as_proto(optimized)
    feeds = random_inputs(original) if feeds is None else feeds
    compared = ["reference"]
    _assert_bits_equal(
        run_reference(optimized, feeds), run_reference(original, feeds), "reference"
    )
    before = run_onnxruntime(original, feeds)
    after = run_onnxruntime(optimized, feeds)
    if before is not None and after is not None:
        _assert_bits_equal(after, before, "onnxruntime")
        compared.append("onnxruntime")
    return compared


def _attribute_data(attr: onnx.AttributeProto) -> object:
    if attr.type == onnx.AttributeProto.TENSOR:
        return _tensor_data(attr.t)
    if attr.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
        graphs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs
        return [_graph_data(g) for g in graphs]
    return onnx.helper.get_attribute_value(attr)


def _tensor_data(tensor: onnx.TensorProto) -> tuple:
    array = onnx.numpy_helper.to_array(tensor)
    return (tensor.data_type, tuple(tensor.dims), array.tobytes())


def _graph_data(graph: onnx.GraphProto) -> dict:
    """A graph as plain data, independent of how protobuf or onnx-ir laid it out."""
    initializers = {t.name: _tensor_data(t) for t in graph.initializer}
    nodes = sorted(
        (
            node.op_type,
            node.domain,
            node.name,
            tuple(node.input),
            tuple(node.output),
            tuple(sorted((a.name, repr(_attribute_data(a))) for a in node.attribute)),
        )
        for node in graph.node
    )
    # onnx-ir writes a value_info entry for every initializer too: the tensor says it all.
    infos = {
        v.name: v.type.SerializeToString(deterministic=True)
        for v in graph.value_info
        if v.name not in initializers
    }
    return {
        "nodes": nodes,
        "initializers": initializers,
        "value_info": infos,
        "inputs": [
            (v.name, v.type.SerializeToString(deterministic=True)) for v in graph.input
        ],
        "outputs": [
            (v.name, v.type.SerializeToString(deterministic=True)) for v in graph.output
        ],
    }


def canonical(model: onnx.ModelProto) -> dict:
    """A model as plain data, for comparing two ways of building it.

    Independent of what a serializer lays out freely: node order, tensor encoding
    (raw_data or typed fields), value_info order, and the value_info entries onnx-ir
    writes for initializers (their tensors say it all).
    """
    return {
        "graph": _graph_data(model.graph),
        "opsets": sorted((o.domain, o.version) for o in model.opset_import),
        "ir_version": model.ir_version,
        "functions": [f.SerializeToString(deterministic=True) for f in model.functions],
    }
