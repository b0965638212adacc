"""eyefold's rewrite rules, one per module, collected in an explicit, ordered tuple.

Each module exports ``rule``, an onnxscript ``RewriteRule`` written in class form, and
states its identity, why it is exact (or only relaxed) and when it fires. ``ALL_RULES``
adds what the pipeline needs to know about each: its name, its exactness and the phase
it runs in. Order matters where patterns overlap: the longer pattern comes first.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import onnx_ir as ir
from onnxscript.rewriter import RewriteRule

from eyefold.rules import (
    cast_eyelike_cast,
    cast_to_dtype,
    drop_input_producer,
    matmul_float_identity,
    matmul_int_identity,
    transpose_to_negative_k,
)

__all__ = ["ALL_RULES", "EXACTNESS", "PHASES", "Exactness", "Phase", "RuleSpec"]

Exactness = Literal["exact", "relaxed"]
Phase = Literal["before-fold", "after-fold"]
EXACTNESS: tuple[Exactness, ...] = ("exact", "relaxed")
PHASES: tuple[Phase, ...] = ("before-fold", "after-fold")


@dataclasses.dataclass(frozen=True)
class RuleSpec:
    """One rewrite rule and what the pipeline needs to know about it.

    Attributes:
        name: the name users select it by (``--rules``), same as its module's.
        rule: the onnxscript rewrite rule.
        exactness: "exact" (same output bits for every input, NaN, inf and -0.0
            included) or "relaxed" (exact up to IEEE special values; opt-in only).
        phase: "before-fold" (patterns around an EyeLike node, which folding removes) or
            "after-fold" (patterns that also match a folded constant).
        identity: the rewrite in one line.
        constant_dtypes: element types of the constant identity matrices (folded
            EyeLike nodes) the pattern also matches next to; empty when it needs an
            EyeLike node.
    """

    name: str
    rule: RewriteRule
    exactness: Exactness
    phase: Phase
    identity: str
    constant_dtypes: frozenset[ir.DataType] = frozenset()


ALL_RULES: tuple[RuleSpec, ...] = (
    RuleSpec(
        "cast_eyelike_cast",
        cast_eyelike_cast.rule,
        "exact",
        "before-fold",
        "Cast(EyeLike(Cast(x, to=s), k), to=t) -> EyeLike(x, k, dtype=t)",
    ),
    RuleSpec(
        "cast_to_dtype",
        cast_to_dtype.rule,
        "exact",
        "before-fold",
        "Cast(EyeLike(x, k, dtype?), to=t) -> EyeLike(x, k, dtype=t)",
    ),
    RuleSpec(
        "drop_input_producer",
        drop_input_producer.rule,
        "exact",
        "before-fold",
        "EyeLike(u(x), k) -> EyeLike(x, k, dtype=type of u(x)) for shape-preserving u",
    ),
    RuleSpec(
        "transpose_to_negative_k",
        transpose_to_negative_k.rule,
        "exact",
        "before-fold",
        "Transpose(EyeLike(x, k), perm=[1, 0]) -> EyeLike(x, -k) for square x",
    ),
    RuleSpec(
        "matmul_int_identity",
        matmul_int_identity.rule,
        "exact",
        "after-fold",
        "MatMul(A, I) -> A, MatMul(I, A) -> A for an integer identity I",
        constant_dtypes=matmul_int_identity.MatMulIntIdentity.DTYPES,
    ),
    RuleSpec(
        "matmul_float_identity",
        matmul_float_identity.rule,
        "relaxed",
        "after-fold",
        "MatMul(A, I) -> A, MatMul(I, A) -> A for a floating identity I"
        " (inf/NaN/-0.0 in A differ)",
        constant_dtypes=matmul_float_identity.MatMulFloatIdentity.DTYPES,
    ),
)
