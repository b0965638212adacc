"""What the pipeline's passes tell the report: the small protocol between the two.

Each pass result that has something to report implements :class:`ReportsInto`: it adds
what it found to one :class:`RunFindings`, and :func:`eyefold.report.build_report` reads
only that. The report therefore depends on no pass module, and a new pass reports by
filling these fields rather than by a new branch in the report.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import onnx_ir as ir

    from eyefold.core.analysis import EyeLikeAnalysis

__all__ = [
    "FED_A_FOLD_REASON",
    "LoweringNote",
    "ReportsInto",
    "RunFindings",
    "RuntimeNote",
    "RuntimeVerdicts",
    "SupportTable",
]

# Why an input EyeLike is gone when it only fed folded ones.
FED_A_FOLD_REASON = "removed with the chain that fed a folded EyeLike"


class LoweringNote(Protocol):
    """What the lowering pass did with one EyeLike."""

    node: ir.Node
    name: str
    scope: str
    lowered: bool
    note: str


class RuntimeNote(Protocol):
    """What the runtime check found (and legalization did) for one EyeLike."""

    node: ir.Node
    runs: bool | None
    legalized: bool
    note: str
    lowered: bool
    warning: str | None


class SupportTable(Protocol):
    """The support table a runtime verdict was taken from."""

    runtime: str
    version: str | None
    source: str
    measured: str | None

    def describe(self) -> str:
        """The runtime and version in words."""
        ...


class RuntimeVerdicts(Protocol):
    """The runtime check's (or legalization's) verdict on each EyeLike left."""

    rewrite: bool
    support: SupportTable | None
    outcomes: Sequence[RuntimeNote]
    lacks: frozenset[str]


@dataclasses.dataclass
class RunFindings:
    """Everything the passes of one run found, in the report's terms.

    Attributes:
        found: every EyeLike of the input, in census order (its index is its number).
        folded: the analysis of each node folded.
        left: the analysis of each EyeLike left after folding and inference.
        hits: how often each rule fired.
        declined: how often the cost model refused each rule's rewrite.
        removed_by: census number of a removed input EyeLike -> why.
        rule_declines: census number -> the rules that looked at that EyeLike and
            declined, and why (rule name -> reason).
        warnings: best-effort steps that degraded, in words.
        notes: what the run did differently from what was asked, and why, in words.
        withheld: relaxed rules that would have rewritten EyeLike nodes had ``relaxed``
            been on -> how many.
        identities: dynamo's Range/Equal identities of the input (not EyeLike nodes;
            :mod:`eyefold.core.range_identity`), each the value that is the matrix.
        lowering: the lowering pass's notes, if it ran.
        runtime: the runtime check's verdicts, if it ran.
    """

    found: list[EyeLikeAnalysis] = dataclasses.field(default_factory=list)
    folded: list[EyeLikeAnalysis] = dataclasses.field(default_factory=list)
    left: list[EyeLikeAnalysis] = dataclasses.field(default_factory=list)
    hits: dict[str, int] = dataclasses.field(default_factory=dict)
    declined: dict[str, int] = dataclasses.field(default_factory=dict)
    removed_by: dict[int, str] = dataclasses.field(default_factory=dict)
    rule_declines: dict[int, dict[str, str]] = dataclasses.field(default_factory=dict)
    warnings: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    withheld: dict[str, int] = dataclasses.field(default_factory=dict)
    identities: list[ir.Value] = dataclasses.field(default_factory=list)
    lowering: Sequence[LoweringNote] | None = None
    runtime: RuntimeVerdicts | None = None


@runtime_checkable
class ReportsInto(Protocol):
    """A pass result that has something for the report."""

    def report_into(self, findings: RunFindings) -> None:
        """Adds what the pass found to ``findings``."""
        ...
