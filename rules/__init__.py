"""eyefold's rewrite rules, one per module, listed in an explicit, ordered registry.

Each module defines its rule class, written as an onnxscript rule class is but importing
no onnxscript, and ``spec``, its :class:`~eyefold.core.rule_spec.RuleSpec` (name,
exactness, phase, identity, reach), declared next to it; ``rule``, the onnxscript
``RewriteRule``, is built from them on first use (``spec.rule``). Its docstring states
the identity, why it is exact (or only relaxed) and when it fires. Order matters where
patterns overlap: the longer pattern comes first. Importing this package imports no
onnxscript.

Adding a rule: one module here (the class, ``spec`` and ``__getattr__ =
spec.module_attribute``), one line in ``RULE_MODULES``, one test file
``tests/test_rule_<name>.py``.
"""

from __future__ import annotations

from eyefold.core.rule_spec import EXACTNESS, PHASES, Exactness, Phase, RuleSpec
from eyefold.rules import (
    cast_eyelike_cast,
    cast_to_dtype,
    diagonal_float,
    diagonal_int,
    drop_input_producer,
    matmul_float_identity,
    matmul_int_identity,
    transpose_to_negative_k,
)

__all__ = [
    "ALL_RULES",
    "EXACTNESS",
    "PHASES",
    "RULE_MODULES",
    "Exactness",
    "Phase",
    "RuleSpec",
]

RULE_MODULES = (
    cast_eyelike_cast,
    cast_to_dtype,
    drop_input_producer,
    transpose_to_negative_k,
    diagonal_int,
    diagonal_float,
    matmul_int_identity,
    matmul_float_identity,
)

ALL_RULES: tuple[RuleSpec, ...] = tuple(module.spec for module in RULE_MODULES)
