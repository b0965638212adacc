"""The masked-sum diagonal rules read dynamo's Range/Equal identity as an EyeLike mask.

``(x * torch.eye(x.shape[-1])).sum(-1)`` with a dynamic size: torchlib has no
``aten::eye``, torch's decomposition writes ``Range(0, n, 1)``, ``Unsqueeze(axes=[1])``,
``Equal`` against the same Range and ``Cast(to=dtype)`` (as in
``sample_models/real/eye_matmul_dynamo.onnx``), ``x.shape[-1]`` is
``Squeeze(Shape(x, start=2, end=3))``, the product a Mul and ``.sum(-1)`` a
``ReduceSum(axes=[-1], keepdims=0)``. Each model is compared with the same computation
through an EyeLike (symbolic_opset9's ``eye``: ConstantOfShape of the two sizes): the
rule rewrites one exactly when it rewrites the other, and the output is bit-identical
to the original's on onnx's reference evaluator and onnxruntime.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from eyefold.cli.main import main
from eyefold.runtime.runners import runner_for

_NP = {TensorProto.FLOAT: np.float32, TensorProto.INT64: np.int64}


def _int(name: str, values: list[int] | int) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def _model(dtype: int, mask: str, dims: list[str | int]) -> onnx.ModelProto:
    """``(x * eye(x.shape[-1], dtype)).sum(-1)`` for ``x: dims``.

    ``mask``: ``range`` (dynamo's identity) or ``eyelike`` (the EyeLike form).
    """
    nodes = [
        helper.make_node("Shape", ["x"], ["shape_n"], start=2, end=3),
        helper.make_node("Squeeze", ["shape_n"], ["n"]),
    ]
    if mask == "range":
        nodes += [
            helper.make_node("Range", ["zero", "n", "one"], ["arange"]),
            helper.make_node("Unsqueeze", ["arange", "rows_axes"], ["rows"]),
            helper.make_node("Equal", ["rows", "arange"], ["eq"]),
            helper.make_node("Cast", ["eq"], ["eye"], to=dtype),
        ]
    else:
        nodes += [
            helper.make_node("Unsqueeze", ["n", "first"], ["n_1"]),
            helper.make_node("Concat", ["n_1", "n_1"], ["size"], axis=0),
            helper.make_node("ConstantOfShape", ["size"], ["zeros"]),
            helper.make_node("EyeLike", ["zeros"], ["eye"], dtype=dtype),
        ]
    nodes += [
        helper.make_node("Mul", ["x", "eye"], ["product"]),
        helper.make_node("ReduceSum", ["product", "last"], ["y"], keepdims=0),
    ]
    initializers = [
        _int("zero", 0),
        _int("one", 1),
        _int("rows_axes", [1]),
        _int("first", [0]),
        _int("last", [-1]),
    ]
    graph = helper.make_graph(
        nodes,
        "eye_diagonal",
        [helper.make_tensor_value_info("x", dtype, dims)],
        [helper.make_tensor_value_info("y", dtype, [dims[0], dims[2]])],
        initializer=initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=10)


def _optimize(tmp_path: Path, model: onnx.ModelProto, *options: str) -> tuple[Path, dict]:
    tmp_path.mkdir()
    source, output, report = (tmp_path / name for name in ("in.onnx", "o.onnx", "r.json"))
    onnx.save(model, source)
    assert (
        main(["optimize", str(source), str(output), "-q", "--report", str(report), *options])
        == 0
    )
    return output, json.loads(report.read_text())


def _rewritten(output: Path) -> bool:
    """Whether the masked sum is gone (the strided Slice reads the diagonal instead)."""
    ops = {node.op_type for node in onnx.load(output).graph.node}
    return "ReduceSum" not in ops and not ops & {"Range", "Equal", "EyeLike"}


def _feeds(dtype: int, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    if dtype == TensorProto.FLOAT:
        # Finite and non-zero: the documented IEEE caveats (inf, NaN, -0.0) are not met.
        return {"x": rng.standard_normal(shape).astype(np.float32) + 0.5}
    return {"x": rng.integers(-(2**20), 2**20, shape).astype(np.int64)}


CASES = [
    (TensorProto.INT64, [], ["B", "n", "n"], True),
    (TensorProto.FLOAT, ["--relaxed"], ["B", "n", "n"], True),
    (TensorProto.FLOAT, [], ["B", "n", "n"], False),  # relaxed only, as for an EyeLike
    (TensorProto.INT64, [], [2, 4, 4], True),
    (TensorProto.INT64, [], ["B", "m", "n"], False),  # rows not provably x's dim -2
]


@pytest.mark.parametrize(("dtype", "options", "dims", "rewritten"), CASES)
def test_the_range_identity_mask_is_read_as_the_eyelike_one(
    tmp_path, dtype, options, dims, rewritten
):
    output, report = _optimize(tmp_path / "range", _model(dtype, "range", dims), *options)
    eyelike, _ = _optimize(tmp_path / "eyelike", _model(dtype, "eyelike", dims), *options)
    assert _rewritten(output) == _rewritten(eyelike) == rewritten
    assert report["identities"] == {"found": 1, "rewritten": int(rewritten)}
    rule = "diagonal_int" if dtype == TensorProto.INT64 else "diagonal_float"
    assert report["rules"].get(rule, 0) == int(rewritten)
    feeds = _feeds(dtype, (2, 4, 4))
    for runtime in ("reference", "onnxruntime"):
        run = runner_for(runtime)
        (want,) = run(str(tmp_path / "range" / "in.onnx"), feeds)
        (got,) = run(str(output), feeds)
        assert (got.dtype, got.shape, got.tobytes()) == (
            want.dtype,
            want.shape,
            want.tobytes(),
        )
        assert np.array_equal(want, np.diagonal(feeds["x"], axis1=1, axis2=2))
