"""What an optimize run did, as data (for library callers and --report) and as text."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator
from typing import Any

from eyefold.core.analysis import EyeLikeFacts

__all__ = ["NodeOutcome", "Report", "StepTiming"]


@dataclasses.dataclass
class NodeOutcome:
    """One EyeLike node: where it is, what eyefold did with it and why.

    Attributes:
        name: node name ("" when unnamed).
        graph: scope path, e.g. ``main`` or ``main/if.then_branch``.
        action: "folded", "inferred" or "kept".
        reason: why.
        shape: input shape (ints, symbolic names, None for unknown dims) or None.
        dtype: output element type name, None when unknown.
        k: diagonal offset.
        bytes: output size when static, else None.
        from_inputs: graph inputs whose declared shapes a fold rests on.
        input_dtype: element type name of the input, None when unknown.
        opset: default-domain opset of the node's scope.
        runtime_supported: whether the target runtime runs the node as it was (None: not
            checked, folded away, or not decidable).
        legalized: whether the node was rewritten into a form the target runtime runs.
        runtime_note: the runtime check and its outcome in words, None when not checked.
    """

    name: str
    graph: str
    action: str
    reason: str
    shape: list[int | str | None] | None
    dtype: str | None
    k: int
    bytes: int | None
    from_inputs: list[str] = dataclasses.field(default_factory=list)
    input_dtype: str | None = None
    opset: int | None = None
    runtime_supported: bool | None = None
    legalized: bool = False
    runtime_note: str | None = None

    @classmethod
    def from_facts(cls, facts: EyeLikeFacts) -> NodeOutcome:
        """Builds the outcome from the analysis of one node."""
        return cls(
            name=facts.node.name or "",
            graph=facts.scope.path,
            action=facts.action,
            reason=facts.reason,
            shape=facts.shape,
            dtype=facts.dtype.name if facts.dtype is not None else None,
            k=facts.k,
            bytes=facts.nbytes,
            from_inputs=list(facts.from_inputs),
            input_dtype=facts.input_dtype.name if facts.input_dtype is not None else None,
            opset=facts.scope.opset,
        )


@dataclasses.dataclass
class StepTiming:
    """Wall time of one pipeline step and whether it changed the model."""

    name: str
    seconds: float
    modified: bool = False


@dataclasses.dataclass
class Report:
    """The outcome of one ``eyefold.optimize`` run.

    Attributes:
        opset_before: default-domain opset of the input model (None if not imported).
        opset_after: default-domain opset of the result.
        nodes: one outcome per EyeLike node found.
        steps: pipeline steps in order, with timings.
        warnings: best-effort steps that degraded, in words.
    """

    opset_before: int | None = None
    opset_after: int | None = None
    nodes: list[NodeOutcome] = dataclasses.field(default_factory=list)
    steps: list[StepTiming] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """EyeLike totals by action, with the keys of the report contract."""
        totals = {"total": len(self.nodes), "folded": 0, "inferred": 0, "kept": 0}
        for node in self.nodes:
            totals[node.action] += 1
        return totals

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[StepTiming]:
        """Times a pipeline step; the caller sets ``modified`` on the yielded record."""
        record = StepTiming(name, 0.0)
        start = time.perf_counter()
        try:
            yield record
        finally:
            record.seconds = time.perf_counter() - start
            self.steps.append(record)

    def to_dict(self) -> dict[str, Any]:
        """The JSON report of the contract (extra keys allowed by it are appended)."""
        result: dict[str, Any] = {
            "opset": {"before": self.opset_before, "after": self.opset_after},
            "eyelike": self.counts(),
            "nodes": [dataclasses.asdict(node) for node in self.nodes],
            "steps": [dataclasses.asdict(step) for step in self.steps],
            "warnings": list(self.warnings),
        }
        result.update(self.extra)
        return result
