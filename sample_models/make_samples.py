"""Writes the sample EyeLike models of ``sample_models/`` next to this script.

Run from the repository root::

    python sample_models/make_samples.py          # (re)write the .onnx files
    python sample_models/make_samples.py --check  # ... then check and run each of them

The output is byte-identical on every run: the models hold no random data, no timestamps and
no absolute paths, and are serialized with deterministic protobuf encoding. ``--check`` feeds
inputs drawn from a fixed seed to onnx's reference evaluator (every model) and to onnxruntime
(the models it can load) and compares both with numpy; it does not change the files.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT_DIR = Path(__file__).resolve().parent
PRODUCER = "eyefold.sample_models"
SEED = 20240522
FUNCTION_DOMAIN = "pkg.eyefold.samples"

Feeds = dict[str, np.ndarray]


def _opset(version: int, domain: str = "") -> onnx.OperatorSetIdProto:
    """An opset import for ``domain`` (default: the ONNX domain)."""
    return helper.make_opsetid(domain, version)


def _model(
    graph: onnx.GraphProto,
    doc: str,
    *,
    opset: int = 22,
    ir_version: int = 10,
    extra_opsets: tuple[onnx.OperatorSetIdProto, ...] = (),
    functions: tuple[onnx.FunctionProto, ...] = (),
) -> onnx.ModelProto:
    """Wraps ``graph`` into a model with fixed producer fields and a one-line doc string."""
    model = helper.make_model(
        graph,
        opset_imports=[_opset(opset), *extra_opsets],
        functions=list(functions),
        producer_name=PRODUCER,
        doc_string=doc,
    )
    model.ir_version = ir_version
    return model


def _float(name: str, shape: list[int | str]) -> onnx.ValueInfoProto:
    """A float tensor graph input or output."""
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def static_matmul() -> onnx.ModelProto:
    """Two static EyeLikes (k=0 into MatMul, k=1 into Add) on a float[4,4] input."""
    nodes = [
        helper.make_node("EyeLike", ["x"], ["eye"], name="eye"),
        helper.make_node("MatMul", ["x", "eye"], ["y"], name="matmul"),
        helper.make_node("EyeLike", ["x"], ["eye_k1"], name="eye_k1", k=1),
        helper.make_node("Add", ["x", "eye_k1"], ["z"], name="add"),
    ]
    graph = helper.make_graph(
        nodes,
        "static_matmul",
        [_float("x", [4, 4])],
        [_float("y", [4, 4]), _float("z", [4, 4])],
    )
    return _model(graph, "Static EyeLike (k=0) feeding MatMul and EyeLike (k=1) feeding Add.")


def torch_eye_chain() -> onnx.ModelProto:
    """The torch.onnx TorchScript ``torch.eye(n)`` chain, n = x.size(1), at opset 17."""
    gather_index = numpy_helper.from_array(np.array(1, dtype=np.int64), "gather_index")
    unsqueeze_axes = numpy_helper.from_array(np.array([0], dtype=np.int64), "unsqueeze_axes")
    zero = numpy_helper.from_array(np.array([0.0], dtype=np.float32), "value")
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], name="shape"),
        helper.make_node(
            "Constant", [], ["gather_index"], name="gather_index", value=gather_index
        ),
        helper.make_node("Gather", ["shape", "gather_index"], ["n"], name="gather", axis=0),
        helper.make_node(
            "Constant", [], ["unsqueeze_axes"], name="unsqueeze_axes", value=unsqueeze_axes
        ),
        helper.make_node("Unsqueeze", ["n", "unsqueeze_axes"], ["dim_size"], name="unsqueeze"),
        helper.make_node(
            "Concat", ["dim_size", "dim_size"], ["eye_shape"], name="concat", axis=0
        ),
        helper.make_node(
            "ConstantOfShape", ["eye_shape"], ["zeros"], name="zeros", value=zero
        ),
        helper.make_node("EyeLike", ["zeros"], ["eye"], name="eye"),
        helper.make_node("MatMul", ["x", "eye"], ["y"], name="matmul"),
    ]
    graph = helper.make_graph(
        nodes, "torch_eye_chain", [_float("x", [8, 16])], [_float("y", [8, 16])]
    )
    return _model(
        graph,
        "torch.onnx eye(n) chain: Shape, Gather, Unsqueeze, Concat, ConstantOfShape, EyeLike.",
        opset=17,
        ir_version=8,
    )


def dynamic_batch() -> onnx.ModelProto:
    """EyeLike on a float['batch',6] input: the symbolic dim keeps it from folding."""
    nodes = [
        helper.make_node("EyeLike", ["x"], ["eye"], name="eye"),
        helper.make_node("Mul", ["x", "eye"], ["y"], name="mul"),
    ]
    graph = helper.make_graph(
        nodes,
        "dynamic_batch",
        [_float("x", ["batch", 6])],
        [_float("eye", ["batch", 6]), _float("y", ["batch", 6])],
    )
    return _model(
        graph, "EyeLike on a symbolic 'batch' dim: not foldable, type/shape inferred."
    )


def if_branch() -> onnx.ModelProto:
    """A static double EyeLike inside an If then-branch, reading x from the outer scope."""
    then_branch = helper.make_graph(
        [
            helper.make_node("EyeLike", ["x"], ["eye"], name="eye", dtype=TensorProto.DOUBLE),
            helper.make_node("Cast", ["eye"], ["then_y"], name="cast", to=TensorProto.FLOAT),
        ],
        "then_branch",
        [],
        [_float("then_y", [3, 3])],
    )
    else_branch = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["else_y"], name="identity")],
        "else_branch",
        [],
        [_float("else_y", [3, 3])],
    )
    node = helper.make_node(
        "If", ["cond"], ["y"], name="if", then_branch=then_branch, else_branch=else_branch
    )
    graph = helper.make_graph(
        [node],
        "if_branch",
        [helper.make_tensor_value_info("cond", TensorProto.BOOL, []), _float("x", [3, 3])],
        [_float("y", [3, 3])],
    )
    return _model(
        graph, "Static EyeLike(dtype=DOUBLE) in an If then-branch, x from outer scope."
    )


def bool_mask() -> onnx.ModelProto:
    """A bool EyeLike mask selecting the diagonal of x through Where."""
    zero = numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero")
    nodes = [
        helper.make_node("EyeLike", ["x"], ["m"], name="eye", dtype=TensorProto.BOOL),
        helper.make_node("Where", ["m", "x", "zero"], ["y"], name="where"),
    ]
    graph = helper.make_graph(
        nodes,
        "bool_mask",
        [_float("x", [5, 5])],
        [_float("y", [5, 5]), helper.make_tensor_value_info("m", TensorProto.BOOL, [5, 5])],
        initializer=[zero],
    )
    return _model(
        graph, "Bool EyeLike mask into Where; onnxruntime has no bool EyeLike kernel."
    )


def paddle_zeros() -> onnx.ModelProto:
    """Paddle2ONNX ``eye``: EyeLike of a full 64x64 zeros constant, added to x."""
    zeros = numpy_helper.from_array(np.zeros((64, 64), dtype=np.float32), "eye_zeros")
    nodes = [
        helper.make_node("EyeLike", ["eye_zeros"], ["eye"], name="eye", k=0),
        helper.make_node("Add", ["x", "eye"], ["y"], name="add"),
    ]
    graph = helper.make_graph(
        nodes,
        "paddle_zeros",
        [_float("x", [64, 64])],
        [_float("y", [64, 64])],
        initializer=[zeros],
    )
    return _model(
        graph, "Paddle2ONNX eye: EyeLike(k=0) of a full float[64,64] zeros initializer."
    )


def function_eye() -> onnx.ModelProto:
    """EyeLike inside a model-local function AddIdentity(X) = X + EyeLike(X)."""
    function = helper.make_function(
        FUNCTION_DOMAIN,
        "AddIdentity",
        inputs=["X"],
        outputs=["Y"],
        nodes=[
            helper.make_node("EyeLike", ["X"], ["t"], name="eye"),
            helper.make_node("Add", ["X", "t"], ["Y"], name="add"),
        ],
        opset_imports=[_opset(22)],
        doc_string="Y = X + EyeLike(X).",
    )
    node = helper.make_node(
        "AddIdentity", ["x"], ["y"], name="add_identity", domain=FUNCTION_DOMAIN
    )
    graph = helper.make_graph(
        [node], "function_eye", [_float("x", [3, 3])], [_float("y", [3, 3])]
    )
    return _model(
        graph,
        "EyeLike inside the model-local function pkg.eyefold.samples.AddIdentity.",
        extra_opsets=(_opset(1, FUNCTION_DOMAIN),),
        functions=(function,),
    )


def _ints(name: str, values: list[int] | int) -> onnx.NodeProto:
    """A Constant node ``name`` holding int64 ``values`` (a list: 1-D; an int: scalar)."""
    tensor = numpy_helper.from_array(np.array(values, dtype=np.int64), name)
    return helper.make_node("Constant", [], [name], name=name, value=tensor)


def dynamo_diagonal() -> onnx.ModelProto:
    """torch.diagonal(x, 0, -2, -1) as torch_lib's aten_diagonal traces it, opset 18."""
    nodes = [
        _ints("neg_1", [-1]),
        helper.make_node("Shape", ["x"], ["shape"], name="shape"),
        _ints("dim1", 1),
        helper.make_node("Gather", ["shape", "dim1"], ["rows_scalar"], name="gather_rows"),
        helper.make_node("Reshape", ["rows_scalar", "neg_1"], ["rows"], name="reshape_rows"),
        _ints("dim2", 2),
        helper.make_node("Gather", ["shape", "dim2"], ["cols_scalar"], name="gather_cols"),
        helper.make_node("Reshape", ["cols_scalar", "neg_1"], ["cols"], name="reshape_cols"),
        helper.make_node("Concat", ["rows", "cols"], ["mask_shape"], name="concat", axis=0),
        helper.make_node("ConstantOfShape", ["mask_shape"], ["zeros"], name="zeros"),
        helper.make_node("EyeLike", ["zeros"], ["mask"], name="eye", k=0),
        helper.make_node("CastLike", ["mask", "x"], ["mask_like"], name="cast_like"),
        helper.make_node("Transpose", ["x"], ["x_t"], name="transpose", perm=[0, 1, 2]),
        helper.make_node("Mul", ["x_t", "mask_like"], ["masked"], name="mul"),
        _ints("axes", [1]),
        helper.make_node("ReduceSum", ["masked", "axes"], ["sums"], name="sum", keepdims=0),
        helper.make_node("Min", ["rows", "cols"], ["min_dim"], name="min"),
        _ints("offset", [0]),
        helper.make_node("Sub", ["cols", "offset"], ["length_raw"], name="sub"),
        _ints("zero", [0]),
        helper.make_node("Min", ["length_raw", "min_dim"], ["length_min"], name="min_length"),
        helper.make_node("Max", ["length_min", "zero"], ["length"], name="max_length"),
        helper.make_node("Add", ["offset", "length"], ["end"], name="end"),
        helper.make_node("Slice", ["sums", "offset", "end", "axes"], ["y"], name="slice"),
    ]
    graph = helper.make_graph(
        nodes,
        "dynamo_diagonal",
        [_float("x", ["batch", "rows", "cols"])],
        [_float("y", ["batch", "diagonal"])],
    )
    return _model(
        graph,
        "torch dynamo diagonal(x, 0, -2, -1): ReduceSum(Mul(Transpose(x), EyeLike mask)).",
        opset=18,
        ir_version=8,
    )


