"""tract and dynamo's diagonal mask: ``EyeLike(ConstantOfShape(shape))`` without ``value``.

tract fills that ConstantOfShape with float64 zeros, so a model that declares its output
FLOAT (eyefold's inference does) fails there. Wherever eyefold declares such an EyeLike's
type (its default inference), and under ``--target-runtime tract`` and ``--lower-eyelike``,
the spec's default is spelled out; every run here is on tract itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from eyefold.cli.main import main
from eyefold.runtime.measured import MEASURED
from eyefold.runtime.runners import RunError, runner_for

pytest.importorskip("tract")

SAMPLES = Path(__file__).resolve().parents[2] / "sample_models"
REAL = SAMPLES / "real"
# tract's own limits past the fill: the model fails there whatever its ConstantOfShape says.
TRACT_LIMITS = {
    "asteroid_condition_scm_dynamo20": "tract cannot unify Sym(M) with Max(Sym(M), 0) at the"
    " diagonal's Slice (node_diagonal_1), with the fill spelled out or not",
}
DYNAMO_REAL = [
    pytest.param(
        path,
        id=path.stem,
        marks=[pytest.mark.xfail(strict=True, reason=TRACT_LIMITS[path.stem])]
        if path.stem in TRACT_LIMITS
        else [],
    )
    for path in sorted(REAL.glob("*dynamo*.onnx"))
]


def _reduced(declared: bool, dtype: int = TensorProto.FLOAT) -> onnx.ModelProto:
    """Shape -> ConstantOfShape (no value) -> EyeLike, as dynamo writes a diagonal mask."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], name="shape"),
        helper.make_node("ConstantOfShape", ["shape"], ["zeros"], name="zeros"),
        helper.make_node("EyeLike", ["zeros"], ["y"], name="eye"),
    ]
    if dtype != TensorProto.FLOAT:
        nodes[-1].attribute.append(helper.make_attribute("dtype", dtype))
    declared_zeros = [helper.make_tensor_value_info("zeros", TensorProto.FLOAT, ["n", "m"])]
    graph = helper.make_graph(
        nodes,
        "diagonal_mask",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "m"])],
        [helper.make_tensor_value_info("y", dtype, ["n", "m"])],
        value_info=declared_zeros if declared else [],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=10)


def _feeds(path: Path) -> dict[str, np.ndarray]:
    inputs = path.with_name(path.name.replace(".onnx", ".inputs.npz"))
    if inputs.exists():
        return dict(np.load(inputs))
    model = onnx.load(path)
    rng = np.random.default_rng(0)
    return {
        value.name: rng.standard_normal(
            [4, 5, 6][: len(value.type.tensor_type.shape.dim)]
        ).astype(np.float32)
        for value in model.graph.input
    }


