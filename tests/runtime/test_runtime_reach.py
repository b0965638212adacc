"""Runtime reach on the real runtimes: every target, every option set, never worse.

For each runtime installed (onnxruntime, OpenVINO and tract come with the test extra; TVM
with the ``tvm`` extra), the 182 EyeLike-22 type combinations (k=1) are measured one model
each, with a static [4, 5] input and a dynamic [n, m] one: which run bit-exactly before
eyefold. That measurement must agree with the table eyefold ships for the runtime. Then
all 182 go through eyefold in one model per option set and shape, and run in one session
per runtime: after ``--target-runtime R`` every combination R can hold runs on R, and
after every option set nothing that ran on a runtime before fails or differs there.
A runtime that is not installed skips, saying so.
"""

from __future__ import annotations

import functools
import pathlib

import ml_dtypes
import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import helper

import eyefold
from eyefold.core.eyelike_types import EYELIKE_TYPES_OPSET_22
from eyefold.passes.lower_eye_like import LowerEyeLikePass
from eyefold.runtime.installed import installed_version
from eyefold.runtime.measured import MEASURED
from eyefold.runtime.runners import RunError, missing_reason, runner_for
from eyefold.runtime.support import all_combinations, get_profile

# Every runtime, option set and type combination, about 4 minutes: run before a merge,
# not in the daily loop.
pytestmark = pytest.mark.slow

RUNTIMES = ("onnxruntime", "openvino", "tract", "tvm")
SHAPES = ("static", "dynamic")
TYPES = sorted(EYELIKE_TYPES_OPSET_22, key=lambda t: t.name)
COMBINATIONS = all_combinations(22)
OPTION_SETS = {
    "default": {},
    "lower-eyelike": {"lower_eyelike": True},
    **{f"target-{name}": {"target_runtime": name} for name in (*RUNTIMES, "tensorrt")},
}


def _name(combination: tuple[ir.DataType, ir.DataType | None]) -> str:
    source, dtype = combination
    return f"{source.name.lower()}__{dtype.name.lower() if dtype else 'none'}"


def _expected(data_type: ir.DataType) -> np.ndarray:
    return np.eye(4, 5, k=1).astype(data_type.numpy())


def _model(combinations, shape: str) -> onnx.ModelProto:
    """One EyeLike(k=1) per combination, each with its own input x_NAME and output y_NAME."""
    dims = ["n", "m"] if shape == "dynamic" else [4, 5]
    nodes, inputs, outputs = [], [], []
    for combination in combinations:
        source, dtype = combination
        name = _name(combination)
        attributes = {"k": 1} | ({} if dtype is None else {"dtype": int(dtype)})
        node = helper.make_node("EyeLike", [f"x_{name}"], [f"y_{name}"], name, **attributes)
        nodes.append(node)
        inputs.append(helper.make_tensor_value_info(f"x_{name}", int(source), dims))
        outputs.append(helper.make_tensor_value_info(f"y_{name}", int(dtype or source), dims))
    graph = helper.make_graph(nodes, "reach", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)], ir_version=10)


def _feeds(combinations) -> dict[str, np.ndarray]:
    pattern = np.random.default_rng(0).integers(0, 2, size=(4, 5))
    return {f"x_{_name(c)}": pattern.astype(c[0].numpy()) for c in combinations}


def _bit_exact(got: np.ndarray, want: np.ndarray) -> bool:
    got = np.asarray(got)
    return (got.dtype, got.shape, got.tobytes()) == (want.dtype, want.shape, want.tobytes())


def _run(runtime: str, model: onnx.ModelProto, combinations, folder: pathlib.Path) -> dict:
    """Combination -> "ok" or what failed, running ``model`` once on ``runtime``."""
    path = folder / f"{runtime}-{len(list(folder.iterdir()))}.onnx"
    onnx.save(model, path)
    try:
        outputs = runner_for(runtime)(str(path), _feeds(combinations))
    except RunError as error:
        return dict.fromkeys(combinations, str(error))
    by_name = dict(zip([o.name for o in model.graph.output], outputs, strict=True))
    results = {}
    for combination in combinations:
        source, dtype = combination
        got = by_name[f"y_{_name(combination)}"]
        results[combination] = "ok" if _bit_exact(got, _expected(dtype or source)) else (
            f"differs: {np.asarray(got).dtype} {np.asarray(got).tolist()}"
        )
    return results


def _failures(runtime, combinations, shape, options, folder) -> dict:
    """Runs ``combinations`` after eyefold in one model; one model each when it fails."""
    model = eyefold.optimize(_model(combinations, shape), **options)
    results = _run(runtime, model, combinations, folder)
    if all(result == "ok" for result in results.values()):
        return {}
    alone = {}
    for combination in combinations:
        single = eyefold.optimize(_model([combination], shape), **options)
        alone |= _run(runtime, single, [combination], folder)
    return {_name(c): r for c, r in alone.items() if r != "ok"}