@dataclasses.dataclass(frozen=True)
class Sample:
    """One sample model: how to build it, feed it and what it must compute."""

    file_name: str
    build: Callable[[], onnx.ModelProto]
    feeds: Callable[[np.random.Generator], list[Feeds]]
    expected: Callable[[Feeds], list[np.ndarray]]
    runs_in_onnxruntime: bool = True


def _rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Standard-normal float32 values of ``shape``."""
    return rng.standard_normal(shape).astype(np.float32)


def _eye(n: int, m: int, k: int = 0, dtype: type = np.float32) -> np.ndarray:
    """numpy's identity-like matrix, the value EyeLike must produce."""
    return np.eye(n, m, k=k, dtype=dtype)


SAMPLES: tuple[Sample, ...] = (
    Sample(
        "static_matmul.onnx",
        static_matmul,
        lambda rng: [{"x": _rand(rng, 4, 4)}],
        lambda f: [f["x"] @ _eye(4, 4), f["x"] + _eye(4, 4, k=1)],
    ),
    Sample(
        "torch_eye_chain.onnx",
        torch_eye_chain,
        lambda rng: [{"x": _rand(rng, 8, 16)}],
        lambda f: [f["x"] @ _eye(16, 16)],
    ),
    Sample(
        "dynamic_batch.onnx",
        dynamic_batch,
        lambda rng: [{"x": _rand(rng, 7, 6)}],
        lambda f: [_eye(7, 6), f["x"] * _eye(7, 6)],
    ),
    Sample(
        "if_branch.onnx",
        if_branch,
        lambda rng: [{"cond": np.array(c), "x": _rand(rng, 3, 3)} for c in (True, False)],
        lambda f: [_eye(3, 3) if f["cond"] else f["x"]],
    ),
    Sample(
        "bool_mask.onnx",
        bool_mask,
        lambda rng: [{"x": _rand(rng, 5, 5)}],
        lambda f: [
            np.where(_eye(5, 5, dtype=bool), f["x"], np.float32(0)),
            _eye(5, 5, dtype=bool),
        ],
        runs_in_onnxruntime=False,
    ),
    Sample(
        "paddle_zeros.onnx",
        paddle_zeros,
        lambda rng: [{"x": _rand(rng, 64, 64)}],
        lambda f: [f["x"] + _eye(64, 64)],
    ),
    Sample(
        "function_eye.onnx",
        function_eye,
        lambda rng: [{"x": _rand(rng, 3, 3)}],
        lambda f: [f["x"] + _eye(3, 3)],
    ),
    Sample(
        "dynamo_diagonal.onnx",
        dynamo_diagonal,
        lambda rng: [
            {"x": _rand(rng, b, r, c)} for b, r, c in ((2, 3, 5), (1, 4, 4), (3, 5, 2))
        ],
        lambda f: [np.diagonal(f["x"], 0, 1, 2)],
    ),
)


