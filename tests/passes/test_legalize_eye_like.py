"""Tests of LegalizeEyeLikePass and ``target_runtime="onnxruntime"``.

Every EyeLike-22 type combination (13 input types x 13 dtypes or none) with a symbolic
input shape, so nothing folds: before, onnxruntime refuses exactly what the probe says;
after, all 182 load, run, and give onnx's reference evaluator's bits for the original model.
"""

from __future__ import annotations

import ctypes
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

import eyefold
from eyefold.cli import main
from eyefold.options import PipelineOptions
from eyefold.passes import InferEyeLikeOutputsPass, LegalizeEyeLikePass, default_pipeline
from eyefold.passes.legalize_eye_like import LEGALIZED_FOR_KEY, CastForm, choose_cast_form
from eyefold.pipeline import run_pipeline
from eyefold.report import build_report
from eyefold.run_record import RunRecord, Stage, StepEntry
from eyefold.runtime.support import (
    CACHE_DIR_ENV,
    Combination,
    EyeLikeSupport,
    all_combinations,
    get_support,
)
from eyefold.testing import (
    assert_same_outputs,
    check_model_safely,
    count_ops,
    onnxruntime_loads,
    random_inputs,
)

COMBINATIONS = all_combinations(22)
DIMS = {"rows": 3, "cols": 5}


def _combination_id(combination: Combination) -> str:
    source, dtype = combination
    return f"{source.name}-to-{dtype.name if dtype is not None else 'absent'}"


COMBINATION_PARAMS = [pytest.param(c, id=_combination_id(c)) for c in COMBINATIONS]


