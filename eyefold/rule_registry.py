"""The public rule API: list, select and describe rewrite rules by name, exactness, phase.

Only :func:`load_rules` imports onnxscript; the rest reads the rules' specs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from eyefold.errors import EyefoldError, UnknownRuleError
from eyefold.rules import ALL_RULES, PHASES, Phase, RuleSpec

if TYPE_CHECKING:
    from onnxscript.rewriter import RewriteRuleSet

__all__ = ["describe_rules", "load_rules", "rule_names", "select_rules"]


def rule_names() -> tuple[str, ...]:
    """Every registered rule name, in registry order."""
    return tuple(spec.name for spec in ALL_RULES)


def select_rules(
    names: Sequence[str] | None = None,
    *,
    relaxed: bool = False,
    phase: Phase | None = None,
) -> tuple[RuleSpec, ...]:
    """The rules to run, in registry order.

    Args:
        names: rule names; None selects every exact rule (and the relaxed ones too when
            ``relaxed``); an empty sequence selects none.
        relaxed: allow rules that are exact only up to IEEE special values.
        phase: keep only the rules of this phase (None: both phases).

    Raises:
        UnknownRuleError: a name is not registered, or names a relaxed rule while
            ``relaxed`` is False.
    """
    if isinstance(names, str):
        raise TypeError("names must be a sequence of rule names, not a string")
    if phase is not None and phase not in PHASES:
        raise EyefoldError(f"unknown rule phase {phase!r}; expected one of {PHASES}")
    if names is None:
        chosen = [s for s in ALL_RULES if relaxed or s.exactness == "exact"]
    else:
        known = {spec.name: spec for spec in ALL_RULES}
        unknown = sorted(set(names) - known.keys())
        if unknown:
            raise UnknownRuleError(
                f"unknown rule {', '.join(unknown)}; known rules: {', '.join(known)}"
            )
        wanted = set(names)
        chosen = [s for s in ALL_RULES if s.name in wanted]
        blocked = [s.name for s in chosen if s.exactness == "relaxed" and not relaxed]
        if blocked:
            raise UnknownRuleError(
                f"rule {', '.join(blocked)} is relaxed (not exact for inf, NaN and -0.0);"
                " enable relaxed rules (relaxed=True) to run it"
            )
    return tuple(s for s in chosen if phase is None or s.phase == phase)


def load_rules(
    names: Sequence[str] | None = None,
    *,
    relaxed: bool = False,
    phase: Phase | None = None,
) -> RewriteRuleSet | None:
    """The selected rules as an onnxscript ``RewriteRuleSet`` (None when none is selected).

    onnxscript's own driver tries every rule on every node, which is slow on large
    graphs; ``eyefold.passes.ApplyEyeLikeRulesPass`` runs the same rules on the few
    nodes near an EyeLike or an identity constant.
    """
    specs = select_rules(names, relaxed=relaxed, phase=phase)
    if not specs:
        return None
    from onnxscript.rewriter import RewriteRuleSet  # listing and selecting never need it

    return RewriteRuleSet([spec.rule for spec in specs])


def describe_rules() -> str:
    """One line per registered rule: name, exactness, phase and identity."""
    width = max(len(spec.name) for spec in ALL_RULES)
    lines = [f"{'rule':<{width}}  exactness  phase        identity"]
    lines.extend(
        f"{s.name:<{width}}  {s.exactness:<9}  {s.phase:<11}  {s.identity}" for s in ALL_RULES
    )
    lines.append("relaxed rules run only with --relaxed (relaxed=True).")
    return "\n".join(lines)
