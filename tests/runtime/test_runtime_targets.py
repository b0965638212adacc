"""The targets openvino, tract and tvm: forms chosen from the shipped tables, never breaking
another runtime, and the summary and inspect speaking of the target.

What the forms do on the real runtimes is tested in ``test_runtime_reach.py``; these tests
need no runtime.
"""

from __future__ import annotations

import collections
import dataclasses

import onnx
import onnx_ir as ir
import pytest
from onnx import helper

import eyefold
from eyefold.cli import main
from eyefold.core.eyelike_types import allowed_types
from eyefold.errors import EyefoldError
from eyefold.options import PipelineOptions
from eyefold.passes import InferEyeLikeOutputsPass, LegalizeEyeLikePass
from eyefold.runtime.forms import CastForm, Lowered, choose_cast_form, choose_form
from eyefold.runtime.installed import SUPPORTED_RUNTIMES, installed_version
from eyefold.runtime.profile import RuntimeProfile
from eyefold.runtime.support import (
    all_combinations,
    fallback_support,
    get_profile,
    get_support,
    other_profiles,
)
from eyefold.testing import count_ops

D = ir.DataType


def _model(source: D, dtype: D | None, *, dims=("n", "m"), opset=22) -> onnx.ModelProto:
    attributes = {"k": 1} | ({} if dtype is None else {"dtype": int(dtype)})
    graph = helper.make_graph(
        [helper.make_node("EyeLike", ["x"], ["y"], name="eye", **attributes)],
        "g",
        [helper.make_tensor_value_info("x", int(source), list(dims))],
        [helper.make_tensor_value_info("y", int(dtype or source), list(dims))],
    )
    opsets = [helper.make_opsetid("", opset)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def _kinds(runtime: str) -> collections.Counter:
    """How each of the 182 combinations fares on ``runtime``'s target, by its tables."""
    profile, others = get_profile(runtime, probe=False), other_profiles(runtime)
    kinds = collections.Counter()
    for source, dtype in all_combinations(22):
        if profile.runs_eyelike(source, dtype, 22):
            kinds["keep"] += 1
            continue
        wanted = dtype or source
        form = choose_form(profile, others, source, dtype, wanted, 22, lowerable=True).form
        kinds["none" if form is None else type(form).__name__.lower()] += 1
    return kinds


@pytest.mark.parametrize(
    ("runtime", "kinds"),
    [
        ("openvino", {"keep": 182}),
        ("tract", {"keep": 143, "castform": 13, "none": 26}),  # none: bfloat16
        ("tvm", {"keep": 26, "castform": 145, "lowered": 11}),  # lowered: int64 outputs
    ],
)
def test_each_target_keeps_casts_or_lowers_by_its_table(runtime, kinds):
    assert _kinds(runtime) == kinds


def test_keeping_other_runtimes_running_never_changes_an_onnxruntime_cast_form():
    profile = get_profile("onnxruntime", probe=False)
    others = other_profiles("onnxruntime")
    for opset in (9, 12, 13, 21, 22):
        sources = [*allowed_types(opset), None]
        for source in sources:
            for dtype in [None, *allowed_types(opset)]:
                wanted = dtype or source
                if wanted is None or profile.runs_eyelike(source, dtype, opset):
                    continue
                choice = choose_form(
                    profile, others, source, dtype, wanted, opset, lowerable=True
                )
                assert choice.form == choose_cast_form(profile.support, source, wanted, opset)


def test_tvm_int64_from_another_type_is_lowered_to_keep_tract_running():
    # TVM takes no dtype, so the int64 would come from a Cast to int64, which tract (where
    # the node ran) returns as its shape type TDim: the lowered form runs on both.
    tvm, others = get_profile("tvm", probe=False), other_profiles("tvm")
    choice = choose_form(tvm, others, D.FLOAT, D.INT64, D.INT64, 22, lowerable=True)
    assert choice.form == Lowered(D.INT64)
    alone = choose_form(tvm, [], D.FLOAT, D.INT64, D.INT64, 22, lowerable=True)
    assert alone.form == CastForm(D.FLOAT, None, D.INT64)  # EyeLike(x) -> Cast(to=INT64)


def test_tract_bool_output_keeps_tvm_running():
    tract, others = get_profile("tract", probe=False), other_profiles("tract")
    choice = choose_form(tract, others, D.BOOL, None, D.BOOL, 22, lowerable=True)
    assert choice.form == CastForm(D.INT8, None, D.BOOL)  # TVM, which ran it, takes no dtype
    alone = choose_form(tract, [], D.BOOL, None, D.BOOL, 22, lowerable=True)
    assert alone.form == CastForm(D.BOOL, D.INT8, D.BOOL)  # one cast fewer, but not on TVM


def _profile(name: str, pairs: set, casts=frozenset(), lowered=frozenset()) -> RuntimeProfile:
    tables = {9: frozenset(pairs), 22: frozenset(pairs)}
    support = get_support("openvino", probe=False)
    support = dataclasses.replace(support, runtime=name, supported=tables, native=tables)
    return RuntimeProfile(support, frozenset(casts), frozenset(lowered))


def test_a_node_every_form_of_which_would_break_another_runtime_is_left_with_a_warning():
    every_cast = {(a, b) for a in allowed_types(22) for b in allowed_types(22)}
    target = _profile("target", {(D.FLOAT, D.BOOL)}, every_cast, allowed_types(22))
    other = _profile("other", {(D.INT32, D.BOOL)})  # runs the node, and no Cast, no Range
    model = ir.serde.deserialize_model(_model(D.INT32, D.BOOL))
    InferEyeLikeOutputsPass()(model)
    result = LegalizeEyeLikePass("openvino", profile=target, others=[other])(model)
    (outcome,) = result.outcomes
    assert not outcome.legalized and "would stop other from running it" in outcome.note
    assert outcome.warning and outcome.warning.startswith("EyeLike 'eye' in main:")
    assert [n.op_type for n in model.graph] == ["EyeLike"]


@pytest.mark.parametrize("runtime", ["openvino", "tract", "tvm"])
def test_shipped_tables_say_which_version_and_when(runtime):
    support = get_support(runtime)
    assert support.source == "table"
    assert support.version == installed_version(runtime)
    assert f"by the table measured with {support.measured}" in support.describe()
    assert "on 2026-12-01" in support.describe()
    assert fallback_support(runtime) == dataclasses.replace(support, version=None)


def test_every_runtime_is_a_target_and_tensorrt_still_lowers():
    assert set(SUPPORTED_RUNTIMES) == {"onnxruntime", "openvino", "tract", "tvm"}
    for runtime in (*SUPPORTED_RUNTIMES, "tensorrt"):
        PipelineOptions(target_runtime=runtime)
    assert PipelineOptions(target_runtime="tensorrt").lowers
    with pytest.raises(EyefoldError, match="unknown target runtime"):
        PipelineOptions(target_runtime="mnn")


def test_openvino_runs_everything_so_its_target_changes_nothing():
    original = _model(D.BFLOAT16, D.BOOL)
    result = eyefold.optimize_with_report(original, target_runtime="openvino")
    assert [n.op_type for n in result.model.graph.node] == ["EyeLike"]
    assert [n.runtime_supported for n in result.report.nodes] == [True]
    assert result.report.warnings == []


def test_inspect_with_a_target_speaks_of_it(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(_model(D.BFLOAT16, D.INT32), path)
    assert main(["inspect", str(path), "--target-runtime", "tract"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("eye "))
    assert "  no  " in row and "tract" in row
    assert "RUNS: whether tract" in out
    (warning,) = [line for line in out.splitlines() if line.startswith("warning:")]
    assert "tract" in warning and "has no BFLOAT16" in warning


def test_the_summary_speaks_of_the_target_and_onnxruntime_keeps_its_form(tmp_path, capsys):
    path, out = tmp_path / "m.onnx", tmp_path / "o.onnx"
    onnx.save(_model(D.FLOAT, D.INT64), path)
    assert main(["optimize", str(path), str(out), "--target-runtime", "tvm"]) == 0
    text = capsys.readouterr().out
    assert "RUNS: whether tvm" in text and "(lowered)" in text
    assert count_ops(onnx.load(out), "EyeLike") == 0
    assert main(["optimize", str(path), str(out), "--target-runtime", "onnxruntime"]) == 0
    text = capsys.readouterr().out
    assert "RUNS:" not in text  # onnxruntime's column, as without a target
    assert [n.op_type for n in onnx.load(out).graph.node] == ["EyeLike"]


def test_a_folded_bfloat16_node_warns_that_tract_cannot_hold_it():
    report = eyefold.optimize_with_report(
        _model(D.FLOAT, D.BFLOAT16, dims=(4, 5)), target_runtime="tract"
    ).report
    assert [n.action for n in report.nodes] == ["folded"]
    (warning,) = report.warnings
    assert warning.startswith("EyeLike 'eye' in main: folded, but tract")
    assert "has no BFLOAT16" in warning
    default = eyefold.optimize_with_report(_model(D.FLOAT, D.BFLOAT16, dims=(4, 5)))
    assert default.report.warnings == []


@pytest.mark.parametrize("target", ["openvino", "tract", "tvm"])
def test_rules_merge_no_cast_that_another_runtime_could_not_run(target):
    # EyeLike(float) -> Cast(to=BOOL) runs on onnxruntime and TVM; the merged
    # EyeLike(dtype=BOOL) on neither, and legalization sees only the merged node.
    text = """<ir_version: 10, opset_import: ["" : 22]>
    g (float[n, m] x) => (bool[n, m] y) { e = EyeLike<k=1>(x)  y = Cast<to=9>(e) }"""
    model = ir.to_proto(ir.from_onnx_text(text))
    result = eyefold.optimize_with_report(model, target_runtime=target)
    assert [n.op_type for n in result.model.graph.node] == ["EyeLike", "Cast"]
    assert result.report.extra["rules_declined"]["cast_to_dtype"] >= 1
    merged = eyefold.optimize_with_report(model, target_runtime="onnxruntime")
    assert "rules_declined" not in merged.report.extra  # the pricing onnxruntime always had
