"""eyefold's rewrite rules, one per module, listed in an explicit, ordered registry.

Each module defines its rule class, written as an onnxscript rule class is but importing
no onnxscript, and ``spec``, its :class:`~eyefold.core.rule_spec.RuleSpec` (name,
exactness, phase, identity, reach, and a model it fires on), declared next to it;
``rule``, the onnxscript ``RewriteRule``, is built from them on first use (``spec.rule``).
Its docstring states the identity, why it is exact (or only relaxed) and when it fires.
Order matters where patterns overlap: the longer pattern comes first. Importing this
package imports no onnxscript.

Adding a rule: one module here (the class, ``spec`` and ``__getattr__ =
spec.module_attribute``) and its name in :data:`RULE_NAMES`. The rule tests read every
rule from this registry: its reach on both paths and its meaning, on its firing model
(``tests/rules/test_rule_reach.py``), and its module's form
(``tests/rules/test_rule_registry.py``). Its own cases, positive and negative, go in
``tests/rules/test_rule_<name>.py``.
"""

from __future__ import annotations

import importlib

from eyefold.core.rule_spec import EXACTNESS, PHASES, Exactness, Phase, RuleSpec

__all__ = [
    "ALL_RULES",
    "EXACTNESS",
    "PHASES",
    "RULE_MODULES",
    "RULE_NAMES",
    "Exactness",
    "Phase",
    "RuleSpec",
]

# The rules in the order they are tried; each name is its module's here (a typo fails
# at import).
RULE_NAMES = (
    "cast_eyelike_cast",
    "cast_to_dtype",
    "drop_input_producer",
    "transpose_to_negative_k",
    "diagonal_int",
    "diagonal_float",
    "matmul_int_identity",
    "matmul_float_identity",
)

RULE_MODULES = tuple(importlib.import_module(f"{__name__}.{name}") for name in RULE_NAMES)

ALL_RULES: tuple[RuleSpec, ...] = tuple(module.spec for module in RULE_MODULES)
