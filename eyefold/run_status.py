"""What a run that wrote a model can claim: checked or only written, and what may not run.

A run is ``PASSED`` only when ``--check`` ran both models and they agreed; otherwise it
only ``WRITTEN`` its output. An EyeLike node left in the output that the target runtime
(onnxruntime when none was given) cannot run is part of the status too: a run that
writes a model its runtime refuses must not end in words that read as a success. The
report carries this status (``"verdict"``) and the summaries render them, so the single
and the batch summary can never tell two stories.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol

__all__ = ["CHECK_HINT", "RunStatus", "run_status"]

# How an unchecked run says what would check it.
CHECK_HINT = "--check runs both models"


@dataclasses.dataclass
class RunStatus:
    """The verdict of one run that wrote a model.

    Attributes:
        checked: whether ``--check`` ran both models (and they agreed: a failed check
            writes nothing and has no status).
        unrunnable: EyeLike nodes in the output the runtime cannot run.
        runtime: the runtime they were judged against, with its version.
        fix: what makes them run, in words (an option, or where to read why).
    """

    checked: bool
    unrunnable: int = 0
    runtime: str | None = None
    fix: str | None = None

    @property
    def word(self) -> str:
        """``PASSED`` for a check that ran and passed, else ``WRITTEN``."""
        return "PASSED" if self.checked else "WRITTEN"

    def unrunnable_text(self) -> str | None:
        """E.g. ``1 EyeLike node cannot run on onnxruntime 1.32.0 (...)``; None: all run."""
        if not self.unrunnable:
            return None
        count = self.unrunnable
        nodes = "1 EyeLike node" if count == 1 else f"{count} EyeLike nodes"
        return f"{nodes} cannot run on {self.runtime} ({self.fix})"

    def to_dict(self) -> dict[str, Any]:
        """The report's ``verdict`` entry."""
        return {"result": self.word, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, entry: dict[str, Any]) -> RunStatus:
        """The status a report's ``verdict`` entry holds."""
        return cls(**{f.name: entry[f.name] for f in dataclasses.fields(cls)})


class _Outcome(Protocol):
    """What the status reads of a report's node (``eyefold.report.NodeOutcome``)."""

    action: str
    runtime_supported: bool | None
    legalized: bool
    lowered: bool


def _left_unrunnable(nodes: Sequence[_Outcome]) -> int:
    """EyeLike nodes in the output that the runtime judged it cannot run, as they are."""
    return sum(
        node.action in ("inferred", "kept")
        and node.runtime_supported is False
        and not node.legalized
        and not node.lowered
        for node in nodes
    )


def run_status(
    nodes: Sequence[_Outcome], runtime: dict[str, Any] | None, *, checked: bool
) -> RunStatus:
    """The status of a run from its report's nodes and runtime entry.

    Args:
        nodes: the report's node outcomes.
        runtime: the report's ``runtime`` entry (None: nothing was judged).
        checked: whether ``--check`` ran and passed.
    """
    count = _left_unrunnable(nodes) if runtime else 0
    if not count or runtime is None:
        return RunStatus(checked)
    name = runtime["name"]
    where = f"{name} {runtime['version']}" if runtime.get("version") else name
    # The notes say why a rewrite was not possible; else the option that rewrites them.
    fix = "see the WHY column" if runtime.get("rewrite") else f"use --target-runtime {name}"
    return RunStatus(checked, count, where, fix)