def _run(runtime: str, path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return runner_for(runtime)(str(path), feeds)


def _assert_same(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert (a.dtype, a.shape, a.tobytes()) == (b.dtype, b.shape, b.tobytes())


def test_tract_fills_an_implicit_value_as_float64_as_its_table_says(tmp_path):
    declared, bare = tmp_path / "declared.onnx", tmp_path / "bare.onnx"
    onnx.save(_reduced(declared=True), declared)
    onnx.save(_reduced(declared=False), bare)
    feeds = {"x": np.ones((3, 4), np.float32)}
    with pytest.raises(RunError, match="Impossible to unify F32 with F64"):
        _run("tract", declared, feeds)
    # Undeclared, tract runs it, in the wrong type: the spec's default is float32.
    assert _run("tract", bare, feeds)[0].dtype == np.float64
    assert MEASURED["tract"].implicit_fill is False
    for runtime in ("onnxruntime", "openvino"):
        assert _run(runtime, declared, feeds)[0].dtype == np.float32
        assert MEASURED[runtime].implicit_fill is True


@pytest.mark.parametrize(
    "options", [["--target-runtime", "tract"], ["--lower-eyelike"]], ids=["tract", "lower"]
)
@pytest.mark.parametrize("declared", [True, False], ids=["declared", "bare"])
def test_reduced_mask_runs_on_tract_with_the_originals_outputs(tmp_path, options, declared):
    source, output = tmp_path / "mask.onnx", tmp_path / "out.onnx"
    onnx.save(_reduced(declared), source)
    assert main(["optimize", str(source), str(output), *options]) == 0
    feeds = {"x": np.ones((3, 4), np.float32)}
    want = _run("onnxruntime", source, feeds)
    _assert_same(_run("tract", output, feeds), want)
    _assert_same(_run("reference", output, feeds), want)


def test_a_bool_mask_gets_both_its_form_and_the_fill_for_tract(tmp_path):
    # tract has no EyeLike with a bool output: the node takes another form, and its
    # ConstantOfShape the spelled-out value, or the form still fails at the fill.
    source, output = tmp_path / "mask.onnx", tmp_path / "out.onnx"
    onnx.save(_reduced(declared=True, dtype=TensorProto.BOOL), source)
    assert main(["optimize", str(source), str(output), "--target-runtime", "tract"]) == 0
    feeds = {"x": np.ones((3, 4), np.float32)}
    want = _run("reference", source, feeds)
    _assert_same(_run("tract", output, feeds), want)
    _assert_same(_run("reference", output, feeds), want)


@pytest.mark.parametrize(
    "options",
    [[], ["--target-runtime", "tract"], ["--lower-eyelike"]],
    ids=["default", "tract", "lower"],
)
@pytest.mark.parametrize(
    "path",
    [pytest.param(SAMPLES / "dynamo_diagonal.onnx", id="dynamo_diagonal"), *DYNAMO_REAL],
)
def test_dynamo_exports_run_on_tract_with_the_originals_outputs(tmp_path, options, path):
    output = tmp_path / "out.onnx"
    assert main(["optimize", str(path), str(output), *options]) == 0
    feeds = _feeds(path)
    got = _run("tract", output, feeds)
    try:  # where tract ran the original, the same bits
        want = _run("tract", path, feeds)
    except RunError:
        want = _run("onnxruntime", path, feeds)
        # Two runtimes' float arithmetic: the same types and shapes, values to rounding.
        assert [(a.dtype, a.shape) for a in got] == [(b.dtype, b.shape) for b in want]
    else:
        _assert_same(got, want)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_default_inference_does_not_stop_tract_running_the_original(tmp_path):
    # tract runs the export as it is; the default output declares the EyeLike FLOAT, which
    # tract refused while its ConstantOfShape filled float64 ("Impossible to unify").
    source, output = SAMPLES / "dynamo_diagonal.onnx", tmp_path / "out.onnx"
    assert main(["optimize", str(source), str(output)]) == 0
    declared = {
        v.name: v.type.tensor_type.elem_type for v in onnx.load(output).graph.value_info
    }
    assert declared["mask"] == TensorProto.FLOAT
    feeds = _feeds(source)
    _assert_same(_run("tract", output, feeds), _run("tract", source, feeds))


@pytest.mark.parametrize(
    "options", [[], ["--target-runtime", "tract"]], ids=["default", "tract"]
)
def test_the_fill_spelled_out_is_only_the_spec_default(tmp_path, options):
    output = tmp_path / "out.onnx"
    source = SAMPLES / "dynamo_diagonal.onnx"
    assert main(["optimize", str(source), str(output), *options]) == 0
    (fill,) = [n for n in onnx.load(output).graph.node if n.op_type == "ConstantOfShape"]
    (value,) = fill.attribute
    tensor = value.t
    assert (tensor.data_type, list(tensor.dims)) == (TensorProto.FLOAT, [1])
    assert onnx.numpy_helper.to_array(tensor).tolist() == [0.0]


def _inspected_row(path: Path, capsys) -> dict:
    assert main(["inspect", str(path), "--target-runtime", "tract", "--json"]) == 0
    (node,) = json.loads(capsys.readouterr().out)["nodes"]
    return node


def test_inspect_runs_column_matches_what_tract_does(tmp_path, capsys):
    source = SAMPLES / "dynamo_diagonal.onnx"
    node = _inspected_row(source, capsys)
    plain, legalized = tmp_path / "plain.onnx", tmp_path / "tract.onnx"
    assert main(["optimize", str(source), str(plain)]) == 0
    assert main(["optimize", str(source), str(legalized), "--target-runtime", "tract"]) == 0
    capsys.readouterr()
    feeds = _feeds(source)
    # The inference spells the fill out as it declares the type: the node runs as written,
    # with or without the target, and the RUNS column says so.
    assert (node["runtime_supported"], node["legalized"]) == (True, False)
    want = _run("tract", source, feeds)
    _assert_same(_run("tract", plain, feeds), want)
    _assert_same(_run("tract", legalized, feeds), want)
    assert main(["inspect", str(source), "--target-runtime", "tract"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "  yes  " in next(line for line in lines if line.startswith("eye "))


def test_a_legalize_pass_run_alone_still_spells_out_the_fill():
    # The passes are public: run without the inference before it, the legalizer makes
    # the fill explicit itself.
    import onnx_ir as ir

    from eyefold.passes import LegalizeEyeLikePass

    model = ir.from_proto(_reduced(declared=True))
    result = LegalizeEyeLikePass("tract")(model)
    (fill,) = [n for n in result.model.graph if n.op_type == "ConstantOfShape"]
    assert "value" in fill.attributes


def test_check_on_tract_passes_where_tract_ran_the_original(tmp_path, capsys):
    # The check runs the result on tract: it used to refuse it at the ConstantOfShape.
    source, output = SAMPLES / "dynamo_diagonal.onnx", tmp_path / "out.onnx"
    options = ["--target-runtime", "tract", "--check"]
    assert main(["optimize", str(source), str(output), *options]) == 0
    assert "the result on tract" in capsys.readouterr().out
