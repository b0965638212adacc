"""Which rule looked at an EyeLike and declined, and why: what the report says per node.

A rule declines in one of two ways: its pattern matched and its ``check`` said no (the
reason is onnxscript's ``MatchResult`` reason, which eyefold's rules write for a user to
read), or the cost model refused the rewrite. Both are recorded against the EyeLike nodes
the pattern's root sits below (their census numbers), and a rule that later fired there
is taken off again: the report lists only what stayed declined.
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

from eyefold.core.origins import origin_of
from eyefold.core.rule_spec import Mismatch
from eyefold.core.scopes import is_eyelike

__all__ = ["DeclineTracer", "RuleDeclines", "origins_above"]


class DeclineTracer:
    """An onnxscript matching tracer that keeps the reason of the last failed check.

    ``try_rewrite`` calls ``log`` once per match attempt; only a pattern that matched and
    whose check failed (``MatchStatus.CONDITION_FAILED``) for want of a fact leaves a
    reason (a :class:`~eyefold.core.rule_spec.Mismatch` says the pattern does not apply).
    """

    def __init__(self) -> None:
        self.reason: str | None = None

    def log(self, rule, container, node, match_result, status) -> None:
        """Keeps the reason of a match whose condition failed."""
        del rule, container, node  # the caller knows them
        from onnxscript.rewriter import MatchStatus  # only a built rule calls this

        reason = match_result.reason
        if status == MatchStatus.CONDITION_FAILED and not isinstance(reason, Mismatch):
            self.reason = reason or "its condition did not hold"


def origins_above(root: ir.Node, depth: int) -> set[int]:
    """Census numbers of the EyeLike nodes at most ``depth`` producers above ``root``."""
    found: set[int] = set()
    frontier, seen = [root], {id(root)}
    for _ in range(depth + 1):
        following = []
        for node in frontier:
            if is_eyelike(node) and (number := origin_of(node)) is not None:
                found.add(number)
            for value in node.inputs:
                producer = value.producer() if value is not None else None
                if producer is not None and id(producer) not in seen:
                    seen.add(id(producer))
                    following.append(producer)
        frontier = following
    return found


@dataclasses.dataclass
class RuleDeclines:
    """Declines and hits per EyeLike (census number), for one run of the rules pass."""

    declined: dict[int, dict[str, str]] = dataclasses.field(default_factory=dict)
    fired: dict[int, set[str]] = dataclasses.field(default_factory=dict)

    def decline(self, origins: set[int], rule: str, reason: str) -> None:
        """Records that ``rule`` declined at the EyeLike nodes ``origins``."""
        for number in origins:
            self.declined.setdefault(number, {}).setdefault(rule, reason)

    def fire(self, origins: set[int], rule: str) -> None:
        """Records that ``rule`` fired at the EyeLike nodes ``origins``."""
        for number in origins:
            self.fired.setdefault(number, set()).add(rule)

    def standing(self) -> dict[int, dict[str, str]]:
        """Per census number, the rules that declined and never fired there, and why."""
        result = {}
        for number, reasons in self.declined.items():
            fired = self.fired.get(number, set())
            kept = {rule: why for rule, why in reasons.items() if rule not in fired}
            if kept:
                result[number] = kept
        return result
