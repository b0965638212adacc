"""Never worse: features combined must not make a working model worse.

Each test here failed before the rules pass had its cost model, the pipeline its census and
the rules their fixpoint fixes: a model onnxruntime ran stopped loading, a node that folded
stopped folding, the report lost nodes, an Identity stayed behind.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import eyefold
from eyefold.cli import main
from eyefold.core.eyelike_types import EYELIKE_TYPES_OPSET_22
from eyefold.options import PipelineOptions
from eyefold.pipeline import pipeline_steps, run_steps
from eyefold.testing import (
    assert_same_outputs,
    count_ops,
    onnxruntime_loads,
    random_inputs,
)


def _tf2onnx_dynamic_eye(opset: int) -> onnx.ModelProto:
    """``tf.cast(tf.eye(n, dtype=tf.float64), tf.bool)`` as tf2onnx exports it.

    tf2onnx's ``rewrite_eye`` (tf2onnx/rewriter/eye_rewriter.py) turns the MatrixDiag
    subgraph into ``Unsqueeze(rows), Unsqueeze(cols) -> Concat -> Cast(INT64) ->
    ConstantOfShape -> EyeLike(dtype=<output dtype>)``; the tf.cast that follows is a Cast.
    """
    nodes = []
    for name in ("rows", "cols"):
        if opset >= 13:
            nodes.append(helper.make_node("Unsqueeze", ["n", "axes0"], [f"{name}_1d"]))
        else:
            nodes.append(helper.make_node("Unsqueeze", ["n"], [f"{name}_1d"], axes=[0]))
    nodes += [
        helper.make_node("Concat", ["rows_1d", "cols_1d"], ["shape32"], axis=0),
        helper.make_node("Cast", ["shape32"], ["shape64"], to=TensorProto.INT64),
        helper.make_node("ConstantOfShape", ["shape64"], ["zeros"]),
        helper.make_node(
            "EyeLike", ["zeros"], ["eye"], name="eye/diag", dtype=TensorProto.DOUBLE
        ),
        helper.make_node("Cast", ["eye"], ["mask"], to=TensorProto.BOOL),
    ]
    initializers = [onnx.numpy_helper.from_array(np.array([0], np.int64), "axes0")]
    graph = helper.make_graph(
        nodes,
        "tf2onnx",
        [helper.make_tensor_value_info("n", TensorProto.INT32, [])],
        [helper.make_tensor_value_info("mask", TensorProto.BOOL, None)],
        initializer=initializers if opset >= 13 else [],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    return model


@pytest.mark.parametrize("opset", [9, 13])
def test_tf2onnx_dynamic_eye_keeps_running_on_onnxruntime(opset):
    original = _tf2onnx_dynamic_eye(opset)
    assert onnxruntime_loads(original)
    optimized = eyefold.optimize(original)
    assert onnxruntime_loads(optimized), "the default rules made a runnable model unloadable"
    feeds = {"n": np.array(5, np.int32)}
    session = ort.InferenceSession(
        optimized.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    np.testing.assert_array_equal(session.run(None, feeds)[0], np.eye(5, dtype=np.bool_))
    result = eyefold.optimize_with_report(original)
    assert result.report.extra["rules_declined"] == {"cast_to_dtype": 1}


def test_a_merge_never_pushes_a_node_over_the_size_limit():
    text = """<ir_version: 10, opset_import: ["" : 22]>
    g (float[1024,1024] x) => (float[1024,1024] y) {
        mask = EyeLike<dtype=9>(x)
        y = Cast<to=1>(mask)
    }"""
    without = eyefold.optimize_with_report(ir.from_onnx_text(text), rules=[]).report
    with_rules = eyefold.optimize_with_report(ir.from_onnx_text(text)).report
    assert without.counts()["folded"] == 1  # 1 MiB of BOOL: at the limit
    assert with_rules.counts()["folded"] == 1  # a 4 MiB FLOAT EyeLike would not fold


def test_a_merge_that_makes_a_node_small_enough_to_fold_is_taken():
    text = """<ir_version: 10, opset_import: ["" : 22]>
    g (float[1024,1024] x) => (bool[1024,1024] y) {
        eye = EyeLike(x)
        y = Cast<to=9>(eye)
    }"""
    without = eyefold.optimize_with_report(ir.from_onnx_text(text), rules=[]).report
    result = eyefold.optimize_with_report(ir.to_proto(ir.from_onnx_text(text)))
    assert without.counts()["folded"] == 0  # 4 MiB of FLOAT
    assert result.report.counts()["folded"] == 1  # 1 MiB of BOOL
    assert count_ops(result.model, "Cast") == 0


@pytest.mark.parametrize("shape", ["4,4", "n,n"], ids=["static", "dynamic"])
def test_eyelike_of_eyelike_reports_both_nodes(shape):
    text = f"""<ir_version: 10, opset_import: ["" : 22]>
    g (float[{shape}] x) => (float[{shape}] y) {{
        inner = EyeLike<k=1>(x)
        y = EyeLike(inner)
    }}"""
    report = eyefold.optimize_with_report(ir.from_onnx_text(text)).report
    counts = report.counts()
    assert counts["total"] == 2
    assert counts["total"] == sum(counts[a] for a in ("folded", "inferred", "kept", "removed"))
    (removed,) = [n for n in report.nodes if n.action == "removed"]
    assert removed.reason == "removed by rule drop_input_producer"
    assert report.to_dict()["eyelike"]["removed"] == 1


def test_a_node_left_without_users_by_a_fold_is_reported_removed():
    text = """<ir_version: 10, opset_import: ["" : 22]>
    g (float[1000,1000] x) => (bool[1000,1000] y) {
        big = EyeLike<dtype=11>(x)
        y = EyeLike<dtype=9>(big)
    }"""
    report = eyefold.optimize_with_report(ir.from_onnx_text(text), rules=[]).report
    assert [(n.name or n.dtype, n.action) for n in report.nodes] == [
        ("BOOL", "folded"),
        ("DOUBLE", "removed"),
    ]
    assert "fed a folded EyeLike" in report.nodes[1].reason


def test_optimize_summary_says_what_will_not_run_and_names_the_option(tmp_path, capsys):
    text = """<ir_version: 10, opset_import: ["" : 22]>
    g (float[N,4] x) => (bool[N,4] y) { y = EyeLike<dtype=9>(x) }"""
    source = tmp_path / "m.onnx"
    onnx.save(ir.to_proto(ir.from_onnx_text(text)), source)
    assert main(["optimize", str(source), str(tmp_path / "o.onnx")]) == 0
    out = capsys.readouterr().out
    assert "cannot run on onnxruntime" in out and "--target-runtime onnxruntime" in out
    assert "0 removed" in out


def test_matmul_by_identity_leaves_no_identity_node_behind():
    model = ir.from_onnx_text("""<ir_version: 10, opset_import: ["" : 22]>
    g (int64[3,4] a, int64[4,4] w) => (int64[3,4] z) {
        i = EyeLike(w)
        prod = MatMul(a, i)
        z = Add(prod, prod)
    }""")
    original = ir.to_proto(model)
    optimized = eyefold.optimize(original)
    assert [n.op_type for n in optimized.graph.node] == ["Add"]
    assert list(optimized.graph.node[0].input) == ["a", "a"]
    assert_same_outputs(original, optimized, random_inputs(original, seed=1))


def test_matmul_by_identity_keeps_an_identity_only_for_a_graph_output_name():
    original = ir.to_proto(
        ir.from_onnx_text("""<ir_version: 10, opset_import: ["" : 22]>
    g (int64[3,4] a, int64[4,4] w) => (int64[3,4] z) {
        i = EyeLike(w)
        z = MatMul(a, i)
    }""")
    )
    optimized = eyefold.optimize(original)
    assert [n.op_type for n in optimized.graph.node] == ["Identity"]
    assert [o.name for o in optimized.graph.output] == ["z"]


def test_the_bfloat16_workaround_chain_settles_after_the_upgrade():
    # opset 17: EyeLike-9 has no bfloat16, so exporters computed in float and cast.
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (float[N,N] x) => (bfloat16[N,N] y) {
        xb = Cast<to=16>(x)
        xf = Cast<to=1>(xb)
        eye = EyeLike(xf)
        y = Cast<to=16>(eye)
    }"""
    original = ir.to_proto(ir.from_onnx_text(text))
    # Without a target runtime the EyeLike must stay one onnxruntime runs (FLOAT):
    # the input casts go, the output Cast stays.
    kept = eyefold.optimize(original)
    assert [n.op_type for n in kept.graph.node] == ["EyeLike", "Cast"]
    assert onnxruntime_loads(kept)
    # For a runtime eyefold legalizes for, the rules' fixpoint is one EyeLike(dtype=BF16)
    # (before legalization), and legalization then picks the cheapest form it runs.
    model = ir.from_onnx_text(text)
    steps = pipeline_steps(PipelineOptions(target_runtime="onnxruntime"))
    run_steps(model, [step for step in steps if step.name != "legalize"])
    assert [n.op_type for n in model.graph] == ["EyeLike"]
    legalized = eyefold.optimize(original, target_runtime="onnxruntime")
    assert count_ops(legalized, "EyeLike") == 1 and count_ops(legalized, "Cast") <= 1
    assert onnxruntime_loads(legalized)
    feeds = {"x": np.zeros((3, 3), np.float32)}
    assert_same_outputs(original, kept, feeds)
    assert_same_outputs(original, legalized, feeds)