def write_samples(out_dir: Path = OUT_DIR) -> list[Path]:
    """Builds, checks and writes every sample model; returns the written paths."""
    paths = []
    for sample in SAMPLES:
        model = sample.build()
        onnx.checker.check_model(model, full_check=True)
        path = out_dir / sample.file_name
        path.write_bytes(model.SerializeToString(deterministic=True))
        paths.append(path)
    return paths


def _compare(what: str, actual: list[np.ndarray], expected: list[np.ndarray]) -> None:
    """Raises AssertionError unless both output lists match in dtype, shape and value."""
    if len(actual) != len(expected):
        raise AssertionError(f"{what}: {len(actual)} outputs, want {len(expected)}")
    for index, (value, want) in enumerate(zip(actual, expected, strict=True)):
        got = np.asarray(value)
        if got.dtype != want.dtype:
            raise AssertionError(
                f"{what} output {index}: dtype {got.dtype}, want {want.dtype}"
            )
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=f"{what} #{index}")


def check_samples(out_dir: Path = OUT_DIR) -> None:
    """Loads each written model and runs it in the reference evaluator and onnxruntime."""
    import onnxruntime  # only needed for --check
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(SEED)
    for sample in SAMPLES:
        path = out_dir / sample.file_name
        onnx.checker.check_model(str(path), full_check=True)
        model = onnx.load(path)
        all_feeds = sample.feeds(rng)
        reference = ReferenceEvaluator(model)
        for feeds in all_feeds:
            actual = reference.run(None, feeds)
            _compare(f"{path.name} (reference)", actual, sample.expected(feeds))
        try:
            session = onnxruntime.InferenceSession(
                path.read_bytes(), providers=["CPUExecutionProvider"]
            )
        except Exception as error:  # onnxruntime raises its own, unexported exception types
            if sample.runs_in_onnxruntime:
                raise
            print(f"{path.name}: onnxruntime refuses it, as expected: {error}")
            continue
        if not sample.runs_in_onnxruntime:
            raise AssertionError(f"{path.name}: onnxruntime was expected to reject it")
        for feeds in all_feeds:
            actual = session.run(None, feeds)
            _compare(f"{path.name} (onnxruntime)", actual, sample.expected(feeds))
        print(f"{path.name}: reference evaluator and onnxruntime match numpy")


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="also run every model and compare with numpy"
    )
    args = parser.parse_args(argv)
    for path in write_samples():
        print(f"wrote {path.name} ({path.stat().st_size} bytes)")
    if args.check:
        check_samples()
    return 0


if __name__ == "__main__":
    sys.exit(main())
