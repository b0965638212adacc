"""The numbers of the before/after table: op counts, initializers, opset, size on disk.

Counted from an onnx_ir model by one walk, or, on the file path, from a ModelProto
without a second walk of the main graph: the scan's op-type column gives the counts
before, and the counts after are those less the nodes the neighbourhood replaced plus
the nodes it wrote back (:mod:`eyefold.proto_path.stats`).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable
from typing import Any

import onnx_ir as ir

from eyefold.core.domains import DEFAULT_DOMAINS, default_opset
from eyefold.core.scopes import iter_scopes

__all__ = ["ModelStats", "model_stats", "op_counts", "op_label", "sorted_counts"]


@dataclasses.dataclass(frozen=True)
class ModelStats:
    """The numbers of the before/after table.

    Attributes:
        ops: node count per op type over every graph, subgraph and function
            (``domain::Op`` outside the default domain).
        initializers: initializers of the main graph and its subgraphs.
        opset: default-domain opset.
        bytes: size on disk of the model file and its external data, when known.
    """

    ops: dict[str, int]
    initializers: int
    opset: int | None
    bytes: int | None

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return dataclasses.asdict(self)


def op_label(domain: str, op_type: str) -> str:
    """How the table names an op: bare in the default domain, else ``domain::Op``."""
    return op_type if domain in DEFAULT_DOMAINS else f"{domain}::{op_type}"


def sorted_counts(counts: Iterable[tuple[str, int]]) -> dict[str, int]:
    """Op counts in name order, ops counted zero times left out."""
    return {label: count for label, count in sorted(counts) if count > 0}


def model_stats(model: ir.Model, nbytes: int | None) -> ModelStats:
    """Counts ops and initializers in one walk (cheap: no tensor data is read)."""
    counts: Counter[str] = Counter()
    initializers = 0
    for scope in iter_scopes(model):
        if isinstance(scope.graph, ir.Graph):
            initializers += len(scope.graph.initializers)
        for node in scope.graph:
            counts[op_label(node.domain, node.op_type)] += 1
    return ModelStats(
        ops=sorted_counts(counts.items()),
        initializers=initializers,
        opset=default_opset(model.opset_imports),
        bytes=nbytes,
    )


def op_counts(model: ir.Model) -> dict[str, int]:
    """Nodes per op type in the main graph, every subgraph and every function."""
    return model_stats(model, None).ops
