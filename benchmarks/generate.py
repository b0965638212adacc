"""Deterministic benchmark models (fixed seed): the same bytes on every run.

Models (written to ``benchmarks/models/`` by default, which is not committed):

- ``many_N``: N static EyeLike nodes (dtype absent/FLOAT/DOUBLE/INT32/INT64, k in -2..2,
  half on a graph input, half on intermediate values whose shape is declared in value_info)
  plus 4 other nodes per EyeLike (Cast, Add, Mul, Relu/Tanh): ~5N nodes. The types are the
  ones onnxruntime's CPU EyeLike implements, so every peer can at least load the model.
- ``chain_S``: the torch.onnx exporter chain Shape -> Gather -> Unsqueeze -> Concat ->
  ConstantOfShape -> EyeLike -> MatMul on a static float[S, S] input (the peers fold it too).
- ``big_M``: M other nodes (MatMul/Add/activation/Mul/Add residual blocks on float[4, 16],
  one 16x16 weight and a bias per block) and 4 static EyeLike nodes: the overhead case.
- ``opset9_M``: an opset-9 (IR 4) model of M mixed nodes whose form changed across opsets
  (Unsqueeze/Squeeze/ReduceSum axes attributes, Clip min/max attributes, Softmax, Dropout,
  BatchNormalization, Reshape, Transpose...) and some EyeLike-9 nodes: the upgrade case.
- ``ext_2g``: a model whose initializers (9 x 256 MiB) are external data, > 2 GiB in all,
  and a small static EyeLike. Generated only when asked for (never in ``--quick``).

Usage::

    python benchmarks/generate.py many_1000 chain_4096 big_100000 opset9_20000 [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEED = 20261201
GENERATOR_VERSION = 3
MODELS_DIR = Path(__file__).resolve().parent / "models"
PRODUCER = "eyefold.benchmarks"

_MANY_DTYPES = (
    None,
    TensorProto.FLOAT,
    TensorProto.DOUBLE,
    TensorProto.INT32,
    TensorProto.INT64,
)


def _model(
    graph: onnx.GraphProto, *, opset: int = 22, ir_version: int = 10
) -> onnx.ModelProto:
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], producer_name=PRODUCER
    )
    model.ir_version = ir_version
    return model


def _float_info(name: str, shape: list[int]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def many(count: int) -> onnx.ModelProto:
    """``count`` static EyeLike nodes of mixed dtype and k, each with 4 other nodes."""
    rng = random.Random(SEED + count)
    shape = [8, 8]
    half = numpy_helper.from_array(np.array(0.5, dtype=np.float32), "half")
    nodes, value_info = [], []
    acc = "x"
    for i in range(count):
        source = "x" if i % 2 == 0 else acc
        attrs: dict[str, int] = {"k": rng.randint(-2, 2)}
        dtype = rng.choice(_MANY_DTYPES)
        if dtype is not None:
            attrs["dtype"] = dtype
        nodes.append(
            helper.make_node("EyeLike", [source], [f"eye{i}"], name=f"eye{i}", **attrs)
        )
        nodes.append(
            helper.make_node("Cast", [f"eye{i}"], [f"cast{i}"], name=f"cast{i}", to=1)
        )
        nodes.append(helper.make_node("Add", [acc, f"cast{i}"], [f"add{i}"], name=f"add{i}"))
        nodes.append(helper.make_node("Mul", [f"add{i}", "half"], [f"mul{i}"], name=f"mul{i}"))
        act = "Relu" if i % 3 else "Tanh"
        nodes.append(helper.make_node(act, [f"mul{i}"], [f"act{i}"], name=f"act{i}"))
        acc = f"act{i}"
        value_info.append(_float_info(acc, shape))
    graph = helper.make_graph(
        nodes,
        f"many_{count}",
        [_float_info("x", shape)],
        [_float_info(acc, shape)],
        initializer=[half],
        value_info=value_info[:-1],
    )
    return _model(graph)


def chain(size: int) -> onnx.ModelProto:
    """The torch.onnx ``eye(n)`` chain with n = x.size(1) on a static float[size, size] x."""
    constant = numpy_helper.from_array
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], name="shape"),
        helper.make_node(
            "Constant", [], ["index"], name="index", value=constant(np.array(1), "index")
        ),
        helper.make_node("Gather", ["shape", "index"], ["n"], name="gather", axis=0),
        helper.make_node(
            "Constant", [], ["axes"], name="axes", value=constant(np.array([0]), "axes")
        ),
        helper.make_node("Unsqueeze", ["n", "axes"], ["dim"], name="unsqueeze"),
        helper.make_node("Concat", ["dim", "dim"], ["eye_shape"], name="concat", axis=0),
        helper.make_node(
            "ConstantOfShape",
            ["eye_shape"],
            ["zeros"],
            name="zeros",
            value=constant(np.array([0.0], dtype=np.float32), "value"),
        ),
        helper.make_node("EyeLike", ["zeros"], ["eye"], name="eye"),
        helper.make_node("MatMul", ["x", "eye"], ["y"], name="matmul"),
    ]
    graph = helper.make_graph(
        nodes,
        f"chain_{size}",
        [_float_info("x", [size, size])],
        [_float_info("y", [size, size])],
    )
    return _model(graph, opset=17, ir_version=8)


def big(count: int) -> onnx.ModelProto:
    """About ``count`` non-EyeLike nodes in residual blocks of 5, plus 4 static EyeLike."""
    rng = np.random.default_rng(SEED + count)
    shape = [4, 16]
    nodes, inits, value_info = [], [], []
    inits.append(numpy_helper.from_array(np.array(0.75, dtype=np.float32), "scale"))
    h = "x"
    blocks = max(1, count // 5)
    eye_at = {
        blocks // 5: "x",
        2 * blocks // 5: None,
        3 * blocks // 5: "x",
        4 * blocks // 5: None,
    }
    activations = ("Relu", "Tanh", "Sigmoid")
    for i in range(blocks):
        weight = rng.standard_normal((16, 16), dtype=np.float32) * np.float32(0.25)
        inits.append(numpy_helper.from_array(weight, f"w{i}"))
        inits.append(
            numpy_helper.from_array(rng.standard_normal(16, dtype=np.float32), f"b{i}")
        )
        nodes += [
            helper.make_node("MatMul", [h, f"w{i}"], [f"mm{i}"], name=f"mm{i}"),
            helper.make_node("Add", [f"mm{i}", f"b{i}"], [f"ba{i}"], name=f"ba{i}"),
            helper.make_node(activations[i % 3], [f"ba{i}"], [f"ac{i}"], name=f"ac{i}"),
            helper.make_node("Mul", [f"ac{i}", "scale"], [f"sc{i}"], name=f"sc{i}"),
            helper.make_node("Add", [f"sc{i}", h], [f"h{i}"], name=f"h{i}"),
        ]
        if i in eye_at:
            source = eye_at[i] or h
            if source != "x":
                value_info.append(_float_info(source, shape))
            nodes += [
                helper.make_node("EyeLike", [source], [f"eye{i}"], name=f"eye{i}", k=i % 3),
                helper.make_node("Add", [f"h{i}", f"eye{i}"], [f"he{i}"], name=f"he{i}"),
            ]
            h = f"he{i}"
        else:
            h = f"h{i}"
    graph = helper.make_graph(
        nodes,
        f"big_{count}",
        [_float_info("x", shape)],
        [_float_info(h, shape)],
        initializer=inits,
        value_info=value_info,
    )
    return _model(graph)


def opset9(count: int) -> onnx.ModelProto:
    """About ``count`` opset-9 nodes whose form changed in later opsets, plus EyeLike-9."""
    rng = np.random.default_rng(SEED + 9 + count)
    nodes, inits = [], []

    def init(name: str, array: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(array, name))
        return name

    init("shape_4x16", np.array([4, 16], dtype=np.int64))
    h = "x"
    blocks = max(1, count // 14)
    for i in range(blocks):
        p = f"b{i}_"
        w = init(p + "w", rng.standard_normal((16, 16), dtype=np.float32) * np.float32(0.25))
        bn = [
            init(p + name, value)
            for name, value in (
                ("bn_scale", np.ones(4, dtype=np.float32)),
                ("bn_bias", np.zeros(4, dtype=np.float32)),
                ("bn_mean", rng.standard_normal(4, dtype=np.float32) * np.float32(0.1)),
                ("bn_var", np.ones(4, dtype=np.float32)),
            )
        ]
        nodes += [
            helper.make_node("MatMul", [h, w], [p + "mm"], name=p + "mm"),
            helper.make_node("Unsqueeze", [p + "mm"], [p + "un"], name=p + "un", axes=[0]),
            helper.make_node(
                "BatchNormalization", [p + "un", *bn], [p + "bn"], name=p + "bn", epsilon=1e-5
            ),
            helper.make_node("Squeeze", [p + "bn"], [p + "sq"], name=p + "sq", axes=[0]),
            helper.make_node("Clip", [p + "sq"], [p + "cl"], name=p + "cl", min=-4.0, max=4.0),
            helper.make_node("Softmax", [p + "cl"], [p + "sm"], name=p + "sm", axis=1),
            helper.make_node(
                "ReduceSum", [p + "sm"], [p + "rs"], name=p + "rs", axes=[1], keepdims=1
            ),
            helper.make_node("Div", [p + "sm", p + "rs"], [p + "dv"], name=p + "dv"),
            helper.make_node("Dropout", [p + "dv"], [p + "do"], name=p + "do", ratio=0.1),
            helper.make_node("Transpose", [p + "do"], [p + "tr"], name=p + "tr", perm=[1, 0]),
            helper.make_node("Transpose", [p + "tr"], [p + "tt"], name=p + "tt", perm=[1, 0]),
            helper.make_node("Reshape", [p + "tt", "shape_4x16"], [p + "rh"], name=p + "rh"),
            helper.make_node("EyeLike", [p + "rh"], [p + "ey"], name=p + "ey", k=i % 3),
            helper.make_node("Add", [p + "rh", p + "ey"], [p + "out"], name=p + "out"),
        ]
        h = p + "out"
    graph = helper.make_graph(
        nodes,
        f"opset9_{count}",
        [_float_info("x", [4, 16])],
        [_float_info(h, [4, 16])],
        initializer=inits,
    )
    return _model(graph, opset=9, ir_version=4)


def write_ext_2g(path: Path) -> None:
    """Writes ``path`` with 9 x 256 MiB float32 initializers as external data (> 2 GiB)."""
    import onnx_ir as ir  # onnx-ir streams the weights; a ModelProto cannot exceed 2 GiB

    side = 8192
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([side, side]))
    e = ir.Value(name="e", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([64, 64]))
    graph_nodes = []
    h = x
    weights = []
    for i in range(9):
        array = np.full((side, side), np.float32(i + 1) / 64, dtype=np.float32)
        weight = ir.Value(
            name=f"w{i}",
            type=ir.TensorType(ir.DataType.FLOAT),
            shape=ir.Shape([side, side]),
            const_value=ir.tensor(array, name=f"w{i}"),
        )
        weights.append(weight)
        node = ir.node("Add", [h, weight], name=f"add{i}")
        node.outputs[0].name = f"h{i}"
        graph_nodes.append(node)
        h = node.outputs[0]
    eye = ir.node("EyeLike", [e], attributes={"k": 1}, name="eye")
    eye.outputs[0].name = "eye"
    plus = ir.node("Add", [e, eye.outputs[0]], name="eye_add")
    plus.outputs[0].name = "y"
    graph_nodes += [eye, plus]
    for value in (h, plus.outputs[0]):
        value.type = ir.TensorType(ir.DataType.FLOAT)
    h.shape = ir.Shape([side, side])
    plus.outputs[0].shape = ir.Shape([64, 64])
    graph = ir.Graph(
        [x, e],
        [h, plus.outputs[0]],
        nodes=graph_nodes,
        initializers=weights,
        opset_imports={"": 22},
        name="ext_2g",
    )
    model = ir.Model(graph, ir_version=10, producer_name=PRODUCER)
    ir.save(model, str(path), external_data=path.name + ".data")


def generate(name: str, out_dir: Path = MODELS_DIR) -> Path:
    """Writes model ``name`` (e.g. ``many_1000``) unless an up-to-date copy exists."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.onnx"
    stamp = out_dir / f"{name}.stamp"
    tag = f"{GENERATOR_VERSION} {SEED}"
    if path.exists() and stamp.exists() and stamp.read_text() == tag:
        return path
    kind, _, size = name.partition("_")
    if kind == "ext" and size == "2g":
        write_ext_2g(path)
    elif kind == "bigext" and size.isdigit():
        # big_N with its initializers over 1 KiB in ``<name>.onnx.data``.
        onnx.save_model(
            big(int(size)),
            path,
            save_as_external_data=True,
            location=f"{name}.onnx.data",
            size_threshold=1024,
        )
    else:
        builders = {"many": many, "chain": chain, "big": big, "opset9": opset9}
        if kind not in builders or not size.isdigit():
            raise SystemExit(f"generate.py: error: unknown model {name!r}")
        model = builders[kind](int(size))
        temp = path.with_suffix(".tmp")
        with open(temp, "wb") as file:
            file.write(model.SerializeToString(deterministic=True))
        os.replace(temp, path)
    stamp.write_text(tag)
    return path


def remove(name: str, out_dir: Path = MODELS_DIR) -> None:
    """Deletes model ``name`` and its external data and stamp, if present."""
    for suffix in (".onnx", ".onnx.data", ".stamp"):
        (out_dir / f"{name}{suffix}").unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="+", help="e.g. many_1000 chain_4096 big_100000")
    parser.add_argument("--out", type=Path, default=MODELS_DIR, help="output folder")
    args = parser.parse_args(argv)
    for name in args.names:
        path = generate(name, args.out)
        print(f"{path} {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
