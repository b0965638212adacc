"""Each rule's declared reach: its matches are the same on the file path and in memory.

The file path extracts only the nodes the rules' reaches name (``eyefold.rewriting.reach``)
and the rules pass tries rules only as deep as they declare. A rule whose reach is too
short would fire in memory but not on the file path: each rule gets a model on which it
fires, and both paths must fire it the same number of times and give the same model.
"""

from __future__ import annotations

import copy

import onnx
import onnx.defs
import pytest

from eyefold.options import PipelineOptions
from eyefold.proto_path import optimize_proto
from eyefold.report import build_report
from eyefold.rewriting import reach
from eyefold.rules import ALL_RULES
from tests.file_path.test_proto_path import compare_paths
from tests.rules.test_rule_diagonal import aten_diagonal_text

_HEAD = '<ir_version: 10, opset_import: ["" : 22]>'

# One model per rule on which it fires (dims left symbolic so nothing folds first).
FIRING_MODELS = {
    "cast_eyelike_cast": """agraph (float[N, M] x) => (y) {
        c = Cast<to=7>(x)
        e = EyeLike(c)
        y = Cast<to=1>(e)
    }""",
    "cast_to_dtype": """agraph (float[N, M] x) => (y) {
        e = EyeLike<k=1>(x)
        y = Cast<to=11>(e)
    }""",
    "drop_input_producer": """agraph (float[N, M] x) => (y) {
        r = Relu(x)
        y = EyeLike(r)
    }""",
    "transpose_to_negative_k": """agraph (float[N, N] x) => (y) {
        e = EyeLike<k=1>(x)
        y = Transpose<perm=[1, 0]>(e)
    }""",
    "matmul_int_identity": """agraph (int32[3, 4] a, int32[4, 4] z) => (y) {
        i = EyeLike(z)
        y = MatMul(a, i)
    }""",
    "matmul_float_identity": """agraph (float[3, 4] a, float[4, 4] z) => (y) {
        i = EyeLike(z)
        y = MatMul(a, i)
    }""",
}


def _model(name: str) -> onnx.ModelProto:
    if name in ("diagonal_int", "diagonal_float"):
        dtype = "int64" if name == "diagonal_int" else "float"
        return onnx.parser.parse_model(aten_diagonal_text(dtype, "b,r,c", 1, 2, 1, 22))
    return onnx.parser.parse_model(f"{_HEAD}\n{FIRING_MODELS[name]}")


def test_every_rule_has_a_firing_model() -> None:
    names = {spec.name for spec in ALL_RULES}
    assert names == set(FIRING_MODELS) | {"diagonal_int", "diagonal_float"}


def test_every_op_a_reach_names_exists() -> None:
    ops = reach.BECOMES_EYELIKE_OPS | reach.REMOVABLE_OPS | reach.READS_PAST_OPS
    for op in ops:
        assert onnx.defs.has(op), op
    assert max(spec.reach.depth for spec in ALL_RULES) == reach.ROOT_DEPTH


@pytest.mark.parametrize("spec", ALL_RULES, ids=lambda spec: spec.name)
def test_rule_fires_the_same_on_both_paths(spec) -> None:
    model = _model(spec.name)
    options = PipelineOptions(rules=[spec.name], relaxed=spec.exactness == "relaxed")
    step = compare_paths(model, options, run=True)
    report = build_report(optimize_proto(copy.deepcopy(model), options).record)
    assert report.extra["rules"][spec.name] >= 1, report.extra["rules"]
    # A rule that reads past the neighbourhood sends the file path to the whole model.
    expected = "whole-model" if spec.reach.reads_past else "neighbourhood"
    assert step.startswith(expected), step


def test_a_rewrite_chain_through_every_becomes_eyelike_op() -> None:
    # Cast and Transpose each become an EyeLike, which the next rule then reads: the
    # file path must hold the consumers of those consumers too.
    model = onnx.parser.parse_model(
        f"""{_HEAD}
        agraph (float[N, N] x) => (y) {{
            e = EyeLike<k=1>(x)
            c = Cast<to=11>(e)
            t = Transpose<perm=[1, 0]>(c)
            y = Cast<to=1>(t)
        }}"""
    )
    options = PipelineOptions()
    assert compare_paths(model, options, run=True) == "neighbourhood"
    hits = build_report(optimize_proto(copy.deepcopy(model), options).record).extra["rules"]
    assert hits["cast_to_dtype"] == 2 and hits["transpose_to_negative_k"] == 1, hits
