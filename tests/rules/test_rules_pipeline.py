"""The rules inside eyefold.optimize and the CLI: on/off equivalence, selection, report."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import eyefold
from eyefold.cli import main
from eyefold.core.eyelike_types import EYELIKE_TYPES_OPSET_22
from eyefold.passes import ApplyEyeLikeRulesPass
from eyefold.rule_registry import load_rules
from eyefold.rules import ALL_RULES
from eyefold.testing import (
    assert_same_outputs,
    check_model_safely,
    random_inputs,
    run_reference,
)

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "sample_models"
SAMPLE_FILES = sorted(SAMPLES.glob("*.onnx"))

RULES_TEXT = """<ir_version: 10, opset_import: ["" : 22]>
agraph (float[4,4] x, int64[2,4] a) => (bfloat16[4,4] y, float[4,4] t, int64[2,4] z) {
    f = Cast<to=1>(x)
    e = EyeLike(f)
    y = Cast<to=16>(e)
    e2 = EyeLike<k=1>(x)
    t = Transpose<perm=[1, 0]>(e2)
    i = EyeLike<dtype=7>(x)
    z = MatMul(a, i)
}"""


def _feeds_variants(model: onnx.ModelProto) -> list[dict[str, np.ndarray]]:
    feeds = random_inputs(model, seed=5)
    if "cond" in feeds:
        return [{**feeds, "cond": np.array(c)} for c in (True, False)]
    return [feeds]


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=[p.stem for p in SAMPLE_FILES])
def test_sample_models_give_the_same_outputs_with_rules_on_and_off(path):
    original = onnx.load(path)
    without = eyefold.optimize(original, rules=[])
    with_rules = eyefold.optimize(original)
    relaxed = eyefold.optimize(original, relaxed=True)
    for feeds in _feeds_variants(original):
        assert_same_outputs(original, without, feeds)
        assert_same_outputs(without, with_rules, feeds)
        assert_same_outputs(without, relaxed, feeds)  # finite inputs: relaxed is exact


def test_report_counts_hits_per_rule_and_times_both_phases():
    result = eyefold.optimize_with_report(ir.from_onnx_text(RULES_TEXT))
    hits = result.report.extra["rules"]
    assert hits == {
        "cast_eyelike_cast": 1,
        "cast_to_dtype": 0,
        "drop_input_producer": 0,
        "transpose_to_negative_k": 1,
        "diagonal_int": 0,
        "matmul_int_identity": 1,
    }
    steps = [s.name for s in result.report.steps]
    assert (
        steps.index("rules-before-fold")
        < steps.index("fold")
        < steps.index("rules-after-fold")
    )
    assert result.report.to_dict()["rules"] == hits


def test_rules_none_runs_no_rule_step():
    result = eyefold.optimize_with_report(ir.from_onnx_text(RULES_TEXT), rules=[])
    assert result.report.extra["rules"] == {}
    assert not any(s.name.startswith("rules-") for s in result.report.steps)


def test_rules_make_the_result_idempotent_and_deterministic():
    proto = ir.to_proto(ir.from_onnx_text(RULES_TEXT))
    once = eyefold.optimize(proto)
    again = eyefold.optimize(proto)
    twice = eyefold.optimize(once)
    assert once.SerializeToString() == again.SerializeToString()
    assert once.SerializeToString() == twice.SerializeToString()
    assert_same_outputs(proto, once)


def test_cli_rules_lists_every_rule(capsys):
    assert main(["rules"]) == 0
    out = capsys.readouterr().out
    for spec in ALL_RULES:
        assert spec.name in out and spec.identity in out
    assert "relaxed" in out and "exact" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rules", "cast_to_dtype,nope"], "unknown rule nope"),
        (["--rules", ","], "unknown rule"),
        (["--rules", "matmul_float_identity"], "(--relaxed)"),
    ],
    ids=["unknown", "empty", "relaxed-without-flag"],
)
def test_cli_bad_rule_selection_is_a_usage_error(tmp_path, capsys, args, message):
    source = tmp_path / "in.onnx"
    onnx.save(ir.to_proto(ir.from_onnx_text(RULES_TEXT)), source)
    with pytest.raises(SystemExit) as exit_info:
        main(["optimize", str(source), str(tmp_path / "out.onnx"), *args])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out.onnx").exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--rules", "none"], {}),
        (["--rules", "transpose_to_negative_k"], {"transpose_to_negative_k": 1}),
        (
            ["--rules", "matmul_int_identity,matmul_float_identity", "--relaxed"],
            {"matmul_int_identity": 1, "matmul_float_identity": 0},
        ),
    ],
    ids=["none", "one", "relaxed"],
)
def test_cli_selection_reaches_the_report(tmp_path, args, expected):
    source, output, report = tmp_path / "in.onnx", tmp_path / "out.onnx", tmp_path / "r.json"
    proto = ir.to_proto(ir.from_onnx_text(RULES_TEXT))
    onnx.save(proto, source)
    status = main(["optimize", str(source), str(output), "-q", "--report", str(report), *args])
    assert status == 0
    assert json.loads(report.read_text())["rules"] == expected
    assert_same_outputs(proto, onnx.load(output))


def test_rules_work_with_onnxscripts_own_driver_too():
    # load_rules() gives plain onnxscript rules; onnxscript's driver and eyefold's pass
    # must reach the same graph.
    theirs = ir.from_onnx_text(RULES_TEXT)
    rule_set = load_rules()
    assert rule_set is not None
    for _ in range(3):
        rule_set.apply_to_model(theirs)
    ours = ir.from_onnx_text(RULES_TEXT)
    ApplyEyeLikeRulesPass()(ours)

    def summary(model):
        return sorted(
            (n.op_type, tuple(sorted((k, str(a.value)) for k, a in n.attributes.items())))
            for n in model.graph
            if n.outputs[0].uses() or n.outputs[0].is_graph_output()
        )

    assert summary(theirs) == summary(ours)
    assert [n.op_type for n in ours.graph].count("EyeLike") == 2


def test_rewriting_in_a_subgraph_leaves_the_opset_tables_alone(apply_eyelike_rules):
    text = """<ir_version: 10, opset_import: ["" : 22]>
    agraph (bool c, float[3,3] x) => (int32[3,3] y) {
        y = If(c) <
            then_branch = t () => (int32[3,3] a) { e = EyeLike(x)  a = Cast<to=6>(e) },
            else_branch = f () => (int32[3,3] b) { b = Cast<to=6>(x) }
        >
    }"""
    before, after, rules = apply_eyelike_rules(text)
    assert rules.hits["cast_to_dtype"] == 1
    (if_node,) = list(after.graph)
    assert if_node.attributes["then_branch"].as_graph().opset_imports == {}
    assert after.opset_imports == {"": 22}
    feeds = random_inputs(before)
    for cond in (True, False):
        assert_same_outputs(before, after, {**feeds, "c": np.array(cond)})


_CHAIN_TYPES = sorted(EYELIKE_TYPES_OPSET_22, key=lambda t: t.value)
_NEG_TYPES = {
    ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16,
    ir.DataType.INT8, ir.DataType.INT16, ir.DataType.INT32, ir.DataType.INT64,
}  # fmt: skip


@st.composite
def _eyelike_chains(draw):
    """A random chain of Cast/EyeLike/Transpose/Neg/Identity on x, with an EyeLike in it."""
    opset = draw(st.sampled_from([21, 22]))
    types = [t for t in _CHAIN_TYPES if opset >= 22 or t != ir.DataType.BFLOAT16]
    rows, cols = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    if draw(st.booleans()):
        cols = rows
    dtype, lines, value = ir.DataType.FLOAT, [], "x"
    ops = draw(st.lists(st.sampled_from(["Cast", "EyeLike", "Transpose", "Neg", "Identity"]),
                        min_size=1, max_size=5))  # fmt: skip
    if "EyeLike" not in ops:
        ops.insert(draw(st.integers(0, len(ops))), "EyeLike")
    for index, op in enumerate(ops):
        out = f"v{index}"
        if op == "Cast":
            dtype = draw(st.sampled_from(types))
            lines.append(f"{out} = Cast<to={dtype.value}>({value})")
        elif op == "EyeLike":
            k = draw(st.integers(-3, 3))
            attributes = f"k={k}"
            if draw(st.booleans()):
                dtype = draw(st.sampled_from(types))
                attributes += f", dtype={dtype.value}"
            lines.append(f"{out} = EyeLike<{attributes}>({value})")
        elif op == "Transpose":
            rows, cols = cols, rows
            lines.append(f"{out} = Transpose<perm=[1, 0]>({value})")
        elif op == "Neg" and dtype in _NEG_TYPES:
            lines.append(f"{out} = Neg({value})")
        else:
            lines.append(f"{out} = Identity({value})")
        value = out
    shape = draw(st.sampled_from([f"{rows},{cols}", "?,?"]))
    x_dims = f"{cols},{rows}" if ops.count("Transpose") % 2 else f"{rows},{cols}"
    body = "\n        ".join(lines)
    return f"""<ir_version: 10, opset_import: ["" : {opset}]>
    agraph (float[{x_dims}] x) => ({dtype.name.lower()}[{shape}] {value}) {{
        {body}
    }}"""


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_eyelike_chains())
def test_random_eyelike_chains_keep_their_bits(text):
    before = ir.to_proto(ir.from_onnx_text(text))
    model = ir.from_onnx_text(text)
    ApplyEyeLikeRulesPass()(model)
    check_model_safely(model)
    feeds = _with_specials(random_inputs(before, seed=2))
    (expected,) = run_reference(before, feeds)
    (actual,) = run_reference(model, feeds)
    assert actual.dtype == expected.dtype and actual.tobytes() == expected.tobytes(), text
    assert len(model.graph) <= len(before.graph.node)


def _with_specials(feeds):
    x = feeds["x"].reshape(-1)
    x[: min(4, x.size)] = np.array([np.nan, np.inf, -np.inf, -0.0], np.float32)[: x.size]
    return feeds
