"""The census: every input EyeLike numbered before any rewrite, for the report to account.

One name throughout: the pipeline step ``census``, :class:`TakeEyeLikeCensusPass`, its
:class:`CensusResult`.
"""

from __future__ import annotations

import dataclasses
import logging

import onnx_ir as ir

from eyefold.core.analysis import EyeLikeFacts, analyze_all
from eyefold.core.metadata_keys import ORIGIN_KEY
from eyefold.core.range_identity import RANGE_IDENTITY_OPS, range_identity
from eyefold.core.run_facts import RunFacts
from eyefold.core.scopes import iter_scopes

__all__ = ["CensusResult", "TakeEyeLikeCensusPass"]

logger = logging.getLogger(__name__)


class TakeEyeLikeCensusPass(ir.passes.InPlacePass):
    """Numbers every EyeLike node (in ``node.meta``, never saved) and records its facts.

    Runs after the upgrade and input inference and before the first rewrite, so the facts
    of a node a rule later removes are those the report shows for it (its shape, types,
    k and size; the planned action is not used: such a node is reported as removed).
    Validates each node on the way (the same checks the fold pass makes).
    """

    def call(self, model: ir.Model) -> CensusResult:
        """Numbers the EyeLike nodes of every scope; the model's content is unchanged."""
        found: list[EyeLikeFacts] = []
        for facts in analyze_all(model, size_limit_bytes=0, fold=False):
            facts.node.meta[ORIGIN_KEY] = len(found)
            found.append(facts)
        identities = _range_identities(model)
        logger.info(
            "EyeLike nodes found: %d; Range identities: %d", len(found), len(identities)
        )
        return CensusResult(model, modified=False, found=found, identities=identities)


def _range_identities(model: ir.Model) -> list[ir.Value]:
    """Dynamo's Range/Equal identities, each counted once (a Cast's, not its Equal too)."""
    values = [
        value
        for scope in iter_scopes(model)
        for node in scope.graph
        if node.op_type in RANGE_IDENTITY_OPS
        for value in node.outputs
        if range_identity(value) is not None
    ]
    cast_of = {
        id(producer.inputs[0])
        for value in values
        if (producer := value.producer()) is not None and producer.op_type == "Cast"
    }
    return [value for value in values if id(value) not in cast_of]


@dataclasses.dataclass
class CensusResult(ir.passes.PassResult):
    """The pass result: every EyeLike found, in scope order; its index is its number."""

    found: list[EyeLikeFacts] = dataclasses.field(default_factory=list)
    identities: list[ir.Value] = dataclasses.field(default_factory=list)

    def report_into(self, facts: RunFacts) -> None:
        """Every EyeLike of the input, and its Range identities: the report counts both."""
        facts.found = self.found
        facts.identities = self.identities