@functools.cache
def _installed(runtime: str) -> None:
    reason = missing_reason(runtime)
    if reason is not None:
        pytest.skip(f"{reason}: its runtime-reach tests are skipped")


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> pathlib.Path:
    return tmp_path_factory.mktemp("reach")


@functools.cache
def _before(runtime: str, shape: str, folder: pathlib.Path) -> frozenset:
    """The combinations that run bit-exactly on ``runtime`` before eyefold, one model each."""
    ran = set()
    for combination in COMBINATIONS:
        result = _run(runtime, _model([combination], shape), [combination], folder)
        if result[combination] == "ok":
            ran.add(combination)
    return frozenset(ran)


def _reachable(runtime: str) -> list:
    lacks = get_profile(runtime, probe=False).lacks
    return [c for c in COMBINATIONS if not {c[0], c[1] or c[0]} & lacks]


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_the_shipped_table_is_what_the_installed_runtime_runs(runtime, folder):
    _installed(runtime)
    measured = _before(runtime, "dynamic", folder)
    table = get_profile(runtime, probe=runtime == "onnxruntime").support.supported[22]
    if installed_version(runtime) == MEASURED[runtime].version:
        assert measured == table
    else:  # another version: what the table promises must still run
        assert table <= measured, sorted(_name(c) for c in table - measured)


def _cast_and_lowered(runtime: str, folder: pathlib.Path) -> tuple[set, set]:
    casts, lowered = set(), set()
    for source in TYPES:
        for target in TYPES:
            node = helper.make_node("Cast", ["x"], ["y"], to=int(target))
            graph = helper.make_graph(
                [node],
                "cast",
                [helper.make_tensor_value_info("x", int(source), ["n", "m"])],
                [helper.make_tensor_value_info("y", int(target), ["n", "m"])],
            )
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
            model.ir_version = 10
            path = folder / f"cast-{runtime}-{source.name}-{target.name}.onnx"
            onnx.save(model, path)
            try:
                (got,) = runner_for(runtime)(str(path), {"x": _expected(source)})
            except RunError:
                continue
            if _bit_exact(got, _expected(target)):
                casts.add((source, target))
    for target in TYPES:
        model = ir.from_proto(_model([(ir.DataType.FLOAT, target)], "dynamic"))
        LowerEyeLikePass()(model)
        combination = (ir.DataType.FLOAT, target)
        if _run(runtime, ir.to_proto(model), [combination], folder)[combination] == "ok":
            lowered.add(target)
    return casts, lowered


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_the_shipped_casts_and_lowered_forms_are_what_the_runtime_runs(runtime, folder):
    _installed(runtime)
    casts, lowered = _cast_and_lowered(runtime, folder)
    profile = get_profile(runtime, probe=False)
    if installed_version(runtime) == MEASURED[runtime].version:
        assert (casts, lowered) == (set(profile.casts), set(profile.lowered))
    else:  # another version: what the table promises must still run
        missing = sorted((a.name, b.name) for a, b in profile.casts - casts)
        assert not missing, missing
        assert profile.lowered <= lowered


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_its_own_target_runs_every_combination_it_can_hold(runtime, shape, folder):
    _installed(runtime)
    reachable = _reachable(runtime)
    assert _failures(runtime, reachable, shape, {"target_runtime": runtime}, folder) == {}
    assert len(reachable) == (156 if runtime == "tract" else 182)


@pytest.mark.parametrize("shape", SHAPES)
def test_tract_warns_for_each_bfloat16_node_naming_tract(shape):
    lacked = [c for c in COMBINATIONS if ir.DataType.BFLOAT16 in (c[0], c[1])]
    report = eyefold.optimize_with_report(
        _model(COMBINATIONS, shape), target_runtime="tract"
    ).report
    for combination in lacked:
        named = [w for w in report.warnings if f"'{_name(combination)}'" in w]
        assert len(named) == 1 and "tract" in named[0] and "BFLOAT16" in named[0]
    assert len(report.warnings) == len(lacked) == 26


@pytest.mark.parametrize("options", list(OPTION_SETS.values()), ids=list(OPTION_SETS))
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_nothing_that_ran_before_fails_or_differs_after(runtime, shape, options, folder):
    _installed(runtime)
    before = sorted(_before(runtime, shape, folder), key=_name)
    assert _failures(runtime, before, shape, options, folder) == {}


def test_bfloat16_outputs_are_compared_as_bits():
    want = _expected(ir.DataType.BFLOAT16)
    assert want.dtype == ml_dtypes.bfloat16
    assert not _bit_exact(want.astype(np.float32), want)
