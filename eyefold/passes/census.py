"""The census: every input EyeLike numbered before any rewrite, for the report to account.

One name throughout: the pipeline step ``census``, :class:`TakeEyeLikeCensusPass`, its
:class:`CensusResult`.
"""

from __future__ import annotations

import dataclasses
import logging

import onnx_ir as ir

from eyefold.core.analysis import EyeLikeAnalysis, analyze_all
from eyefold.core.metadata_keys import ORIGIN_KEY
from eyefold.core.range_identity import RANGE_IDENTITY_OPS, range_identity
from eyefold.core.run_findings import RunFindings
from eyefold.core.scopes import iter_scopes

__all__ = ["CensusResult", "TakeEyeLikeCensusPass"]

logger = logging.getLogger(__name__)


class TakeEyeLikeCensusPass(ir.passes.InPlacePass):
    """Numbers every EyeLike node (in ``node.meta``, never saved) and records its analysis.

    Runs after the upgrade and input inference and before the first rewrite, so the
    analysis of a node a rule later removes is what the report shows for it (its shape,
    types, k and size; the action decided is not used: such a node is reported as
    removed).
    Validates each node on the way (the same checks the fold pass makes).
    """

    def call(self, model: ir.Model) -> CensusResult:
        """Numbers the EyeLike nodes of every scope; the model's content is unchanged."""
        found: list[EyeLikeAnalysis] = []
        for analysis in analyze_all(model, size_limit_bytes=0, fold=False):
            analysis.node.meta[ORIGIN_KEY] = len(found)
            found.append(analysis)
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

    found: list[EyeLikeAnalysis] = dataclasses.field(default_factory=list)
    identities: list[ir.Value] = dataclasses.field(default_factory=list)

    def report_into(self, findings: RunFindings) -> None:
        """Every EyeLike of the input, and its Range identities: the report counts both."""
        findings.found = self.found
        findings.identities = self.identities
