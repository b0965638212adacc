"""Count the EyeLike nodes of the input before any rewrite, so the report accounts for each."""

from __future__ import annotations

import dataclasses
import logging

import onnx_ir as ir

from eyefold.core.analysis import EyeLikeFacts, analyze_eyelike
from eyefold.core.origins import ORIGIN_KEY
from eyefold.core.scopes import is_eyelike, iter_scopes
from eyefold.options import DEFAULT_SIZE_LIMIT_BYTES

__all__ = ["CensusResult", "CountEyeLikePass"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class CensusResult(ir.passes.PassResult):
    """The pass result: every EyeLike found, in scope order; its index is its number."""

    found: list[EyeLikeFacts] = dataclasses.field(default_factory=list)


class CountEyeLikePass(ir.passes.InPlacePass):
    """Numbers every EyeLike node (in ``node.meta``, never saved) and records its facts.

    Runs after the upgrade and input inference and before the first rewrite, so the facts
    of a node a rule later removes are those the report shows for it. Validates each node
    on the way (the same checks the fold pass makes).

    Attributes:
        size_limit_bytes: the fold limit, for the facts' planned action.
        fold_enabled: False when folding is turned off.
    """

    def __init__(
        self, *, size_limit_bytes: int = DEFAULT_SIZE_LIMIT_BYTES, fold_enabled: bool = True
    ) -> None:
        super().__init__()
        self.size_limit_bytes = size_limit_bytes
        self.fold_enabled = fold_enabled

    def call(self, model: ir.Model) -> CensusResult:
        """Numbers the EyeLike nodes of every scope; the model's content is unchanged."""
        found: list[EyeLikeFacts] = []
        for scope in iter_scopes(model):
            for node in scope.graph:
                if not is_eyelike(node):
                    continue
                node.meta[ORIGIN_KEY] = len(found)
                found.append(
                    analyze_eyelike(
                        node,
                        scope,
                        size_limit_bytes=self.size_limit_bytes,
                        fold=self.fold_enabled,
                    )
                )
        logger.info("EyeLike nodes found: %d", len(found))
        return CensusResult(model, modified=False, found=found)
