"""The numbers of the before/after table: op counts, initializers, opset, size on disk.

Counted from an onnx_ir model by one walk, or, on the file path, from a ModelProto
without a second walk of the main graph: the op-type and domain columns the file path
read already give the main graph's counts, and only the subgraphs (inside the nodes that
can hold them) and the function bodies are walked. The counts after a splice are those
before, less the nodes the neighbourhood replaced, plus the nodes written back.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable
from typing import Any

import onnx
import onnx_ir as ir

from eyefold.core.domains import DEFAULT_DOMAINS, default_opset
from eyefold.core.proto_subgraphs import holder_positions, nested_graphs
from eyefold.core.scopes import iter_scopes

__all__ = [
    "ModelStats",
    "model_stats",
    "op_counts",
    "op_label",
    "proto_stats",
    "sorted_counts",
    "stats_after",
]


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


def _proto_opset(model: onnx.ModelProto) -> int | None:
    return default_opset({o.domain: o.version for o in model.opset_import})


def proto_stats(model: onnx.ModelProto, op_types: list[str], domains: list[str]) -> ModelStats:
    """Stats of ``model`` (bytes unknown), its main graph's ops given as its columns.

    ``op_types`` and ``domains``: each main-graph node's, as the caller read them. The
    main graph's subgraphs are reached through the nodes that may hold them; initializers
    are counted in the main graph and its subgraphs, ops also in the function bodies.
    """
    counts: Counter[str] = Counter()
    for (domain, op_type), count in Counter(zip(domains, op_types, strict=True)).items():
        counts[op_label(domain, op_type)] += count  # "" and "ai.onnx" share a label
    holders = [model.graph.node[position] for position in holder_positions(op_types, domains)]
    initializers = len(model.graph.initializer)
    for graph in nested_graphs(holders):
        initializers += len(graph.initializer)
        counts.update(op_label(n.domain, n.op_type) for n in graph.node)
    functions = [node for function in model.functions for node in function.node]
    for body in [functions, *(graph.node for graph in nested_graphs(functions))]:
        counts.update(op_label(n.domain, n.op_type) for n in body)
    return ModelStats(sorted_counts(counts.items()), initializers, _proto_opset(model), None)


def stats_after(
    model: onnx.ModelProto,
    before: ModelStats,
    replaced: Iterable[str],
    written: Iterable[str],
    initializers_added: int,
) -> ModelStats:
    """Stats of ``model`` after a splice: ``replaced`` op labels out, ``written`` in.

    ``initializers_added`` is the change in main-graph initializers. Neither set holds
    subgraphs (a holder in the neighbourhood sends the model down the whole-model path),
    so only main-graph counts change.
    """
    counts = Counter(before.ops)
    counts.subtract(replaced)
    counts.update(written)
    initializers = before.initializers + initializers_added
    return ModelStats(sorted_counts(counts.items()), initializers, _proto_opset(model), None)
