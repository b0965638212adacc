"""How far the rules look, as the file path needs it: derived from each rule's reach.

The file path's neighbourhood holds the neighbours a rule looks at
(:data:`NEIGHBOUR_OPS`) and the consumers the rules may rewrite or remove
(:data:`BECOMES_EYELIKE_OPS`, :data:`REMOVABLE_OPS`), and gives up where a rule reads past
it (:data:`READS_PAST_OPS`). All three come from every registered rule's
:class:`~eyefold.core.rule_spec.Reach`, whichever rules a run selects, so a new rule
needs no edit here. The rules pass itself tries the selected rules as deep as their own
reaches say (``ApplyEyeLikeRulesPass``); :data:`ROOT_DEPTH` is the deepest of all.
"""

from __future__ import annotations

from eyefold.rules import ALL_RULES

__all__ = [
    "BECOMES_EYELIKE_OPS",
    "LOOKED_AT_OPS",
    "NEIGHBOUR_OPS",
    "READS_PAST_OPS",
    "REMOVABLE_OPS",
    "ROOT_DEPTH",
]

ROOT_DEPTH = max(spec.reach.depth for spec in ALL_RULES)

# Consumers a rule may turn into an EyeLike: their own consumers are looked at too.
BECOMES_EYELIKE_OPS = frozenset().union(*(spec.reach.becomes_eyelike for spec in ALL_RULES))

# Ops a pass may remove: an EyeLike's input producers die only if all their readers can.
REMOVABLE_OPS = BECOMES_EYELIKE_OPS.union(*(spec.reach.removes for spec in ALL_RULES))

# Readers of an EyeLike output whose patterns reach past the neighbourhood.
READS_PAST_OPS = frozenset().union(*(spec.reach.reads_past for spec in ALL_RULES))

# Ops of the producers and consumers next to an EyeLike that some rule's pattern needs.
NEIGHBOUR_OPS = frozenset().union(*(spec.reach.neighbours for spec in ALL_RULES))

# Consumers of an EyeLike (or of what a rule turns into one) that any rule looks at: a
# consumer of another op is never part of a match, only a reader of the value.
LOOKED_AT_OPS = NEIGHBOUR_OPS | REMOVABLE_OPS | READS_PAST_OPS
