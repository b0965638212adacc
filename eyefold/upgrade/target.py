"""Which opsets an upgrade may target, and the ir_version each one needs.

Also the target a run aims at once the runtime it targets has had its say: an installed
onnxruntime that cannot load the opset asked for caps it.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import onnx

from eyefold.errors import UpgradeError

if TYPE_CHECKING:
    from eyefold.core.run_findings import RunFindings

__all__ = [
    "OpsetNotes",
    "UpgradeTarget",
    "check_target_opset",
    "loadable_target",
    "min_ir_version",
    "upgrade_target",
]


def check_target_opset(
    target_opset: object,
    *,
    lowest: int,
    error: type[Exception] = UpgradeError,
    what: str = "target opset",
) -> int:
    """``target_opset`` if it is an int between ``lowest`` and the newest opset onnx knows.

    Raises:
        error: naming the value (as ``what``) and the valid range.
    """
    newest = onnx.defs.onnx_opset_version()
    if isinstance(target_opset, bool) or not isinstance(target_opset, int):
        raise error(f"{what} must be an int, got {target_opset!r}")
    if not lowest <= target_opset <= newest:
        raise error(
            f"{what} {target_opset} is outside {lowest}..{newest}, the opsets onnx knows"
        )
    return target_opset


def min_ir_version(opset: int) -> int:
    """The lowest ir_version that may import the default domain at ``opset``."""
    return onnx.helper.find_min_ir_version_for([onnx.helper.make_opsetid("", opset)])


def loadable_target(asked: int, *, max_opset: int, max_ir_version: int) -> int:
    """The newest opset up to ``asked`` that a runtime loads, with the IR it then needs.

    The runtime loads opsets up to ``max_opset`` and IR versions up to ``max_ir_version``;
    the upgrade raises ``ir_version`` to the minimum the opset needs.
    """
    opset = min(asked, max_opset)
    while opset > 1 and min_ir_version(opset) > max_ir_version:
        opset -= 1
    return opset


@dataclasses.dataclass(frozen=True)
class UpgradeTarget:
    """The opset an upgrade aims at: the one asked for, capped to what the target loads.

    Attributes:
        asked: the target opset of the options.
        opset: the opset the upgrade raises to (``asked`` unless capped).
        limit: why it was capped, in words (None: not capped).
    """

    asked: int
    opset: int
    limit: str | None = None

    def notes(self, source: int | None) -> tuple[str, ...]:
        """What a model of default-domain opset ``source`` should be told about the target.

        A target below the model's opset does nothing (an upgrade never lowers), and a
        cap keeps the model below the opset asked for: both are said, never silent.
        """
        if source is None:
            return ()
        if source > self.asked:
            return (
                f"target opset {self.asked} is below the model's opset {source}:"
                f" the model keeps opset {source} (the upgrade never lowers it)",
            )
        if self.limit is None or source >= self.asked:
            return ()
        kept = f"; the model keeps opset {source}" if source >= self.opset else ""
        return (f"target opset {self.asked} capped to {self.opset}: {self.limit}{kept}",)


def upgrade_target(asked: int, runtime: str | None, version: str | None) -> UpgradeTarget:
    """The target of a run asking for opset ``asked`` for ``runtime`` at ``version``.

    Only onnxruntime's limits are known by version (:mod:`eyefold.runtime.versions`): with
    ``runtime="onnxruntime"`` at a release that cannot load ``asked`` (or the
    ``ir_version`` it needs), the target is the newest opset that release loads.
    """
    if runtime != "onnxruntime" or version is None:
        return UpgradeTarget(asked, asked)
    from eyefold.runtime.versions import onnxruntime_limits

    limits = onnxruntime_limits(version)
    if limits is None:
        return UpgradeTarget(asked, asked)
    max_opset, max_ir_version = limits
    opset = loadable_target(asked, max_opset=max_opset, max_ir_version=max_ir_version)
    if opset == asked:
        return UpgradeTarget(asked, asked)
    limit = (
        f"the installed onnxruntime {version} loads opsets up to {max_opset}"
        f" and IR versions up to {max_ir_version}"
    )
    return UpgradeTarget(asked, opset, limit)


@dataclasses.dataclass(frozen=True)
class OpsetNotes:
    """The notes of an upgrade step for the report (its ``notes`` key)."""

    notes: tuple[str, ...] = ()

    def report_into(self, findings: RunFindings) -> None:
        """Adds the notes to the run's."""
        findings.notes.extend(self.notes)
