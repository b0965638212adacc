"""eyefold's rewrite rules, one per module, listed in an explicit, ordered registry.

Each module exports ``rule``, an onnxscript ``RewriteRule`` written in class form, and
``spec``, its :class:`~eyefold.core.rule_spec.RuleSpec` (name, exactness, phase, identity),
declared next to the rule. Its docstring states the identity, why it is exact (or only
relaxed) and when it fires. Order matters where patterns overlap: the longer pattern
comes first.

:data:`RULE_INFOS` lists the same rules as :class:`~eyefold.core.rule_spec.RuleInfo`
entries, which import nothing: selecting rules by name and finding where they could match
must not import onnxscript (a third of ``eyefold optimize``'s start-up) on a model where no
rule can fire. ``RULE_MODULES`` and ``ALL_RULES`` import the modules on first access
(PEP 562); ``tests/test_rule_registry.py`` checks that both lists agree.

Adding a rule: one module here (``rule`` and ``spec``), one entry in ``RULE_INFOS``, one
test file ``tests/test_rule_<name>.py``.
"""

from __future__ import annotations

import importlib
from typing import Any

import onnx_ir as ir

from eyefold.core.rule_spec import EXACTNESS, PHASES, Exactness, Phase, RuleInfo, RuleSpec
from eyefold.rules._shape_preserving import SHAPE_PRESERVING_OPS

__all__ = [
    "ALL_RULES",
    "EXACTNESS",
    "PHASES",
    "RULE_INFOS",
    "RULE_MODULES",
    "Exactness",
    "Phase",
    "RuleInfo",
    "RuleSpec",
]

_EYELIKE = frozenset({"EyeLike"})
_D = ir.DataType

RULE_INFOS: tuple[RuleInfo, ...] = (
    RuleInfo("cast_eyelike_cast", "exact", "before-fold", frozenset({"Cast"}), _EYELIKE),
    RuleInfo("cast_to_dtype", "exact", "before-fold", frozenset({"Cast"}), _EYELIKE),
    RuleInfo(
        "drop_input_producer",
        "exact",
        "before-fold",
        _EYELIKE,
        frozenset(SHAPE_PRESERVING_OPS),
    ),
    RuleInfo(
        "transpose_to_negative_k", "exact", "before-fold", frozenset({"Transpose"}), _EYELIKE
    ),
    RuleInfo(
        "matmul_int_identity",
        "exact",
        "after-fold",
        frozenset({"MatMul"}),
        constant_dtypes=frozenset({_D.INT32, _D.INT64, _D.UINT32, _D.UINT64}),
    ),
    RuleInfo(
        "matmul_float_identity",
        "relaxed",
        "after-fold",
        frozenset({"MatMul"}),
        constant_dtypes=frozenset({_D.FLOAT, _D.DOUBLE, _D.FLOAT16, _D.BFLOAT16}),
    ),
)


def __getattr__(name: str) -> Any:
    """``RULE_MODULES`` and ``ALL_RULES``, importing the rule modules on first access."""
    if name == "RULE_MODULES":
        value: Any = tuple(
            importlib.import_module(f"{__name__}.{info.name}") for info in RULE_INFOS
        )
    elif name == "ALL_RULES":
        value = tuple(module.spec for module in __getattr__("RULE_MODULES"))
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
