"""The rule registry: every rule module is listed, well formed and uses real ONNX ops."""

from __future__ import annotations

import importlib
import pkgutil

import onnx
import pytest
from onnxscript.rewriter import RewriteRule, RewriteRuleSet

import eyefold.rules
from eyefold.core.onnxscript_internals import pattern_op_types
from eyefold.errors import UnknownRuleError
from eyefold.rule_registry import describe_rules, load_rules, select_rules
from eyefold.rules import ALL_RULES, EXACTNESS, PHASES
from eyefold.rules.drop_input_producer import SHAPE_PRESERVING_OPS

PUBLIC_MODULES = sorted(
    m.name for m in pkgutil.iter_modules(eyefold.rules.__path__) if not m.name.startswith("_")
)
BY_NAME = {spec.name: spec for spec in ALL_RULES}


def test_rule_names_are_unique():
    assert len(BY_NAME) == len(ALL_RULES)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_rule_module_exports_a_rule_listed_in_all_rules(module_name):
    module = importlib.import_module(f"eyefold.rules.{module_name}")
    exported = getattr(module, "rule", None) or getattr(module, "rules", None)
    assert isinstance(exported, (RewriteRule, RewriteRuleSet)), module_name
    assert module_name in BY_NAME, f"{module_name} is missing from ALL_RULES"
    assert BY_NAME[module_name].rule is exported
    doc = module.__doc__ or ""
    assert "->" in doc.splitlines()[0], "the docstring starts with the rewrite"
    assert "exact" in doc and "Conditions" in doc


@pytest.mark.parametrize("spec", ALL_RULES, ids=[s.name for s in ALL_RULES])
def test_metadata_is_well_formed(spec):
    assert spec.name in PUBLIC_MODULES
    assert spec.exactness in EXACTNESS and spec.phase in PHASES
    assert "->" in spec.identity and "\n" not in spec.identity


def test_every_op_name_exists_in_onnx_defs():
    used = set(SHAPE_PRESERVING_OPS)
    for spec in ALL_RULES:
        used |= pattern_op_types(spec.rule)
        assert spec.reach.neighbours, f"{spec.name} declares no neighbour it looks at"
        used |= spec.reach.neighbours
    assert {"EyeLike", "Cast", "Transpose", "MatMul"} <= used
    unknown = sorted(op for op in used if not onnx.defs.has(op))
    assert not unknown, f"not ONNX ops: {unknown}"


def test_default_selection_is_the_exact_rules_in_registry_order():
    chosen = select_rules()
    assert [s.name for s in chosen] == [s.name for s in ALL_RULES if s.exactness == "exact"]
    with_relaxed = select_rules(relaxed=True)
    assert [s.name for s in with_relaxed] == [s.name for s in ALL_RULES]


def test_selection_by_name_phase_and_none():
    assert select_rules([]) == ()
    assert [s.name for s in select_rules(["transpose_to_negative_k", "cast_to_dtype"])] == [
        "cast_to_dtype",
        "transpose_to_negative_k",
    ]
    after = select_rules(phase="after-fold", relaxed=True)
    assert after and all(s.phase == "after-fold" for s in after)
    assert load_rules([]) is None


@pytest.mark.parametrize(
    ("names", "relaxed", "message"),
    [(["nope"], False, "unknown rule nope"), (["matmul_float_identity"], False, "relaxed")],
    ids=["unknown", "relaxed-not-allowed"],
)
def test_bad_selection_is_a_clear_error(names, relaxed, message):
    with pytest.raises(UnknownRuleError, match=message):
        select_rules(names, relaxed=relaxed)


def test_describe_rules_lists_every_rule_with_exactness():
    text = describe_rules()
    for spec in ALL_RULES:
        assert any(spec.name in line and spec.exactness in line for line in text.splitlines())