# --- the property: runnable stays runnable, and rules never fold less ---

_TYPES = sorted(EYELIKE_TYPES_OPSET_22 - {ir.DataType.BFLOAT16}, key=lambda t: t.name)


@st.composite
def _cast_chains(draw) -> onnx.ModelProto:
    """x -> Cast* -> EyeLike(dtype?) -> Cast* -> y, with static or symbolic dims."""
    dims = draw(st.sampled_from([[3, 4], ["n", 4], [512, 512], [1024, 1024]]))
    source = draw(st.sampled_from(_TYPES))
    nodes, current, current_type = [], "x", source
    for index in range(draw(st.integers(0, 2))):
        to = draw(st.sampled_from(_TYPES))
        nodes.append(helper.make_node("Cast", [current], [f"in{index}"], to=int(to)))
        current, current_type = f"in{index}", to
    dtype = draw(st.sampled_from([None, *_TYPES]))
    attributes = {} if dtype is None else {"dtype": int(dtype)}
    nodes.append(
        helper.make_node(
            "EyeLike", [current], ["eye"], k=draw(st.integers(-2, 2)), **attributes
        )
    )
    current, current_type = "eye", dtype or current_type
    for index in range(draw(st.integers(0, 2))):
        to = draw(st.sampled_from(_TYPES))
        nodes.append(helper.make_node("Cast", [current], [f"out{index}"], to=int(to)))
        current, current_type = f"out{index}", to
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", int(source), dims)],
        [helper.make_tensor_value_info(current, int(current_type), dims)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    model.ir_version = 10
    return model


@pytest.mark.slow
@settings(
    max_examples=60,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(_cast_chains())
def test_rules_never_lose_runtime_reach_nor_folds(model):
    optimized = eyefold.optimize_with_report(model)
    without_rules = eyefold.optimize_with_report(model, rules=[])
    if onnxruntime_loads(model):
        assert onnxruntime_loads(optimized.model), "onnxruntime ran the input only"
    folded = optimized.report.counts()["folded"]
    assert folded >= without_rules.report.counts()["folded"]
    counts = optimized.report.counts()
    assert counts["total"] == 1 == sum(counts[a] for a in ("folded", "inferred", "kept"))


def test_an_unused_foldable_eyelike_is_removed_not_folded_into_a_dead_initializer():
    text = """<ir_version: 10, opset_import: ["" : 22]>
    g (float[512,512] x) => (float[512,512] y) {
        e = EyeLike(x)
        y = Relu(x)
    }"""
    original = ir.to_proto(ir.from_onnx_text(text))
    result = eyefold.optimize_with_report(original)
    assert result.model.ByteSize() < 2 * original.ByteSize()  # no 1 MiB unused constant
    assert [n.op_type for n in result.model.graph.node] == ["Relu"]
    (node,) = result.report.nodes
    assert (node.action, node.reason) == (
        "removed",
        "its output is never used: removed instead of folded",
    )
