"""The before/after table's numbers for a ModelProto, without walking the main graph again.

The scan already read every main-graph node's op type (:class:`GraphIndex`), so the
counts before come from that column; subgraphs (only the holders' nodes) and function
bodies are walked, as the scan walked them. After the splice, the counts are those
before, less the nodes the neighbourhood replaced, plus the nodes written back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import onnx

from eyefold.core.domains import default_opset
from eyefold.core.model_stats import ModelStats, op_label, sorted_counts
from eyefold.core.proto_subgraphs import BodyColumns, nested_graphs
from eyefold.proto_path.scan import GraphIndex, looked_into

__all__ = ["proto_stats", "stats_after", "stats_before"]


def _nested(nodes: Iterable[onnx.NodeProto], counts: Counter[str]) -> int:
    """Counts the ops inside the subgraphs of ``nodes``; returns their initializers."""
    initializers = 0
    for sub in nested_graphs(nodes):
        initializers += len(sub.initializer)
        counts.update(op_label(n.domain, n.op_type) for n in sub.node)
    return initializers


def _opset(model: onnx.ModelProto) -> int | None:
    return default_opset({o.domain: o.version for o in model.opset_import})


def proto_stats(model: onnx.ModelProto, main: BodyColumns | None = None) -> ModelStats:
    """Stats of ``model`` from its main graph's op columns (``main``: read if None).

    For a proto about to be upgraded: the upgrade changes every node anyway, and the scan
    comes after it. Subgraphs are counted in the nodes the scan looks into, as
    :func:`stats_before` counts them.
    """
    main = BodyColumns.of(model.graph) if main is None else main
    ops, domains = main.op_types, main.domains
    counts = _op_counts(domains, ops)
    holders = [main.nodes[position] for position in looked_into(ops, domains)]
    initializers = len(model.graph.initializer) + _nested(holders, counts)
    return _with_functions(model, counts, initializers)


def _op_counts(domains: list[str], op_types: list[str]) -> Counter[str]:
    """The main graph's op counts by label, from its domain and op type columns."""
    counts: Counter[str] = Counter()
    for (domain, op_type), count in Counter(zip(domains, op_types, strict=True)).items():
        counts[op_label(domain, op_type)] += count  # "" and "ai.onnx" share a label
    return counts


def _with_functions(
    model: onnx.ModelProto, counts: Counter[str], initializers: int
) -> ModelStats:
    for function in model.functions:
        counts.update(op_label(n.domain, n.op_type) for n in function.node)
        _nested(function.node, counts)
    return ModelStats(sorted_counts(counts.items()), initializers, _opset(model), None)


def stats_before(model: onnx.ModelProto, index: GraphIndex) -> ModelStats:
    """Stats of ``model``, whose main graph ``index`` scanned (file bytes left unknown)."""
    counts = _op_counts(index.domains, index.op_types)
    holders = [model.graph.node[p] for p in sorted(index.holders)]
    initializers = len(model.graph.initializer) + _nested(holders, counts)
    return _with_functions(model, counts, initializers)


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
    return ModelStats(sorted_counts(counts.items()), initializers, _opset(model), None)
