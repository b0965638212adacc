"""Where the rules pass tries the rules, and whether any can match at all.

Every eyefold pattern contains an EyeLike node or an identity matrix (a constant, or
dynamo's Range/Equal identity), and its
root (the node whose output it replaces) is that EyeLike or one of its consumers at most
``RuleSpec.reach.depth`` nodes down: the exporters' masked-sum diagonal is rooted at the
ReduceSum three nodes down (EyeLike -> Cast/CastLike -> Mul -> ReduceSum). So the
candidates are collected in one linear walk, and after each rewrite only the new nodes
and their consumers are. Each pattern also needs, next to its EyeLike or identity
constant, a node of one of its ``reach.neighbours`` ops: where there is none, no rule
can match, and :func:`candidate_roots` says so before any rule is built.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import onnx_ir as ir

from eyefold.core.constants import constant_tensor, is_identity_array
from eyefold.core.domains import DEFAULT_DOMAINS
from eyefold.core.range_identity import RANGE_IDENTITY_OPS, range_identity
from eyefold.core.rule_spec import RuleSpec
from eyefold.core.scopes import Scope

__all__ = ["candidate_roots", "graph_body", "next_candidates"]


def graph_body(graph_or_function: ir.Graph | ir.Function) -> ir.Graph:
    """The graph of a graph or function scope."""
    return (
        graph_or_function.graph
        if isinstance(graph_or_function, ir.Function)
        else graph_or_function
    )


def _is_identity_constant(value: ir.Value, dtypes: frozenset[ir.DataType]) -> bool:
    """A constant of one of ``dtypes`` equal to an identity matrix.

    Type and shape are checked before any data is read; a proto-backed tensor builds its
    shape on every access, so the value's own shape is asked first.
    """
    shape = value.shape
    if shape is not None and (len(shape) != 2 or shape[0] != shape[1]):
        return False
    if value.dtype is not None and value.dtype not in dtypes:
        return False
    tensor = constant_tensor(value)
    if tensor is None or tensor.dtype not in dtypes:
        return False
    dims = tensor.shape.dims
    return len(dims) == 2 and dims[0] == dims[1] and is_identity_array(tensor.numpy())


def _downstream(node: ir.Node, seen: set[int], depth: int) -> list[ir.Node]:
    """Consumers of ``node`` up to ``depth`` levels down, the deepest level first.

    A node already collected for another EyeLike (``seen``) is not walked again, so the
    walk stays linear in the graph size however many EyeLike nodes share consumers.
    """
    levels: list[list[ir.Node]] = []
    frontier = [node]
    for _ in range(depth):
        level = []
        for current in frontier:
            for consumer in (c for v in current.outputs for c in v.consumers()):
                if id(consumer) not in seen:
                    seen.add(id(consumer))
                    level.append(consumer)
        if not level:
            break
        levels.append(level)
        frontier = level
    return [n for level in reversed(levels) for n in level]


def _has_neighbour(
    eyelikes: Iterable[ir.Node], anchors: Iterable[ir.Value], ops: frozenset[str]
) -> bool:
    """Whether an EyeLike's input producer or a consumer of it or of an anchor is in ops."""
    for node in eyelikes:
        source = node.inputs[0] if node.inputs else None
        producer = source.producer() if source is not None else None
        if producer is not None and producer.op_type in ops:
            return True
        if any(c.op_type in ops for v in node.outputs for c in v.consumers()):
            return True
    return any(c.op_type in ops for value in anchors for c in value.consumers())


def candidate_roots(
    scopes: Sequence[Scope], specs: Sequence[RuleSpec]
) -> dict[int, list[ir.Node]] | None:
    """Candidate root nodes per graph body (keyed by id), in graph order of discovery.

    Roots are the consumers of EyeLike outputs and of dynamo's Range/Equal identities (up
    to the deepest of the rules' reaches down) and the EyeLike nodes, plus the consumers
    of constants of the rules' constant types equal to an identity matrix. A consumer
    may sit in a subgraph of the graph that
    holds the anchor, so roots are grouped by the graph they actually belong to. None
    when no EyeLike or identity constant has a neighbour a rule looks at.
    """
    constant_dtypes = frozenset().union(*(s.constant_dtypes for s in specs))
    depth = max(spec.reach.depth for spec in specs)
    anchors: list[ir.Value] = []
    eyelikes: list[ir.Node] = []
    roots: list[ir.Node] = []
    walked: set[int] = set()
    for scope in scopes:
        for node in scope.graph:
            if node.domain not in DEFAULT_DOMAINS:
                continue
            if node.op_type == "EyeLike":
                eyelikes.append(node)
                # Deepest consumers first: a pattern rooted downstream
                # (Cast(EyeLike(Cast(x))), a masked sum) covers more than one rooted nearer.
                roots.extend(_downstream(node, walked, depth))
                roots.append(node)
            elif constant_dtypes and node.op_type == "Constant":
                anchors.extend(
                    v for v in node.outputs if _is_identity_constant(v, constant_dtypes)
                )
            elif node.op_type in RANGE_IDENTITY_OPS and range_identity(node.outputs[0]):
                # Built at run time as an EyeLike is: its consumers are tried as an
                # EyeLike's are (a masked sum reads it as its mask), and a rule taking
                # identity constants of its type reads it as one.
                anchors.append(node.outputs[0])
                roots.extend(_downstream(node, walked, depth))
        if constant_dtypes and isinstance(scope.graph, ir.Graph):
            anchors.extend(
                v
                for v in scope.graph.initializers.values()
                if _is_identity_constant(v, constant_dtypes)
            )
    neighbours = frozenset().union(*(spec.reach.neighbours for spec in specs))
    if not _has_neighbour(eyelikes, anchors, neighbours):
        return None
    for value in anchors:
        roots.extend(value.consumers())
    grouped: dict[int, list[ir.Node]] = {}
    seen: set[int] = set()
    for node in roots:
        if id(node) in seen or node.graph is None:
            continue
        seen.add(id(node))
        grouped.setdefault(id(node.graph), []).append(node)
    return grouped


def next_candidates(
    new_nodes: Iterable[ir.Node], new_values: Iterable[ir.Value]
) -> list[ir.Node]:
    """After a rewrite: the new nodes, the consumers of its new values and of those nodes."""
    found = list(new_nodes)
    for value in new_values:
        found.extend(value.consumers())
    for node in list(found):
        for output in node.outputs:
            found.extend(output.consumers())
    return found
