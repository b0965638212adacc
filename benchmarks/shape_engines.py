"""Which shape engine makes the EyeLike inputs of the real exports static, and at what cost.

Each engine gets what eyefold's inference step hands onnx: the EyeLike input's backward
slice, at opset 22 (eyefold upgrades before inferring), with the tensors over 4 KiB
declared as typed inputs, its targets the EyeLike inputs. Two conditions: the graph inputs
as exported, and pinned to the shapes of the committed feeds (``--input-shape``). The
figure is the median wall time of ``--reps`` runs, each on a fresh copy.

Engines:

- ``onnx``: ``onnx.shape_inference.infer_shapes(data_prop=True)``;
- ``onnx-ir``: ``onnx_ir.passes.common.ShapeInferencePass`` (the same C++ inference);
- ``osc-fold``: onnxscript's ``fold_constants(onnx_shape_inference=True)`` (its Shape,
  Size, Gather and Concat partial evaluators and constant folding);
- ``osc-optimize``: onnxscript's ``optimizer.optimize``;
- ``ort-symbolic`` / ``ort-merge``: onnxruntime's ``SymbolicShapeInference`` without and
  with ``auto_merge`` (which merges symbolic dims it cannot prove equal);
- ``eyefold``: ``eyefold.shape_facts.rounds.infer_with_values``.

    python benchmarks/shape_engines.py [--reps 5] [--markdown]
"""

from __future__ import annotations

import argparse
import copy
import logging
import statistics
import time
from pathlib import Path

import numpy as np
import onnx
import onnx.version_converter

from eyefold.core.weightless import is_large, proto_nbytes, typed_input
from eyefold.shape_facts.rounds import infer_with_values, shape_table

REAL = Path(__file__).resolve().parent.parent / "sample_models" / "real"
MODELS = [
    "hippynn_quad_dynamo",
    "mossformer_op13",
    "ccnet_mmcv_eye_op13",
    "kornia_dilation_op13",
    "diag_matmul_op13_dyn",
]


def _pinned(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> onnx.ModelProto:
    model = copy.deepcopy(model)
    for value in model.graph.input:
        if value.name in feeds:
            dims = value.type.tensor_type.shape.dim
            for dim, size in zip(dims, feeds[value.name].shape, strict=True):
                dim.Clear()
                dim.dim_value = int(size)
    return model


def _slice(model: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str]]:
    """The weightless backward slice of the EyeLike inputs, and their names."""
    graph = model.graph
    producer = {o: n for n in graph.node for o in n.output}
    targets = [n.input[0] for n in graph.node if n.op_type == "EyeLike"]
    wanted, work = set(), list(targets)
    while work:
        name = work.pop()
        node = producer.get(name)
        if node is None or id(node) in wanted:
            continue
        wanted.add(id(node))
        work.extend(i for i in node.input if i)
    nodes = [n for n in graph.node if id(n) in wanted]
    read = {i for n in nodes for i in n.input}
    initializers = {t.name: t for t in graph.initializer}
    sliced = onnx.GraphProto(name="slice")
    sliced.node.extend(nodes)
    sliced.input.extend(v for v in graph.input if v.name in read)
    for name in sorted(read & initializers.keys()):
        tensor = initializers[name]
        if is_large(proto_nbytes(tensor)):
            sliced.input.append(typed_input(name, tensor))
        else:
            sliced.initializer.append(tensor)
    sliced.output.extend(onnx.ValueInfoProto(name=t) for t in targets)
    proto = onnx.helper.make_model(sliced, opset_imports=model.opset_import)
    proto.ir_version = model.ir_version
    return proto, targets


def _shape_from_proto(proto: onnx.ModelProto, name: str) -> object:
    return shape_table(proto.graph).get(name)


def _shape_from_ir(model, name: str) -> object:
    """The shape of the EyeLike's input (the slice's output when it has no EyeLike)."""
    values = [n.inputs[0] for n in model.graph if n.op_type == "EyeLike"]
    values = values or [v for v in model.graph.outputs if v.name == name]
    if not values:
        return "no EyeLike left"
    shape = values[0].shape
    return None if shape is None else [d if isinstance(d, int) else None for d in shape]


def _run_onnx(proto, name):
    inferred = onnx.shape_inference.infer_shapes(proto, data_prop=True)
    return _shape_from_proto(inferred, name)


def _run_onnx_ir(proto, name):
    import onnx_ir as ir
    from onnx_ir.passes.common import ShapeInferencePass

    model = ir.serde.deserialize_model(proto)
    ShapeInferencePass()(model)
    return _shape_from_ir(model, name)


def _with_eyelike(proto: onnx.ModelProto, name: str) -> onnx.ModelProto:
    """The slice with its EyeLike consumer, for engines that read the shape off the node."""
    proto = copy.deepcopy(proto)
    proto.graph.node.append(onnx.helper.make_node("EyeLike", [name], ["eyefold_eye"]))
    del proto.graph.output[:]
    proto.graph.output.append(onnx.ValueInfoProto(name="eyefold_eye"))
    return proto


def _run_osc(proto, name, optimize=False):
    import onnx_ir as ir
    import onnxscript.optimizer as optimizer

    model = ir.serde.deserialize_model(_with_eyelike(proto, name))
    if optimize:
        optimizer.optimize(model)
    else:
        optimizer.fold_constants(model, onnx_shape_inference=True)
    return _shape_from_ir(model, name)


def _run_ort(proto, name, merge=False):
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    inferred = SymbolicShapeInference.infer_shapes(proto, auto_merge=merge)
    return _shape_from_proto(inferred, name)


def _run_eyefold(proto, name):
    return infer_with_values(proto, [name]).shapes.get(name)


ENGINES = {
    "onnx": _run_onnx,
    "onnx-ir": _run_onnx_ir,
    "osc-fold": _run_osc,
    "osc-optimize": lambda p, n: _run_osc(p, n, optimize=True),
    "ort-symbolic": _run_ort,
    "ort-merge": lambda p, n: _run_ort(p, n, merge=True),
    "eyefold": _run_eyefold,
}


def _measure(engine, proto, name, reps: int) -> tuple[str, float]:
    times, shape = [], None
    for _ in range(reps):
        working = copy.deepcopy(proto)
        start = time.perf_counter()
        try:
            shape = engine(working, name)
        except Exception as error:  # each engine raises its own types
            shape = f"error: {type(error).__name__}"
        times.append(time.perf_counter() - start)
    static = isinstance(shape, list) and all(isinstance(d, int) for d in shape)
    text = "x".join(map(str, shape)) if static else ("dynamic" if shape is None or isinstance(
        shape, list) else str(shape))
    return text, statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    print("| model | inputs | " + " | ".join(ENGINES) + " |")
    print("|---|---|" + "---|" * len(ENGINES))
    for model_name in MODELS:
        model = onnx.load(REAL / f"{model_name}.onnx")
        model = onnx.version_converter.convert_version(model, 22)
        feeds = dict(np.load(REAL / f"{model_name}.inputs.npz"))
        for condition, variant in (("exported", model), ("pinned", _pinned(model, feeds))):
            proto, targets = _slice(variant)
            cells = []
            for engine in ENGINES.values():
                shape, ms = _measure(engine, proto, targets[0], args.reps)
                cells.append(f"{'**' + shape + '**' if 'x' in shape else shape} {ms:.1f} ms")
            print(f"| {model_name} ({len(proto.graph.node)} nodes) | {condition} | "
                  + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
