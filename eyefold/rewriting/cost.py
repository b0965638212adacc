"""The rules pass's cost model: a rewrite may not make the model less runnable or fold less.

Rules are exact, but exactness is not enough: merging ``Cast(to=BOOL)`` into an EyeLike
that onnxruntime runs gives ``EyeLike(dtype=BOOL)``, which it cannot load, and merging a
``Cast(to=FLOAT)`` into a 1 MiB BOOL EyeLike gives a 4 MiB one, over the fold limit. So
each rewrite is priced before it is applied, over the EyeLike nodes it removes and the
ones it creates:

1. EyeLike nodes that stay in the model (do not fold) and that onnxruntime cannot run (or
   may not: an unknown verdict counts as cannot). With a target runtime given,
   legalization or lowering rewrites those afterwards, so this term is zero;
2. EyeLike nodes that do not fold.

A rewrite is applied only when neither term grows. The runtime's table is the cached
measurement or the built-in one (no session is created); without a target runtime it is
onnxruntime's, since "it ran on onnxruntime" is what a user expects to keep.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import onnx_ir as ir

from eyefold.core.analysis import analyze_eyelike
from eyefold.core.eyelike_types import to_data_type
from eyefold.core.scopes import Scope, is_eyelike
from eyefold.runtime.support import EyeLikeSupport

__all__ = ["RewriteCost", "RewriteJudge"]


@dataclasses.dataclass(frozen=True, order=True)
class RewriteCost:
    """The price of some EyeLike nodes: what would not run, then what would not fold."""

    not_runnable: int = 0
    not_folded: int = 0

    def allows(self, after: RewriteCost) -> bool:
        """True when ``after`` is no worse on either term."""
        return after.not_runnable <= self.not_runnable and after.not_folded <= self.not_folded


@dataclasses.dataclass(frozen=True)
class RewriteJudge:
    """Prices EyeLike nodes for one run of the rules pass.

    Attributes:
        support: what onnxruntime runs; None when a target runtime was given (its
            legalization or lowering follows, so nothing is priced as not runnable).
        size_limit_bytes: the fold limit.
        fold: whether folding runs after the rules.
    """

    support: EyeLikeSupport | None
    size_limit_bytes: int
    fold: bool

    def cost(self, nodes: Iterable[ir.Node], scope: Scope) -> RewriteCost:
        """The cost of the EyeLike nodes among ``nodes`` (in or about to join ``scope``)."""
        not_runnable = not_folded = 0
        for node in nodes:
            if not is_eyelike(node):
                continue
            facts = analyze_eyelike(
                node, scope, size_limit_bytes=self.size_limit_bytes, fold=self.fold
            )
            if facts.action == "folded":
                continue
            not_folded += 1
            if self.support is not None and not self._runs(node, facts.input_dtype, scope):
                not_runnable += 1
        return RewriteCost(not_runnable, not_folded)

    def why_not(self, before: RewriteCost, after: RewriteCost) -> str:
        """Why a rewrite from ``before`` to ``after`` is refused, in words."""
        if after.not_runnable > before.not_runnable:
            runtime = self.support.describe() if self.support is not None else "the runtime"
            return f"the rewrite would leave an EyeLike {runtime} cannot run"
        return "the rewrite would leave an EyeLike that no longer folds"

    def _runs(self, node: ir.Node, source: ir.DataType | None, scope: Scope) -> bool:
        assert self.support is not None
        attribute = node.attributes.get("dtype")
        if attribute is not None and attribute.is_ref():
            return False  # known per call only: cannot tell
        dtype = to_data_type(attribute.as_int()) if attribute is not None else None
        return self.support.verdict(source, dtype, scope.opset) is True
