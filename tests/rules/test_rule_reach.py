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
from eyefold.testing import assert_same_outputs, random_inputs
from tests.helpers.both_paths import compare_paths

_HEAD = '<ir_version: 10, opset_import: ["" : 22]>'


def test_every_rule_has_a_firing_model() -> None:
    for spec in ALL_RULES:
        model = onnx.parser.parse_model(spec.firing_model)
        assert any(node.op_type == "EyeLike" for node in model.graph.node), spec.name


def test_every_op_a_reach_names_exists() -> None:
    ops = reach.NEIGHBOUR_OPS | reach.REPLACED_OPS | reach.READS_PAST_OPS
    for op in ops:
        assert onnx.defs.has(op), op
    assert max(spec.reach.depth for spec in ALL_RULES) == reach.ROOT_DEPTH


@pytest.mark.parametrize("spec", ALL_RULES, ids=lambda spec: spec.name)
def test_rule_fires_the_same_on_both_paths(spec) -> None:
    model = onnx.parser.parse_model(spec.firing_model)
    options = PipelineOptions(rules=[spec.name], relaxed=spec.exactness == "relaxed")
    step = compare_paths(model, options, run=True)
    optimized = optimize_proto(copy.deepcopy(model), options)
    report = build_report(optimized.record)
    assert report.extra["rules"][spec.name] >= 1, report.extra["rules"]
    # A rule that reads operands past the neighbourhood sends the file path to the whole
    # model.
    expected = "whole-model" if spec.reach.reads_operands else "neighbourhood"
    assert step.startswith(expected), step
    # Finite inputs: a relaxed rule is exact on them too.
    assert_same_outputs(model, optimized.model, random_inputs(model, seed=5))


def test_a_rewrite_chain_through_every_replaced_op() -> None:
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
