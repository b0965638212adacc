"""The rules pass's cost model: a rewrite may not make the model less runnable or fold less.

Rules are exact, but exactness is not enough: merging ``Cast(to=BOOL)`` into an EyeLike
that onnxruntime runs gives ``EyeLike(dtype=BOOL)``, which it cannot load, and merging a
``Cast(to=FLOAT)`` into a 1 MiB BOOL EyeLike gives a 4 MiB one, over the fold limit. So
each rewrite is priced before it is applied, over the EyeLike nodes it removes and the
ones it creates:

1. EyeLike nodes that stay in the model (do not fold) and that a judged runtime cannot
   run (or may not: an unknown verdict counts as cannot), counted once per runtime.
   Without a target runtime the judged runtime is onnxruntime, since "it ran on
   onnxruntime" is what a user expects to keep. With ``onnxruntime`` or ``tensorrt`` as the
   target, legalization or lowering rewrites those afterwards and nothing is judged. With
   ``openvino``, ``tract`` or ``tvm``, legalization makes the nodes run on the target, and
   the other known runtimes are judged: legalization keeps a node running where the node
   it sees ran, so a merge that another runtime cannot run must not happen first;
2. EyeLike nodes that do not fold.

A rewrite is applied only when neither term grows. The tables are the cached measurement
or the built-in ones (no session is created).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

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
        supports: what each judged runtime runs (see the module docstring); empty when
            nothing is priced as not runnable.
        size_limit_bytes: the fold limit.
        fold: whether folding runs after the rules.
    """

    supports: Sequence[EyeLikeSupport]
    size_limit_bytes: int
    fold: bool

    def cost(self, nodes: Iterable[ir.Node], scope: Scope) -> RewriteCost:
        """The cost of the EyeLike nodes among ``nodes`` (in or about to join ``scope``)."""
        not_runnable = not_folded = 0
        for node in nodes:
            if not is_eyelike(node):
                continue
            analysis = analyze_eyelike(
                node, scope, size_limit_bytes=self.size_limit_bytes, fold=self.fold
            )
            if analysis.action == "folded":
                continue
            not_folded += 1
            not_runnable += sum(
                not _runs(support, node, analysis.input_dtype, scope)
                for support in self.supports
            )
        return RewriteCost(not_runnable, not_folded)

    def why_not(self, before: RewriteCost, after: RewriteCost) -> str:
        """Why a rewrite from ``before`` to ``after`` is refused, in words."""
        if after.not_runnable > before.not_runnable:
            runtimes = " or ".join(s.describe() for s in self.supports) or "the runtime"
            return f"the rewrite would leave an EyeLike {runtimes} cannot run"
        return "the rewrite would leave an EyeLike that no longer folds"


def _runs(
    support: EyeLikeSupport, node: ir.Node, source: ir.DataType | None, scope: Scope
) -> bool:
    attribute = node.attributes.get("dtype")
    if attribute is not None and attribute.is_ref():
        return False  # known per call only: cannot tell
    dtype = to_data_type(attribute.as_int()) if attribute is not None else None
    return support.verdict(source, dtype, scope.opset) is True
