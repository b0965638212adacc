"""How far the rules look, as the file path needs it: derived from each rule's reach.

The file path's neighbourhood holds the neighbours a rule looks at
(:data:`NEIGHBOUR_OPS`) and the consumers a rewrite may replace (:data:`REPLACED_OPS`), and
gives up where a rule reads operands past it (:data:`READS_PAST_OPS`). All three come from
every registered rule's :class:`~eyefold.core.rule_spec.Reach`, whichever rules a run
selects, so a new rule needs no edit here. The rules pass itself tries the selected rules
as deep as their own reaches say (``ApplyEyeLikeRulesPass``); :data:`ROOT_DEPTH` is the
deepest of all.
"""

from __future__ import annotations

from eyefold.rules import ALL_RULES

__all__ = [
    "LOOKED_AT_OPS",
    "NEIGHBOUR_OPS",
    "READS_PAST_OPS",
    "REPLACED_OPS",
    "ROOT_DEPTH",
]

ROOT_DEPTH = max(spec.reach.depth for spec in ALL_RULES)

# Consumers a rewrite may remove or replace: their own consumers are looked at too, and
# an EyeLike's input producers die only if all their readers can.
REPLACED_OPS = frozenset().union(*(spec.reach.replaces for spec in ALL_RULES))

# Readers of an EyeLike output whose other operands a rule's check reads: values past the
# neighbourhood, typed only by inference over the whole model.
READS_PAST_OPS = frozenset().union(*(spec.reach.reads_operands for spec in ALL_RULES))

# Ops of the producers and consumers next to an EyeLike that some rule's pattern needs.
NEIGHBOUR_OPS = frozenset().union(*(spec.reach.neighbours for spec in ALL_RULES))

# Consumers of an EyeLike (or of what a rule turns into one) that any rule looks at: a
# consumer of another op is never part of a match, only a reader of the value.
LOOKED_AT_OPS = NEIGHBOUR_OPS | REPLACED_OPS | READS_PAST_OPS
