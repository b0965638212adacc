"""dynamo's own identity: torch.eye(n) with a dynamic n is Range/Equal/Cast, no EyeLike.

The models are built by hand after torch 2.13's export of ``x @ torch.eye(x.shape[-1])``
(``sample_models/real/eye_matmul_dynamo.onnx`` is that export): torchlib has no
``aten::eye``, torch's decomposition writes ``Range(0, n, 1)``, ``Unsqueeze(axes=[1])``,
``Equal`` against the same Range and ``Cast(to=dtype)``, with the shapes as value_info.
The MatMul-by-identity rules read it as they read an EyeLike: exact for integers, relaxed
for floats.
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
from tests.helpers.cli import run_eyefold

REAL = Path(__file__).resolve().parents[2] / "sample_models" / "real"

_NP = {TensorProto.FLOAT: np.float32, TensorProto.INT64: np.int64, TensorProto.INT32: np.int32}


def _int(name: str, values: list[int] | int) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def _eye_model(
    dtype: int = TensorProto.FLOAT,
    *,
    variant: str = "torch",
    left: bool = False,
    start: int = 0,
    columns_from: int | None = None,
    declared: bool = True,
) -> onnx.ModelProto:
    """``x @ eye(n)`` (or ``eye(n) @ x`` when ``left``), n read from x's contracted dim.

    ``variant``: ``torch`` as exported; ``negative_axis`` (Unsqueeze at -1); ``swapped``
    (Equal's operands the other way); ``columns_unsqueezed`` (the columns' Range
    unsqueezed at 0, as eyefold's lowered form writes it); ``two_ranges`` (a Range per
    side, reading the same size). ``columns_from``: the columns' Range counts to this dim
    of x instead (an n x m matrix, no identity).
    """
    axis = 0 if left else 1
    size_dims = ["d", "b"] if left else ["b", "d"]
    if variant == "gather":
        read = [
            helper.make_node("Shape", ["x"], ["shape_n"]),
            helper.make_node("Gather", ["shape_n", "axis"], ["n"]),
        ]
    else:
        read = [
            helper.make_node("Shape", ["x"], ["shape_n"], start=axis, end=axis + 1),
            helper.make_node("Squeeze", ["shape_n"], ["n"]),
        ]
    nodes = [*read, helper.make_node("Range", ["start", "n", "one"], ["arange"])]
    initializers = [
        _int("axis", axis),
        _int("start", start),
        _int("one", 1),
        _int("rows_axes", [-1 if variant == "negative_axis" else 1]),
    ]
    columns = "arange"
    if variant == "two_ranges" or columns_from is not None:
        limit = "n"
        if columns_from is not None:
            nodes += [
                helper.make_node(
                    "Shape", ["x"], ["shape_m"], start=columns_from, end=columns_from + 1
                ),
                helper.make_node("Squeeze", ["shape_m"], ["m"]),
            ]
            limit = "m"
        nodes.append(helper.make_node("Range", ["start", limit, "one"], ["arange_1"]))
        columns = "arange_1"
    nodes.append(helper.make_node("Unsqueeze", ["arange", "rows_axes"], ["unsqueeze"]))
    if variant == "columns_unsqueezed":
        initializers.append(_int("cols_axes", [0]))
        nodes.append(helper.make_node("Unsqueeze", ["arange", "cols_axes"], ["unsqueeze_1"]))
        columns = "unsqueeze_1"
    pair = [columns, "unsqueeze"] if variant == "swapped" else ["unsqueeze", columns]
    nodes.append(helper.make_node("Equal", pair, ["eq"]))
    nodes.append(helper.make_node("Cast", ["eq"], ["eye"], to=dtype))
    operands = ["eye", "x"] if left else ["x", "eye"]
    nodes.append(helper.make_node("MatMul", operands, ["y"]))
    m_dim = "d" if columns_from is None else size_dims[columns_from]
    value_info = [
        helper.make_tensor_value_info("n", TensorProto.INT64, []),
        helper.make_tensor_value_info("arange", TensorProto.INT64, ["d"]),
        helper.make_tensor_value_info("unsqueeze", TensorProto.INT64, ["d", 1]),
        helper.make_tensor_value_info("eq", TensorProto.BOOL, ["d", m_dim]),
        helper.make_tensor_value_info("eye", dtype, ["d", m_dim]),
    ]
    graph = helper.make_graph(
        nodes,
        "times_eye",
        [helper.make_tensor_value_info("x", dtype, size_dims)],
        [
            helper.make_tensor_value_info(
                "y", dtype, size_dims if columns_from is None else None
            )
        ],
        initializer=initializers,
        value_info=value_info if declared else [],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=10)


def _feeds(dtype: int, left: bool = False) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    shape = (5, 3) if left else (3, 5)
    if dtype == TensorProto.FLOAT:
        # Finite and non-zero: the documented IEEE caveats (inf, NaN, -0.0) are not met.
        return {"x": rng.standard_normal(shape).astype(np.float32) + 0.5}
    return {"x": rng.integers(-(2**20), 2**20, shape).astype(_NP[dtype])}


def _optimize(
    tmp_path: Path, model: onnx.ModelProto, *options: str
) -> tuple[Path, Path, dict]:
    source, output = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    report = tmp_path / "report.json"
    assert main(["optimize", str(source), str(output), "--report", str(report), *options]) == 0
    return source, output, json.loads(report.read_text())


def _ops(path: Path) -> list[str]:
    return [node.op_type for node in onnx.load(path).graph.node]


def _assert_same_outputs(
    original: Path, rewritten: Path, feeds: dict[str, np.ndarray]
) -> None:
    for runtime in ("reference", "onnxruntime"):
        (want,), (got,) = (runner_for(runtime)(str(p), feeds) for p in (original, rewritten))
        assert (got.dtype, got.shape, got.tobytes()) == (
            want.dtype,
            want.shape,
            want.tobytes(),
        )


VARIANTS = ["torch", "negative_axis", "swapped", "columns_unsqueezed", "two_ranges", "gather"]


@pytest.mark.parametrize("declared", [True, False], ids=["declared", "undeclared"])
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("left", [False, True], ids=["x_at_eye", "eye_at_x"])
def test_integer_product_by_the_identity_is_x_by_default(tmp_path, variant, left, declared):
    model = _eye_model(TensorProto.INT64, variant=variant, left=left, declared=declared)
    source, output, report = _optimize(tmp_path, model)
    assert _ops(output) == ["Identity"]  # y is a graph output: it keeps its name
    assert report["identities"] == {"found": 1, "rewritten": 1}
    assert report["rules"]["matmul_int_identity"] == 1
    _assert_same_outputs(source, output, _feeds(TensorProto.INT64, left))


@pytest.mark.parametrize("variant", VARIANTS)
def test_float_product_by_the_identity_is_x_with_relaxed(tmp_path, variant):
    model = _eye_model(TensorProto.FLOAT, variant=variant)
    source, output, report = _optimize(tmp_path, model, "--relaxed")
    assert _ops(output) == ["Identity"]
    assert report["identities"] == {"found": 1, "rewritten": 1}
    _assert_same_outputs(source, output, _feeds(TensorProto.FLOAT))


def test_float_product_stays_without_relaxed_and_is_counted(tmp_path):
    # As for an EyeLike: x @ I in floats differs on inf, NaN and -0.0, so exact mode keeps it.
    _, output, report = _optimize(tmp_path, _eye_model(TensorProto.FLOAT))
    assert "MatMul" in _ops(output)
    assert report["identities"] == {"found": 1, "rewritten": 0}
    assert report["eyelike"]["total"] == 0  # not part of the EyeLike census


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({"start": 1}, "a Range from 1 is no identity"),
        ({"columns_from": 0}, "n x m: the two sizes are not provably equal"),
    ],
)
def test_what_is_not_an_identity_is_left(tmp_path, options, why):
    _, output, report = _optimize(
        tmp_path, _eye_model(TensorProto.INT64, **options), "--relaxed"
    )
    assert "MatMul" in _ops(output), why
    assert "identities" not in report, why


def test_identity_of_another_size_than_the_contracted_dim_is_left(tmp_path):
    # eye(x.shape[0]) on the right of x [b, d]: b is not provably d.
    model = _eye_model(TensorProto.INT64)
    shape = next(n for n in model.graph.node if n.op_type == "Shape")
    for attribute in shape.attribute:
        attribute.i -= 1  # start=0, end=1
    for info in model.graph.value_info:
        dims = info.type.tensor_type.shape.dim
        for dim in dims:
            if dim.dim_param == "d":
                dim.dim_param = "b"
    _, output, report = _optimize(tmp_path, model)
    assert "MatMul" in _ops(output)
    assert report["identities"] == {"found": 1, "rewritten": 0}


def test_torch_export_times_eye_becomes_x_with_relaxed(tmp_path):
    source = REAL / "eye_matmul_dynamo.onnx"
    output = tmp_path / "out.onnx"
    assert main(["optimize", str(source), str(output), "--relaxed"]) == 0
    assert "MatMul" not in _ops(output) and "Range" not in _ops(output)
    feeds = dict(np.load(REAL / "eye_matmul_dynamo.inputs.npz"))
    want = np.load(REAL / "eye_matmul_dynamo.torch.npz")["y"]
    for runtime in ("reference", "onnxruntime"):
        (got,) = runner_for(runtime)(str(output), feeds)
        assert (got.dtype, got.shape, got.tobytes()) == (
            want.dtype,
            want.shape,
            want.tobytes(),
        )
    _assert_same_outputs(source, output, feeds)


def test_torch_export_keeps_its_matmul_by_default(tmp_path):
    source = REAL / "eye_matmul_dynamo.onnx"
    output = tmp_path / "out.onnx"
    assert main(["optimize", str(source), str(output)]) == 0
    assert "MatMul" in _ops(output)


@pytest.mark.parametrize(
    ("command", "options", "rewritten"),
    [
        ("optimize", ["--relaxed"], 1),
        ("optimize", [], 0),
        ("inspect", ["--relaxed"], 1),
        ("inspect", [], 0),
    ],
)
def test_the_summary_counts_the_identities(tmp_path, command, options, rewritten):
    source = REAL / "eye_matmul_dynamo.onnx"
    where = [str(tmp_path / "out.onnx")] if command == "optimize" else []
    result = run_eyefold(command, str(source), *where, *options)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "EyeLike: 0 found, 0 folded, 0 inferred, 0 kept, 0 removed" in lines
    assert f"Range identities (dynamo's torch.eye): 1 found, {rewritten} rewritten" in lines


@pytest.mark.parametrize("command", ["optimize", "inspect"])
def test_the_summary_is_silent_on_identities_a_model_lacks(tmp_path, command):
    source = REAL / "diag_matmul_op13.onnx"
    where = [str(tmp_path / "out.onnx")] if command == "optimize" else []
    result = run_eyefold(command, str(source), *where)
    assert result.returncode == 0, result.stderr
    assert "EyeLike:" in result.stdout and "Range identities" not in result.stdout
