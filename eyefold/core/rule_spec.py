"""What a rewrite rule declares about itself, in its own module.

Each rule module ends with ``spec = RuleSpec.declare(__name__, __doc__, rule, ...)``: the
name users select it by is the module's, and its one-line identity is the first line of
the module docstring, so neither is written twice.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Literal

from eyefold.core.domains import DEFAULT_DOMAINS

if TYPE_CHECKING:
    import onnx_ir as ir
    from onnxscript.rewriter import RewriteRule

__all__ = ["EXACTNESS", "PHASES", "Exactness", "Phase", "RuleInfo", "RuleSpec"]

Exactness = Literal["exact", "relaxed"]
Phase = Literal["before-fold", "after-fold"]
EXACTNESS: tuple[Exactness, ...] = ("exact", "relaxed")
PHASES: tuple[Phase, ...] = ("before-fold", "after-fold")


@dataclasses.dataclass(frozen=True)
class RuleSpec:
    """One rewrite rule and what the pipeline needs to know about it.

    Attributes:
        name: the name users select it by (``--rules``), its module's name.
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

    @classmethod
    def declare(
        cls,
        module_name: str,
        module_doc: str | None,
        rule: RewriteRule,
        *,
        exactness: Exactness,
        phase: Phase,
        constant_dtypes: frozenset[ir.DataType] = frozenset(),
    ) -> RuleSpec:
        """The spec of the rule defined in ``module_name`` (called as shown above).

        Raises:
            ValueError: the docstring does not start with the rewrite (``... -> ...``),
                or the exactness or phase is unknown.
        """
        identity = (module_doc or "").strip().splitlines()[0].rstrip(".") if module_doc else ""
        if "->" not in identity:
            raise ValueError(f"{module_name}: the docstring must start with the rewrite")
        if exactness not in EXACTNESS or phase not in PHASES:
            raise ValueError(
                f"{module_name}: unknown exactness {exactness!r} or phase {phase!r}"
            )
        name = module_name.rpartition(".")[2]
        return cls(name, rule, exactness, phase, identity, constant_dtypes)


@dataclasses.dataclass(frozen=True)
class RuleInfo:
    """What the registry knows about a rule without importing it (or onnxscript).

    Selecting rules by name, validating options and deciding whether a rule can match a
    node need only this; the rule itself is imported when some node passes
    :meth:`may_match`, so a model with nothing to rewrite never imports onnxscript.

    Attributes:
        name: the rule's module name (``--rules``).
        exactness: as :attr:`RuleSpec.exactness`.
        phase: as :attr:`RuleSpec.phase`.
        roots: op types of the pattern's root (the node whose output it replaces).
        producers: op types that must produce the root's first input (None: any).
        constant_dtypes: as :attr:`RuleSpec.constant_dtypes`.
    """

    name: str
    exactness: Exactness
    phase: Phase
    roots: frozenset[str]
    producers: frozenset[str] | None = None
    constant_dtypes: frozenset[ir.DataType] = frozenset()

    def may_match(self, node: ir.Node) -> bool:
        """False when the pattern cannot match at ``node`` (op types only; cheap)."""
        if node.domain not in DEFAULT_DOMAINS or node.op_type not in self.roots:
            return False
        if self.producers is None:
            return True
        first = node.inputs[0] if node.inputs else None
        producer = first.producer() if first is not None else None
        return (
            producer is not None
            and producer.domain in DEFAULT_DOMAINS
            and producer.op_type in self.producers
        )
