"""The public rule API: list, select and describe rewrite rules by name, exactness, phase.

Names, selection and validation read the registry's :class:`RuleInfo` entries, which
import nothing; a rule module (and onnxscript with it) is imported only when its
:class:`RuleSpec` is asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from eyefold.errors import EyefoldError, UnknownRuleError
from eyefold.rules import PHASES, RULE_INFOS, Phase, RuleInfo, RuleSpec

if TYPE_CHECKING:
    from onnxscript.rewriter import RewriteRuleSet

__all__ = [
    "describe_rules",
    "load_rules",
    "load_spec",
    "rule_names",
    "select_rule_infos",
    "select_rules",
]


def rule_names() -> tuple[str, ...]:
    """Every registered rule name, in registry order."""
    return tuple(info.name for info in RULE_INFOS)


def select_rule_infos(
    names: Sequence[str] | None = None,
    *,
    relaxed: bool = False,
    phase: Phase | None = None,
) -> tuple[RuleInfo, ...]:
    """The registry entries of the rules to run, in registry order; imports no rule.

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
        chosen = [i for i in RULE_INFOS if relaxed or i.exactness == "exact"]
    else:
        known = rule_names()
        unknown = sorted(set(names) - set(known))
        if unknown:
            raise UnknownRuleError(
                f"unknown rule {', '.join(unknown)}; known rules: {', '.join(known)}"
            )
        wanted = set(names)
        chosen = [i for i in RULE_INFOS if i.name in wanted]
        blocked = [i.name for i in chosen if i.exactness == "relaxed" and not relaxed]
        if blocked:
            raise UnknownRuleError(
                f"rule {', '.join(blocked)} is relaxed (not exact for inf, NaN and -0.0);"
                " enable relaxed rules (--relaxed) to run it"
            )
    return tuple(i for i in chosen if phase is None or i.phase == phase)


def load_spec(info: RuleInfo) -> RuleSpec:
    """The rule behind a registry entry (imports its module, and onnxscript)."""
    return importlib.import_module(f"eyefold.rules.{info.name}").spec


def select_rules(
    names: Sequence[str] | None = None,
    *,
    relaxed: bool = False,
    phase: Phase | None = None,
) -> tuple[RuleSpec, ...]:
    """The rules to run, in registry order, loaded (see :func:`select_rule_infos`).

    Raises:
        UnknownRuleError: as :func:`select_rule_infos`.
    """
    infos = select_rule_infos(names, relaxed=relaxed, phase=phase)
    return tuple(load_spec(info) for info in infos)


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
    from onnxscript.rewriter import RewriteRuleSet

    specs = select_rules(names, relaxed=relaxed, phase=phase)
    return RewriteRuleSet([spec.rule for spec in specs]) if specs else None


def describe_rules() -> str:
    """One line per registered rule: name, exactness, phase and identity."""
    specs = select_rules(relaxed=True)
    width = max(len(spec.name) for spec in specs)
    lines = [f"{'rule':<{width}}  exactness  phase        identity"]
    lines.extend(
        f"{s.name:<{width}}  {s.exactness:<9}  {s.phase:<11}  {s.identity}" for s in specs
    )
    lines.append("relaxed rules run only with --relaxed (relaxed=True).")
    return "\n".join(lines)
