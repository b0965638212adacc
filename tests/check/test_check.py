"""--check: random inputs, backend choice, exact and tolerant comparison."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import onnx_ir as ir
import pytest

import eyefold
from eyefold.check.equivalence import (
    DEFAULT_DIM,
    FLOAT_TOLERANCES,
    check_equivalence,
    random_inputs,
)
from eyefold.errors import CheckFailedError, EyefoldError
from eyefold.model_files import load_model

SAMPLES = Path(__file__).resolve().parents[2] / "sample_models"
# sample_models/README.md: every sample but bool_mask.onnx runs in onnxruntime.
ORT_CANNOT_LOAD = {"bool_mask.onnx"}


def _optimized(path: Path) -> ir.Model:
    model = load_model(path)
    eyefold.optimize(model)
    return model


@pytest.mark.parametrize(
    "name", sorted(p.name for p in SAMPLES.glob("*.onnx")), ids=lambda n: n[:-5]
)
def test_samples_pass(name: str) -> None:
    optimized = _optimized(SAMPLES / name)
    before = ir.to_proto(optimized).SerializeToString()
    result = check_equivalence(SAMPLES / name, optimized)
    expected_backend = "onnx.reference" if name in ORT_CANNOT_LOAD else "onnxruntime"
    assert result.backend == expected_backend
    assert result.exact == (expected_backend == "onnx.reference")
    assert (result.backend_reason is not None) == (name in ORT_CANNOT_LOAD)
    assert result.outputs == [o.name for o in onnx.load(str(SAMPLES / name)).graph.output]
    assert ir.to_proto(optimized).SerializeToString() == before  # nothing was changed


def _flip_folded_initializer(model: ir.Model) -> None:
    """Changes one element of the largest initializer (the folded EyeLike output)."""
    value = max(model.graph.initializers.values(), key=lambda v: v.const_value.nbytes)
    array = value.const_value.numpy().copy()
    flat = array.reshape(-1)
    flat[1] = not flat[1] if array.dtype == np.bool_ else flat[1] + 1
    value.const_value = ir.tensor(array, name=value.name)


@pytest.mark.parametrize(
    ("name", "backend"),
    [("static_matmul.onnx", "onnxruntime"), ("bool_mask.onnx", "onnx.reference")],
    ids=["onnxruntime", "reference"],
)
def test_corrupted_fold_fails(name: str, backend: str) -> None:
    optimized = _optimized(SAMPLES / name)
    _flip_folded_initializer(optimized)
    with pytest.raises(CheckFailedError, match=backend):
        check_equivalence(SAMPLES / name, optimized)


ADD_CONSTANT = """
<ir_version: 10, opset_import: ["" : 22]>
g ({t}[3, 4] x) => ({t}[3, 4] y{extra_out}) <{t}[4] c = {{1000, 2000, 3000, 4000}}> {{
    y = Add(x, c){extra_node}
}}
"""
# onnxruntime has no bool EyeLike kernel, so this extra output forces onnx.reference.
BOOL_EYE = (", bool[3, 4] m", "\n    m = EyeLike <dtype = 9> (x)")


def _pair(type_name: str, delta: float, force_reference: bool) -> tuple[ir.Model, ir.Model]:
    extra_out, extra_node = BOOL_EYE if force_reference else ("", "")
    text = ADD_CONSTANT.format(t=type_name, extra_out=extra_out, extra_node=extra_node)
    original, changed = ir.from_onnx_text(text), ir.from_onnx_text(text)
    # Set c from numpy: the text parser reads float16 literals as raw bit patterns.
    np_dtype = original.graph.initializers["c"].dtype.numpy()
    for model in (original, changed):
        model.graph.initializers["c"].const_value = ir.tensor(
            np.array([1000, 2000, 3000, 4000], dtype=np_dtype), name="c"
        )
    value = changed.graph.initializers["c"]
    array = value.const_value.numpy().copy()
    array[0] = array.dtype.type(float(array[0]) * (1 + delta) if delta < 1 else array[0] + 1)
    value.const_value = ir.tensor(array, name="c")
    return original, changed


@pytest.mark.parametrize(
    ("type_name", "delta", "force_reference", "passes"),
    [
        ("float", 1e-7, False, True),
        ("float", 1e-3, False, False),
        ("float", 1e-7, True, False),
        ("double", 1e-14, False, True),
        ("double", 1e-9, False, False),
        ("float16", 1e-3, False, True),  # one unit in the last place at 1000
        ("float16", 1e-1, False, False),
        ("int64", 1, False, False),
        ("int32", 1, True, False),
    ],
    ids=[
        "f32-within-tolerance",
        "f32-beyond",
        "f32-reference-bit-exact",
        "f64-within",
        "f64-beyond",
        "f16-within",
        "f16-beyond",
        "int-exact-under-ort",
        "int-reference",
    ],
)
def test_tolerance_rules(
    type_name: str, delta: float, force_reference: bool, passes: bool
) -> None:
    original, changed = _pair(type_name, delta, force_reference)
    if type_name in ("float", "double", "float16") and delta < 1:
        # The perturbation must really change the constant, or the case proves nothing.
        assert changed.graph.initializers["c"].const_value.numpy()[0] != 1000
    if passes:
        result = check_equivalence(original, changed)
        assert result.backend == "onnxruntime"
        assert result.max_abs_diff["y"] > 0
        rtol, atol = FLOAT_TOLERANCES[ir.DataType[type_name.upper()]]
        assert result.tolerances == {type_name.upper(): {"rtol": rtol, "atol": atol}}
    else:
        backend = "onnx.reference" if force_reference else "onnxruntime"
        with pytest.raises(CheckFailedError, match=backend):
            check_equivalence(original, changed)


def test_equal_models_under_reference_are_exact() -> None:
    original, same = _pair("float", 0.0, True)
    result = check_equivalence(original, same)
    assert result.backend == "onnx.reference"
    assert result.exact and result.tolerances == {}
    assert "EyeLike" in (result.backend_reason or "")


ALL_TYPES = """
<ir_version: 10, opset_import: ["" : 22]>
g (float[batch, 3] a, bfloat16[batch, n] b, bool[2] c, int8[n] d, uint16[] e,
   float16[2, 2] f, string[2] s, double[?, 2] g) => (float[batch, 3] y) {
    y = Identity(a)
}
"""


def test_random_inputs_types_and_default_dims() -> None:
    model = ir.from_onnx_text(ALL_TYPES)
    model.graph.inputs[4].shape = ir.Shape([])  # a scalar (the text form leaves it unknown)
    feeds, defaulted = random_inputs(model, seed=3)
    expected = {
        "a": (np.float32, (DEFAULT_DIM, 3)),
        "b": (ml_dtypes.bfloat16, (DEFAULT_DIM, DEFAULT_DIM)),
        "c": (np.bool_, (2,)),
        "d": (np.int8, (DEFAULT_DIM,)),
        "e": (np.uint16, ()),
        "f": (np.float16, (2, 2)),
        "s": (np.object_, (2,)),
        "g": (np.float64, (DEFAULT_DIM, 2)),
    }
    assert {k: (v.dtype, v.shape) for k, v in feeds.items()} == {
        k: (np.dtype(t), s) for k, (t, s) in expected.items()
    }
    assert set(defaulted) == {"batch", "n", "g[0]"}
    model.graph.inputs[4].shape = ir.Shape([])
    again, _ = random_inputs(model, seed=3)
    for name, array in feeds.items():  # deterministic for a seed
        assert again[name].tobytes() == array.tobytes() or name == "s"
    assert all(0 <= v <= 4 for v in feeds["e"].reshape(-1).tolist())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '<ir_version: 10, opset_import: ["" : 22]> g (x) => (y) { y = Identity(x) }',
            "not a typed tensor",
        ),
    ],
    ids=["untyped-input"],
)
def test_random_inputs_rejects(text: str, message: str) -> None:
    with pytest.raises(EyefoldError, match=message):
        random_inputs(ir.from_onnx_text(text))


def test_random_inputs_rejects_unknown_rank() -> None:
    model = ir.from_onnx_text(ADD_CONSTANT.format(t="float", extra_out="", extra_node=""))
    model.graph.inputs[0].shape = None
    with pytest.raises(EyefoldError, match="rank is unknown"):
        random_inputs(model)


def test_different_outputs_fail() -> None:
    original = ir.from_onnx_text(ADD_CONSTANT.format(t="float", extra_out="", extra_node=""))
    renamed = ir.from_onnx_text(ADD_CONSTANT.format(t="float", extra_out="", extra_node=""))
    renamed.graph.outputs[0].name = "z"
    with pytest.raises(CheckFailedError, match="different outputs"):
        check_equivalence(original, renamed)


def test_optimized_that_onnxruntime_cannot_load_falls_back_to_reference() -> None:
    """onnxruntime has no bool EyeLike; Where(EyeLike(x) as bool, v, v) is still v."""
    text = ADD_CONSTANT.format(t="float", extra_out="", extra_node="")
    original = ir.from_onnx_text(text)
    rewritten = ir.from_onnx_text(
        text.replace(
            "y = Add(x, c)",
            "v = Add(x, c)\n    m = EyeLike <dtype = 9> (x)\n    y = Where(m, v, v)",
        )
    )
    result = check_equivalence(original, rewritten)
    assert result.backend == "onnx.reference"
    assert "cannot load the optimized model" in (result.backend_reason or "")
    # ... and the fallback still catches a wrong result.
    broken = ir.from_onnx_text(
        text.replace(
            "y = Add(x, c)",
            "v = Add(x, c)\n    m = EyeLike <dtype = 9> (x)\n    y = Where(m, v, x)",
        )
    )
    with pytest.raises(CheckFailedError, match=r"onnx\.reference"):
        check_equivalence(original, broken)


def test_optimized_that_nothing_can_run_fails() -> None:
    original = ir.from_onnx_text(ADD_CONSTANT.format(t="float", extra_out="", extra_node=""))
    broken = ir.from_onnx_text(ADD_CONSTANT.format(t="float", extra_out="", extra_node=""))
    broken.graph.node(0).op_type = "NoSuchOp"
    with pytest.raises(CheckFailedError, match="not the optimized one"):
        check_equivalence(original, broken)


def test_original_that_nothing_can_run_is_an_error_not_a_mismatch() -> None:
    text = ADD_CONSTANT.format(t="float", extra_out="", extra_node="")
    original, optimized = ir.from_onnx_text(text), ir.from_onnx_text(text)
    original.graph.node(0).domain = "com.example"
    original.opset_imports["com.example"] = 1
    with pytest.raises(EyefoldError, match="cannot run the original") as raised:
        check_equivalence(original, optimized)
    assert not isinstance(raised.value, CheckFailedError)


def test_models_with_external_data(tmp_path: Path) -> None:
    """A model whose weights are still lazily on disk is copied out, not serialized inline."""
    model = ir.from_onnx_text(ADD_CONSTANT.format(t="float", extra_out="", extra_node=""))
    weight = np.arange(4096, dtype=np.float32).reshape(1024, 4)
    model.graph.initializers["c"].const_value = ir.tensor(weight, name="c")
    model.graph.initializers["c"].shape = ir.Shape([1024, 4])
    model.graph.inputs[0].shape = ir.Shape([1024, 4])
    model.graph.outputs[0].shape = ir.Shape([1024, 4])
    ir.save(model, tmp_path / "m.onnx", external_data="m.onnx.data")
    lazy = load_model(tmp_path / "m.onnx")
    assert isinstance(lazy.graph.initializers["c"].const_value, ir.ExternalTensor)
    result = check_equivalence(tmp_path / "m.onnx", lazy, workdir=str(tmp_path))
    assert result.backend == "onnxruntime" and result.max_abs_diff == {"y": 0.0}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "m.onnx.data"]


# A BOOL EyeLike onnxruntime cannot load, behind a negative Pad onnx's reference evaluator
# cannot run: MossFormer's two obstacles, in five nodes.
def _unrunnable_twice() -> onnx.ModelProto:
    from onnx import TensorProto, helper

    pads = onnx.numpy_helper.from_array(np.array([0, 1, 0, -1], dtype=np.int64), "pads")
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "first"], ["n"]),
        helper.make_node("Concat", ["n", "n"], ["dims"], axis=0),
        helper.make_node(
            "ConstantOfShape",
            ["dims"],
            ["zeros"],
            value=helper.make_tensor("v", TensorProto.BOOL, [1], [False]),
        ),
        helper.make_node("EyeLike", ["zeros"], ["mask"], name="eye"),
        helper.make_node("Pad", ["x", "pads"], ["padded"], name="pad"),
        helper.make_node("MatMul", ["padded", "xt"], ["gram"]),
        helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0]),
        helper.make_node("Where", ["mask", "zero", "gram"], ["y"]),
    ]
    order = [0, 1, 2, 3, 4, 5, 7, 6, 8]
    graph = helper.make_graph(
        [nodes[i] for i in order],
        "unrunnable_twice",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "n"])],
        [
            pads,
            onnx.numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero"),
            onnx.numpy_helper.from_array(np.array([0], dtype=np.int64), "first"),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("target_runtime", [None, "onnxruntime"])
def test_a_model_neither_backend_runs_is_checked_with_its_eyelike_lowered(
    tmp_path: Path, target_runtime: str | None
) -> None:
    original = tmp_path / "original.onnx"
    onnx.save(_unrunnable_twice(), original)
    optimized = load_model(original)
    eyefold.optimize(optimized, target_runtime=target_runtime)
    result = check_equivalence(original, optimized)
    assert result.backend == "onnxruntime"
    assert result.original_route is not None and "(eye)" in result.original_route
    assert "index can't contain negative values" in (result.backend_reason or "")
    lowered_result = result.optimized_route is not None
    assert lowered_result == (target_runtime is None)
    line = result.describe()
    assert "the original ran with its EyeLike node onnxruntime cannot run (eye)" in line
    if target_runtime:
        assert "the result ran as written (onnxruntime loads it)" in line
    # The route is sound: a wrong result still fails.
    changed = load_model(original)
    eyefold.optimize(changed, target_runtime="onnxruntime")
    where = next(n for n in changed.graph if n.op_type == "Where")
    where.replace_input_with(1, where.inputs[2])
    with pytest.raises(CheckFailedError, match="differs under onnxruntime"):
        check_equivalence(original, changed)


def test_check_inputs_are_fed_as_given(tmp_path: Path) -> None:
    source = SAMPLES / "static_matmul.onnx"
    optimized = _optimized(source)
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, x=x)
    result = check_equivalence(source, optimized, inputs_path=str(feeds))
    assert result.inputs == {"x": [4, 4]} and result.inputs_from == str(feeds)
    assert f"inputs from {feeds}" in result.describe()


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({}, "missing \\['x'\\]"),
        ({"x": np.zeros((4, 4), np.float32), "z": np.zeros(1)}, "not inputs \\['z'\\]"),
        ({"x": np.zeros((4, 4), np.float64)}, "'x' is float64\\[4, 4\\]"),
        ({"x": np.zeros((4, 5), np.float32)}, "'x' is float32\\[4, 5\\]"),
    ],
    ids=["missing", "extra", "dtype", "shape"],
)
def test_check_inputs_that_do_not_fit_are_refused(
    tmp_path: Path, arrays: dict, message: str
) -> None:
    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, **arrays)
    optimized = _optimized(SAMPLES / "static_matmul.onnx")
    with pytest.raises(EyefoldError, match=message):
        check_equivalence(SAMPLES / "static_matmul.onnx", optimized, inputs_path=str(feeds))


def test_check_inputs_cli(tmp_path: Path, capsys) -> None:
    from eyefold.cli import main

    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, x=np.ones((4, 4), np.float32))
    output = tmp_path / "out.onnx"
    args = ["optimize", str(SAMPLES / "static_matmul.onnx"), str(output)]
    assert main([*args, "--check", "--check-inputs", str(feeds)]) == 0
    assert f"inputs from {feeds}" in capsys.readouterr().out
    assert main([*args, "--check-inputs", str(feeds)]) == 0
    assert "--check-inputs has no effect without --check" in capsys.readouterr().err
    np.savez(feeds, y=np.ones((4, 4), np.float32))
    assert main([*args, "--check", "--check-inputs", str(feeds)]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "missing ['x']" in error
    with pytest.raises(SystemExit):
        main(["optimize", str(SAMPLES), "--output-dir", str(tmp_path), "--check-inputs", "f"])