@pytest.fixture(scope="module", autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory):
    """Keeps the probe's cache out of the user's folder (one probe for the module)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_DIR_ENV, str(tmp_path_factory.mktemp("eyefold-cache")))
        yield


@pytest.fixture(scope="module")
def support(_private_cache) -> EyeLikeSupport:
    return get_support("onnxruntime")


def _eyelike_model(
    source: ir.DataType, dtype: ir.DataType | None, *, opset: int = 22, k: int = 1
) -> onnx.ModelProto:
    attributes = {"k": k} if dtype is None else {"k": k, "dtype": int(dtype)}
    graph = helper.make_graph(
        [helper.make_node("EyeLike", ["x"], ["y"], name="eye", **attributes)],
        "eyelike",
        [helper.make_tensor_value_info("x", int(source), ["rows", "cols"])],
        [helper.make_tensor_value_info("y", int(dtype or source), ["rows", "cols"])],
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10
    )


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _run_bits(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[tuple]:
    """onnxruntime outputs as (shape, raw bytes): bfloat16 too, which numpy cannot hold."""
    session = _session(model)
    ort_feeds = {}
    for value in session.get_inputs():
        array = feeds[value.name]
        onnx_type = helper.np_dtype_to_tensor_dtype(array.dtype)
        raw = array.view(np.uint16) if array.dtype.itemsize == 2 else array
        ort_feeds[value.name] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(raw, onnx_type)
    outputs = session.run_with_ort_values(None, ort_feeds)
    return [
        (tuple(o.shape()), ctypes.string_at(o.data_ptr(), o.tensor_size_in_bytes()))
        for o in outputs
    ]


def _reference_bits(model: onnx.ModelProto, feeds, **options) -> list[tuple]:
    outputs = ReferenceEvaluator(model, **options).run(None, feeds)
    return [(o.shape, np.ascontiguousarray(o).tobytes()) for o in outputs]


# --- the 182 combinations ---


def test_before_legalization_onnxruntime_refuses_what_the_probe_says(support):
    refused = {c for c in COMBINATIONS if not onnxruntime_loads(_eyelike_model(*c))}
    assert refused == set(COMBINATIONS) - support.supported[22]
    assert 0 < len(refused) < len(COMBINATIONS)
    for combination in set(COMBINATIONS) - refused:  # what loads also computes the right bits
        model = _eyelike_model(*combination)
        feeds = random_inputs(model, dims=DIMS)
        assert _run_bits(model, feeds) == _reference_bits(model, feeds)


@pytest.mark.parametrize("combination", COMBINATION_PARAMS)
def test_after_legalization_every_combination_runs_bit_exact(combination, support):
    original = _eyelike_model(*combination)
    result = eyefold.optimize_with_report(original, target_runtime="onnxruntime")
    (outcome,) = result.report.nodes
    ran_before = combination in support.supported[22]
    assert outcome.runtime_supported is ran_before
    assert outcome.legalized is not ran_before
    assert count_ops(result.model, "EyeLike") == 1
    casts = count_ops(result.model, "Cast")
    assert casts == 0 if ran_before else 1 <= casts <= 2
    check_model_safely(result.model)
    feeds = random_inputs(original, dims=DIMS, seed=COMBINATIONS.index(combination))
    assert _run_bits(result.model, feeds) == _reference_bits(original, feeds)


@pytest.mark.slow
def test_cli_legalizes_a_bool_eyelike(tmp_path: pathlib.Path):
    original = _eyelike_model(ir.DataType.BOOL, None)
    source, target = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(original, source)
    assert not onnxruntime_loads(original)
    env = {**os.environ, CACHE_DIR_ENV: str(tmp_path / "cache")}
    command = [sys.executable, "-m", "eyefold", "optimize", str(source), str(target)]
    completed = subprocess.run(
        [*command, "--target-runtime", "onnxruntime", "-q"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    optimized = onnx.load(target)
    feeds = random_inputs(original, dims=DIMS)
    assert _run_bits(optimized, feeds) == _reference_bits(original, feeds)
    assert (tmp_path / "cache").is_dir()


# --- what changes without the option, and twice ---


@pytest.mark.parametrize(
    "combination",
    [
        pytest.param((ir.DataType.BOOL, None), id="BOOL-absent"),
        pytest.param((ir.DataType.FLOAT, ir.DataType.UINT8), id="FLOAT-to-UINT8"),
    ],
)
def test_without_the_option_nothing_changes(combination, tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    original = _eyelike_model(*combination)
    result = eyefold.optimize_with_report(original)
    (outcome,) = result.report.nodes
    # Without the option the node is only judged (from the table, no session): the report
    # says it will not run and names the option.
    assert (outcome.runtime_supported, outcome.legalized) == (False, False)
    assert "would become" in outcome.runtime_note
    assert "legalize" not in [step.name for step in result.report.steps]
    assert result.report.to_dict()["runtime"]["rewrite"] is False
    assert any("--target-runtime onnxruntime" in w for w in result.report.warnings)
    assert [n.op_type for n in result.model.graph.node] == ["EyeLike"]
    assert not onnxruntime_loads(result.model)
    assert not (tmp_path / "cache").exists()
    with_option = eyefold.optimize(original, target_runtime="onnxruntime")
    assert onnxruntime_loads(with_option)


def test_a_supported_combination_is_left_alone(support):
    original = _eyelike_model(ir.DataType.FLOAT, ir.DataType.INT64)
    assert (ir.DataType.FLOAT, ir.DataType.INT64) in support.supported[22]
    result = eyefold.optimize_with_report(original, target_runtime="onnxruntime")
    assert result.report.nodes[0].runtime_supported is True
    assert result.report.nodes[0].legalized is False
    assert [n.op_type for n in result.model.graph.node] == ["EyeLike"]
    assert result.report.extra["runtime"]["legalized"] == 0


def test_legalization_is_deterministic_and_idempotent():
    original = _eyelike_model(ir.DataType.INT8, ir.DataType.UINT16)
    once = eyefold.optimize(original, target_runtime="onnxruntime")
    again = eyefold.optimize(original, target_runtime="onnxruntime")
    twice = eyefold.optimize(once, target_runtime="onnxruntime")
    assert once.SerializeToString() == again.SerializeToString()
    assert twice.SerializeToString() == once.SerializeToString()
    assert [n.op_type for n in once.graph.node] == ["Cast", "EyeLike", "Cast"]
    for node in once.graph.node:
        assert {p.key: p.value for p in node.metadata_props} == {
            LEGALIZED_FOR_KEY: "onnxruntime"
        }


# --- the choice of types ---


def _cast_form_for(
    support: EyeLikeSupport, combination: Combination, opset: int = 22
) -> CastForm:
    source, dtype = combination
    cast_form = choose_cast_form(support, source, dtype or source, opset)
    assert cast_form is not None
    assert support.runs(cast_form.input_type, cast_form.dtype, opset)
    return cast_form


@pytest.mark.parametrize("combination", COMBINATION_PARAMS)
def test_plan_casts_only_where_the_runtime_needs_it(combination, support):
    source, dtype = combination
    wanted = dtype or source
    cast_form = _cast_form_for(support, combination)
    if combination in support.supported[22]:  # a cast of ours could only add work
        assert (cast_form.input_type, cast_form.eyelike_output) == (source, wanted)
        return
    # No input cast when the runtime takes the input type at all; no output cast when its
    # kernel makes the wanted type natively from there. Runtime-inserted casts (float16 on
    # onnxruntime's CPU) count as casts, so they never make a detour look free.
    takes_input = any(i == source for i, _ in support.supported[22])
    makes_wanted = any(
        (o or i) == wanted and (i == source or not takes_input) for i, o in support.native[22]
    )
    assert (cast_form.input_type != source) is not takes_input
    assert (cast_form.eyelike_output != wanted) is not makes_wanted
    if ir.DataType.FLOAT16 not in (source, wanted):
        assert ir.DataType.FLOAT16 not in (cast_form.input_type, cast_form.eyelike_output)


def _only(pairs: set, version: int = 22) -> EyeLikeSupport:
    """A support table of a runtime that runs just ``pairs`` at EyeLike ``version``."""
    tables = {9: frozenset(), 22: frozenset()}
    tables[version] = frozenset(pairs)
    return EyeLikeSupport("onnxruntime", "synthetic", "cache", tables, tables)


def test_plan_uses_bfloat16_only_where_the_opset_has_it():
    bf16_only = _only({(ir.DataType.BFLOAT16, None)})
    cast_form = choose_cast_form(bf16_only, ir.DataType.BOOL, ir.DataType.BOOL, 22)
    assert cast_form == CastForm(ir.DataType.BFLOAT16, None, ir.DataType.BOOL)
    assert choose_cast_form(bf16_only, ir.DataType.BOOL, ir.DataType.BOOL, 21) is None


def test_node_without_a_cast_form_is_lowered_where_the_opset_has_range():
    original = _eyelike_model(ir.DataType.BOOL, None, opset=21)
    model = ir.serde.deserialize_model(original)
    InferEyeLikeOutputsPass()(model)
    result = LegalizeEyeLikePass(support=_only({(ir.DataType.BFLOAT16, None)}))(model)
    (outcome,) = result.outcomes
    assert (outcome.runs, outcome.legalized, outcome.lowered) == (False, True, True)
    assert "(lowered)" in outcome.note
    assert "EyeLike" not in {n.op_type for n in model.graph}
    assert_same_outputs(original, ir.to_proto(model))


def test_node_without_a_supported_form_at_its_opset_is_left_and_reported():
    # Opset 10: no bfloat16 for a cast form, and no Range for the lowered one.
    model = ir.serde.deserialize_model(_eyelike_model(ir.DataType.BOOL, None, opset=10))
    InferEyeLikeOutputsPass()(model)
    result = LegalizeEyeLikePass(support=_only({(ir.DataType.BFLOAT16, None)}))(model)
    assert not result.modified
    (outcome,) = result.outcomes
    assert (outcome.runs, outcome.legalized) == (False, False)
    assert "no supported form exists at opset 10" in outcome.note
    record = RunRecord(opset_before=10, opset_after=10)
    record.add(StepEntry("legalize", 0.0, Stage.PIPELINE, result.modified, result))
    report = build_report(record)
    assert "may still fail" in report.warnings[0]
    assert [n.op_type for n in model.graph] == ["EyeLike"]


def test_bfloat16_plan_is_exact_under_the_reference():
    original = _eyelike_model(ir.DataType.UINT32, ir.DataType.INT8)
    model = ir.serde.deserialize_model(original)
    InferEyeLikeOutputsPass()(model)
    # No other runtime to keep running: tract, which runs the original, has no bfloat16.
    legalize = LegalizeEyeLikePass(support=_only({(ir.DataType.BFLOAT16, None)}), others=())
    assert legalize(model).modified
    legalized = ir.to_proto(model)
    assert [n.op_type for n in legalized.graph.node] == ["Cast", "EyeLike", "Cast"]
    check_model_safely(legalized)
    feeds = random_inputs(original, dims=DIMS)
    assert _reference_bits(legalized, feeds) == _reference_bits(original, feeds)


@pytest.mark.parametrize("opset", [9, 13, 21])
@pytest.mark.parametrize(
    "combination",
    [
        pytest.param((ir.DataType.BOOL, None), id="BOOL-absent"),
        pytest.param((ir.DataType.UINT8, ir.DataType.INT16), id="UINT8-to-INT16"),
        pytest.param((ir.DataType.FLOAT16, ir.DataType.BOOL), id="FLOAT16-to-BOOL"),
        pytest.param((ir.DataType.INT8, ir.DataType.FLOAT16), id="INT8-to-FLOAT16"),
        pytest.param((ir.DataType.INT32, None), id="INT32-absent-supported"),
    ],
)
def test_older_opsets_are_legalized_in_place(combination, opset, support):
    original = _eyelike_model(*combination, opset=opset)
    result = eyefold.optimize_with_report(
        original, upgrade=False, target_runtime="onnxruntime"
    )
    assert result.report.opset_after == opset
    assert result.report.nodes[0].runtime_supported is (combination in support.supported[9])
    check_model_safely(result.model)
    feeds = random_inputs(original, dims=DIMS)
    assert _run_bits(result.model, feeds) == _reference_bits(original, feeds)


# --- graph structure: users, graph outputs, subgraphs, functions, names ---


def _parse(text: str) -> onnx.ModelProto:
    return onnx.parser.parse_model(text)


def test_users_and_graph_output_of_a_bool_mask_keep_working():
    original = _parse(
        """<ir_version: 10, opset_import: ["" : 22]>
        g (float[n, n] x) => (float[n, n] y, bool[n, n] mask) {
            mask = EyeLike <dtype = 9> (x)
            negative = Neg (x)
            y = Where (mask, x, negative)
        }"""
    )
    assert not onnxruntime_loads(original)
    optimized = eyefold.optimize(original, target_runtime="onnxruntime")
    assert [o.name for o in optimized.graph.output] == ["y", "mask"]
    check_model_safely(optimized)
    feeds = random_inputs(original, dims={"n": 4})
    assert _run_bits(optimized, feeds) == _reference_bits(original, feeds)


def test_eyelike_in_an_if_branch_is_legalized():
    original = _parse(
        """<ir_version: 10, opset_import: ["" : 22]>
        g (bool cond, int8[n, m] x) => (uint8[n, m] y) {
            y = If (cond) <
                then_branch = t () => (uint8[n, m] a) { a = EyeLike <dtype = 2, k = 1> (x) },
                else_branch = e () => (uint8[n, m] b) { b = Cast <to = 2> (x) }
            >
        }"""
    )
    result = eyefold.optimize_with_report(original, target_runtime="onnxruntime")
    assert [n.legalized for n in result.report.nodes] == [True]
    assert result.report.nodes[0].graph != "main"
    check_model_safely(result.model)
    for cond in (True, False):
        feeds = {**random_inputs(original, dims=DIMS), "cond": np.array(cond)}
        assert _run_bits(result.model, feeds) == _reference_bits(original, feeds)


def test_eyelike_in_a_function_is_legalized():
    original = _parse(
        """<ir_version: 10, opset_import: ["" : 22, "pkg" : 1]>
        g (float[n, m] x) => (int16[n, m] y) {
            y = pkg.Eye (x)
        }
        <domain: "pkg", opset_import: ["" : 22]>
        Eye (a) => (b) {
            b = EyeLike <dtype = 5> (a)
        }"""
    )
    assert not onnxruntime_loads(original)
    result = eyefold.optimize_with_report(original, target_runtime="onnxruntime")
    (outcome,) = result.report.nodes
    assert outcome.input_dtype is None  # function inputs are untyped
    assert (outcome.runtime_supported, outcome.legalized) == (
        False,
        True,
    )  # no type runs INT16
    optimized = result.model
    assert [n.op_type for n in optimized.functions[0].node] == ["Cast", "EyeLike", "Cast"]
    check_model_safely(optimized)
    feeds = random_inputs(original, dims=DIMS)
    assert _run_bits(optimized, feeds) == _reference_bits(original, feeds)


def test_generated_names_never_collide():
    original = _parse(
        """<ir_version: 10, opset_import: ["" : 22]>
        g (bool[n, m] x) => (bool[n, m] y, bool[n, m] y__eyefold_float) {
            y = EyeLike (x)
            y__eyefold_float = Identity (x)
        }"""
    )
    optimized = eyefold.optimize(original, target_runtime="onnxruntime")
    names = [v for n in optimized.graph.node for v in n.output]
    assert len(names) == len(set(names))
    check_model_safely(optimized)
    feeds = random_inputs(original, dims=DIMS)
    assert _run_bits(optimized, feeds) == _reference_bits(original, feeds)


# --- unknown input types ---


class _PassThrough(OpRun):
    """``com.example.Opaque``: a custom op eyefold cannot see through; returns its input."""

    op_domain = "com.example"

    def _run(self, x):
        return (x,)


_PassThrough.__name__ = "Opaque"


def _opaque_model(dtype_attribute: str, output_type: str) -> onnx.ModelProto:
    return _parse(
        f"""<ir_version: 10, opset_import: ["" : 22, "com.example" : 1]>
        g (uint16[n, m] x) => ({output_type} y) {{
            hidden = com.example.Opaque (x)
            y = EyeLike {dtype_attribute} (hidden)
        }}"""
    )


def test_unknown_input_type_without_dtype_is_left_and_said_so():
    original = _opaque_model("", "uint16[n, m]")
    result = eyefold.optimize_with_report(original, target_runtime="onnxruntime")
    (outcome,) = result.report.nodes
    assert outcome.runtime_supported is None
    assert not outcome.legalized
    assert "cannot tell" in outcome.runtime_note
    assert count_ops(result.model, "Cast") == 0


def test_unknown_input_type_with_an_unsupported_dtype_is_legalized():
    original = _opaque_model("<dtype = 9>", "bool[n, m]")
    result = eyefold.optimize_with_report(original, target_runtime="onnxruntime")
    (outcome,) = result.report.nodes
    assert outcome.runtime_supported is False  # no input type runs dtype=BOOL
    assert outcome.legalized
    assert count_ops(result.model, "Cast") == 2
    feeds = random_inputs(original, dims=DIMS)
    assert _reference_bits(result.model, feeds, new_ops=[_PassThrough]) == _reference_bits(
        original, feeds, new_ops=[_PassThrough]
    )


# --- checking only (what `eyefold inspect` uses) ---


def test_check_only_never_probes_changes_nothing_and_suggests_the_option(
    tmp_path, monkeypatch
):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "empty-cache"))
    original = ir.serde.deserialize_model(_eyelike_model(ir.DataType.BOOL, None))
    before = ir.to_proto(original).SerializeToString()
    report = run_pipeline(original)
    assert ir.to_proto(original).SerializeToString() == before
    assert report.extra["runtime"]["source"] == "fallback"
    assert report.nodes[0].runtime_supported is False
    assert not report.nodes[0].legalized
    assert "would become" in report.nodes[0].runtime_note
    assert any("--target-runtime onnxruntime" in w for w in report.warnings)
    assert not (tmp_path / "empty-cache").exists()


def test_check_only_is_quiet_for_a_supported_node(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "empty-cache"))
    model = ir.serde.deserialize_model(_eyelike_model(ir.DataType.FLOAT, None))
    report = run_pipeline(model)
    assert report.nodes[0].runtime_supported is True
    assert report.warnings == []


# --- composition: the pass manager and `eyefold inspect` ---


def test_default_pipeline_with_a_target_runtime_legalizes():
    original = _eyelike_model(ir.DataType.UINT16, None)
    with_target = ir.serde.deserialize_model(original)
    options = PipelineOptions(upgrade=False, target_runtime="onnxruntime")
    assert default_pipeline(options)(with_target).modified
    without = ir.serde.deserialize_model(original)
    default_pipeline(PipelineOptions(upgrade=False))(without)
    assert [n.op_type for n in without.graph] == ["EyeLike"]
    feeds = random_inputs(original, dims=DIMS)
    assert _run_bits(ir.to_proto(with_target), feeds) == _reference_bits(original, feeds)


def test_inspect_flags_what_onnxruntime_cannot_run_and_writes_nothing(tmp_path, capsys):
    path = tmp_path / "model.onnx"
    onnx.save(_eyelike_model(ir.DataType.INT8, None), path)
    before = path.read_bytes()
    assert main(["inspect", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["nodes"][0]["runtime_supported"] is False
    assert report["runtime"]["rewrite"] is False
    assert any("--target-runtime onnxruntime" in w for w in report["warnings"])
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


def test_inspect_is_quiet_when_onnxruntime_runs_everything(tmp_path, capsys):
    path = tmp_path / "model.onnx"
    onnx.save(_eyelike_model(ir.DataType.INT64, ir.DataType.FLOAT), path)
    assert main(["inspect", str(path)]) == 0
    output = capsys.readouterr().out
    assert "RUNS" in output
    assert "--target-runtime" not in output


def test_inspect_with_target_runtime_shows_the_rewrite(tmp_path, capsys):
    path = tmp_path / "model.onnx"
    onnx.save(_eyelike_model(ir.DataType.INT8, None), path)
    assert main(["inspect", str(path), "--target-runtime", "onnxruntime"]) == 0
    output = capsys.readouterr().out
    assert "legalized as Cast(to=" in output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


def test_unknown_target_runtime_is_a_usage_error(tmp_path, capsys):
    path = tmp_path / "model.onnx"
    onnx.save(_eyelike_model(ir.DataType.INT8, None), path)
    with pytest.raises(SystemExit) as exit_info:
        main(["optimize", str(path), str(tmp_path / "out.onnx"), "--target-runtime", "mnn"])
    assert exit_info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
    assert not (tmp_path / "out.onnx").exists()


def test_eyelike_used_inside_a_branch_feeds_the_cast_there():
    original = _parse(
        """<ir_version: 10, opset_import: ["" : 22]>
        g (bool cond, float[n, m] x) => (uint8[n, m] y) {
            eye = EyeLike <dtype = 2> (x)
            y = If (cond) <
                then_branch = t () => (uint8[n, m] a) { a = Identity (eye) },
                else_branch = e () => (uint8[n, m] b) { b = Cast <to = 2> (x) }
            >
        }"""
    )
    optimized = eyefold.optimize(original, target_runtime="onnxruntime")
    then_branch = optimized.graph.node[-1].attribute[0].g
    (cast_output,) = [n.output[0] for n in optimized.graph.node if n.op_type == "Cast"]
    assert then_branch.node[0].input == [cast_output] == ["eye"]
    check_model_safely(optimized)
    for cond in (True, False):
        feeds = {**random_inputs(original, dims=DIMS), "cond": np.array(cond)}
        assert _run_bits(optimized, feeds) == _reference_bits(original, feeds)


def test_reoptimizing_without_the_option_keeps_the_legalization():
    """The rules would fold the legalization's Casts back; they leave legalized nodes."""
    text = """<ir_version: 10, opset_import: ["" : 22]>
    g (float[N,4] x) => (bool[N,4] m) {
        m = EyeLike<dtype=9>(x)
    }"""
    legalized = eyefold.optimize(
        ir.to_proto(ir.from_onnx_text(text)), target_runtime="onnxruntime"
    )
    again = eyefold.optimize(legalized)
    assert count_ops(again, "Cast") == count_ops(legalized, "Cast") >= 1
    feeds = {"x": np.zeros((3, 4), np.float32)}
    (mask,) = ort.InferenceSession(
        again.SerializeToString(), providers=["CPUExecutionProvider"]
    ).run(None, feeds)
    np.testing.assert_array_equal(mask, np.eye(3, 4, dtype=np.bool_))


def test_rules_merge_casts_into_an_eyelike_only_where_the_result_still_runs():
    text = """<ir_version: 10, opset_import: ["" : 22]>
    g (float[N,4] x) => (bool[N,4] m) {
        e = EyeLike(x)
        m = Cast<to=9>(e)
    }"""
    # Without a target runtime, EyeLike(dtype=BOOL) would not load on onnxruntime: kept.
    kept = eyefold.optimize(ir.to_proto(ir.from_onnx_text(text)))
    assert count_ops(kept, "Cast") == 1 and onnxruntime_loads(kept)
    # With one, the merge is allowed: legalization makes the merged node runnable.
    merged = eyefold.optimize_with_report(
        ir.to_proto(ir.from_onnx_text(text)), target_runtime="onnxruntime"
    )
    assert merged.report.extra["rules"]["cast_to_dtype"] == 1
    assert onnxruntime_loads(merged.model)
