"""What a rewrite rule declares about itself, in its own module.

Each rule module defines its rule class (``pattern``, ``check``, ``rewrite``, as onnxscript
rules are written, but on no onnxscript base class) and ends with
``spec = RuleSpec.declare(__name__, __doc__, RuleClass, ...)``: the name users select it
by is the module's, and its one-line identity is the first line of the module docstring,
so neither is written twice. Everything a spec says is read without importing onnxscript
(about 0.15 s); the onnxscript rule itself (:attr:`RuleSpec.rule`) is built on first use,
which a run reaches only when some EyeLike has a neighbour a rule looks at
(:attr:`Reach.neighbours`).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    import onnx_ir as ir
    from onnxscript.rewriter import RewriteRule

__all__ = [
    "EXACTNESS",
    "PHASES",
    "Exactness",
    "MatchResult",
    "Mismatch",
    "Phase",
    "Reach",
    "RuleSpec",
    "match_result",
]

Exactness = Literal["exact", "relaxed"]
Phase = Literal["before-fold", "after-fold"]
EXACTNESS: tuple[Exactness, ...] = ("exact", "relaxed")
PHASES: tuple[Phase, ...] = ("before-fold", "after-fold")


class Mismatch(str):
    """A check's failure reason meaning "not this pattern here" (another op, another type).

    A rule's ``check`` fails with ``result.fail(Mismatch("..."))`` where the pattern it
    matched loosely (any producer, any MatMul) is not one it rewrites; a plain reason means
    it looked at the EyeLike and declined for want of a fact (a shape, a rank, an opset).
    Both read the same in onnxscript's MatchingTracer; the report lists only the latter.
    """

    __slots__ = ()


class MatchResult(Protocol):
    """What a rule's ``check`` returns: onnxscript's ``MatchResult``, as the rules use it."""

    def fail(self, reason: str = "", failure_source: object = None) -> MatchResult:
        """Marks the match failed, saying why (``MatchingTracer`` shows the reason)."""
        ...


def match_result() -> MatchResult:
    """A new, successful onnxscript ``MatchResult``, for a rule's ``check`` to fill in.

    Only a built rule (:attr:`RuleSpec.rule`) calls ``check``, so onnxscript is imported
    by then: the rule modules themselves never import it.
    """
    from onnxscript import rewriter

    return rewriter.MatchResult()


@dataclasses.dataclass(frozen=True)
class Reach:
    """How far a rule's pattern looks from the EyeLike (or identity constant) it contains.

    The rules pass tries rules only at the nodes this allows, the inference step types
    what they read, and the file path extracts only the nodes it names: all derive from
    the rules' reaches (:mod:`eyefold.rewriting.reach`), so a new rule declares its own.

    Attributes:
        neighbours: ops of the nodes next to the EyeLike or identity constant (the
            producer of the EyeLike's input, or a consumer of its output) one of which
            the pattern needs: where no EyeLike has one, the rule cannot match, and the
            rules pass does not even build it.
        depth: how many consumers down from the EyeLike the pattern's root (the node
            whose output it replaces) can sit.
        replaces: consumer ops whose node a rewrite can remove, replacing its output by
            an EyeLike or by what the node read, or that the pattern reads through to
            the EyeLike: their own consumers may then read an EyeLike, and their
            producers may be left dead.
        reads_operands: consumer ops whose other operands' element types and shapes the
            rule's check reads: values beyond the EyeLike's neighbourhood, which the
            inference step infers first, and which make the file path take the whole
            model.
    """

    neighbours: frozenset[str]
    depth: int = 0
    replaces: frozenset[str] = frozenset()
    reads_operands: frozenset[str] = frozenset()


@dataclasses.dataclass(frozen=True)
class RuleSpec:
    """One rewrite rule and what the pipeline needs to know about it.

    Attributes:
        name: the name users select it by (``--rules``), its module's name.
        rule_class: the rule's class: ``pattern``, ``check`` and ``rewrite`` methods, as
            an onnxscript ``RewriteRuleClassBase`` subclass has (see :attr:`rule`).
        exactness: "exact" (same output bits for every input, NaN, inf and -0.0
            included) or "relaxed" (exact up to IEEE special values; opt-in only).
        phase: "before-fold" (patterns around an EyeLike node, which folding removes) or
            "after-fold" (patterns that also match a folded constant).
        identity: the rewrite in one line.
        constant_dtypes: element types of the constant identity matrices (folded
            EyeLike nodes) the pattern also matches next to; empty when it needs an
            EyeLike node.
        reach: how far the pattern looks from its EyeLike.
        firing_model: a model on which the rule fires, in ONNX text: the tests run it on
            both paths and compare the outputs, so each rule's reach and meaning are
            tested from its own module.
    """

    name: str
    rule_class: type
    exactness: Exactness
    phase: Phase
    identity: str
    constant_dtypes: frozenset[ir.DataType] = frozenset()
    reach: Reach = Reach(frozenset())
    firing_model: str = ""

    @functools.cached_property
    def rule(self) -> RewriteRule:
        """The onnxscript rewrite rule, built (and onnxscript imported) on first use.

        :attr:`rule_class` with onnxscript's ``RewriteRuleClassBase`` mixed in, so the
        rule is what ``RuleClass.rule()`` gives for a subclass written the usual way.
        """
        from onnxscript.rewriter import RewriteRuleClassBase

        plain = self.rule_class
        attributes = {
            "__module__": plain.__module__,
            "__qualname__": plain.__qualname__,
            "__doc__": plain.__doc__,
        }
        built = type(plain.__name__, (plain, RewriteRuleClassBase), attributes)
        return built.rule()

    def module_attribute(self, name: str) -> RewriteRule:
        """The rule module's ``rule`` attribute, built on first use.

        Each rule module sets ``__getattr__ = spec.module_attribute``.

        Raises:
            AttributeError: any other name.
        """
        if name == "rule":
            return self.rule
        raise AttributeError(f"rule module {self.name!r} has no attribute {name!r}")

    @classmethod
    def declare(
        cls,
        module_name: str,
        module_doc: str | None,
        rule_class: type,
        *,
        exactness: Exactness,
        phase: Phase,
        reach: Reach,
        firing_model: str,
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
        return cls(
            name, rule_class, exactness, phase, identity, constant_dtypes, reach, firing_model
        )
