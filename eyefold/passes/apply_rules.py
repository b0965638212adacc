"""Apply eyefold's rewrite rules next to every EyeLike and identity constant, in every scope.

onnxscript's ``RewriteRuleSet.apply_to_model`` tries every rule on every node, which costs
seconds on graphs of a few thousand nodes. Every eyefold pattern contains an EyeLike node
or a constant identity matrix, and its root (the node whose output it replaces) is that
EyeLike or one of its direct consumers. So this pass collects those candidate roots in
one linear walk, tries the rules only there, and after each rewrite only the new nodes
and their consumers: beyond that walk, the cost grows with the number of EyeLike nodes
and identity constants, not with the graph.
Rewrites use the rules' own ``try_rewrite`` and onnx-ir's
``replace_nodes_and_values``, as onnxscript's driver does.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import onnx_ir as ir

from eyefold.core.constants import constant_tensor, is_identity_array
from eyefold.core.dead_code import remove_dead_producers
from eyefold.core.domains import DEFAULT_DOMAINS
from eyefold.core.scopes import Scope, iter_scopes
from eyefold.rule_registry import load_spec, select_rule_infos
from eyefold.rules import Phase, RuleInfo, RuleSpec

if TYPE_CHECKING:
    from onnxscript.rewriter import RewriteRule

__all__ = ["DEFAULT_MAX_ROUNDS", "RULE_TAG_KEY", "ApplyEyeLikeRulesPass", "RulesResult"]

logger = logging.getLogger(__name__)

# Rewrites in one scope come in rounds: the candidates, then the nodes the previous round
# created and their consumers. Every rule removes at least one node or replaces a MatMul by
# an Identity no rule matches, so real chains settle in two or three rounds; the bound only
# guards against a rule pair that would undo each other.
DEFAULT_MAX_ROUNDS = 8

# Metadata key naming the rule that created a node.
RULE_TAG_KEY = "pkg.eyefold.rule"


def _body(graph_or_function: ir.Graph | ir.Function) -> ir.Graph:
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


def _candidate_roots(
    scopes: Sequence[Scope], constant_dtypes: frozenset[ir.DataType]
) -> dict[int, list[ir.Node]]:
    """Candidate root nodes per graph body (keyed by id), in graph order of discovery.

    Roots are the consumers of EyeLike outputs and the EyeLike nodes, plus
    the consumers of constants of ``constant_dtypes`` equal to an identity matrix. A
    consumer may sit in a subgraph of the graph that holds the anchor, so roots are
    grouped by the graph they actually belong to.
    """
    anchors: list[ir.Value] = []
    roots: list[ir.Node] = []
    for scope in scopes:
        for node in scope.graph:
            if node.domain not in DEFAULT_DOMAINS:
                continue
            if node.op_type == "EyeLike":
                # Consumers first: a pattern rooted downstream (Cast(EyeLike(Cast(x))))
                # covers more than one rooted at the EyeLike itself.
                roots.extend(c for v in node.outputs for c in v.consumers())
                roots.append(node)
            elif constant_dtypes and node.op_type == "Constant":
                anchors.extend(
                    v for v in node.outputs if _is_identity_constant(v, constant_dtypes)
                )
        if constant_dtypes and isinstance(scope.graph, ir.Graph):
            anchors.extend(
                v
                for v in scope.graph.initializers.values()
                if _is_identity_constant(v, constant_dtypes)
            )
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


def _next_candidates(
    new_nodes: Iterable[ir.Node], new_values: Iterable[ir.Value]
) -> list[ir.Node]:
    found = list(new_nodes)
    for value in new_values:
        found.extend(value.consumers())
    for node in list(found):
        for output in node.outputs:
            found.extend(output.consumers())
    return found


@dataclasses.dataclass
class RulesResult(ir.passes.PassResult):
    """The pass result, with how often each selected rule fired (registry order)."""

    hits: dict[str, int] = dataclasses.field(default_factory=dict)


class ApplyEyeLikeRulesPass(ir.passes.InPlacePass):
    """Applies the selected rewrite rules in the main graph, subgraphs and functions.

    Each scope is rewritten until no rule fires (at most ``max_rounds`` rounds). Nodes a
    rewrite leaves without users (a bypassed EyeLike, an identity initializer, the chain
    that fed them) are removed; graph inputs and outputs never are.

    A rule (and onnxscript) is imported only once a candidate node could match it by op
    type (:meth:`RuleInfo.may_match`), so a model with nothing to rewrite imports neither.

    Attributes:
        infos: the selected rules' registry entries, in registry order.
        max_rounds: bound on the rewrite rounds per scope.
    """

    def __init__(
        self,
        *,
        rules: Sequence[str] | None = None,
        relaxed: bool = False,
        phase: Phase | None = None,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
    ) -> None:
        """Selects the rules (see ``eyefold.rule_registry.select_rules``).

        Raises:
            UnknownRuleError: an unknown rule name, or a relaxed one without ``relaxed``.
        """
        super().__init__()
        self.infos: tuple[RuleInfo, ...] = select_rule_infos(
            rules, relaxed=relaxed, phase=phase
        )
        self.max_rounds = max_rounds
        self._specs: dict[str, RuleSpec] = {}

    @property
    def specs(self) -> tuple[RuleSpec, ...]:
        """The selected rules, in registry order (imports them)."""
        return tuple(self._spec(info) for info in self.infos)

    def _spec(self, info: RuleInfo) -> RuleSpec:
        spec = self._specs.get(info.name)
        if spec is None:
            spec = self._specs[info.name] = load_spec(info)
        return spec

    def call(self, model: ir.Model) -> RulesResult:
        """Rewrites every scope of ``model`` in place."""
        hits = dict.fromkeys((info.name for info in self.infos), 0)
        if not self.infos:
            return RulesResult(model, modified=False, hits=hits)
        scopes = list(iter_scopes(model))
        constant_dtypes = frozenset().union(*(i.constant_dtypes for i in self.infos))
        roots = _candidate_roots(scopes, constant_dtypes)
        for scope in scopes:
            candidates = roots.get(id(_body(scope.graph)))
            if candidates:
                self._rewrite_scope(model, scope, candidates, hits)
        total = sum(hits.values())
        logger.info("EyeLike rewrite rules fired %d times: %s", total, hits)
        return RulesResult(model, modified=bool(total), hits=hits)

    def _rewrite_scope(
        self, model: ir.Model, scope: Scope, candidates: list[ir.Node], hits: dict[str, int]
    ) -> None:
        body = _body(scope.graph)
        work = candidates
        for _ in range(self.max_rounds):
            following: list[ir.Node] = []
            for node in work:
                if node.graph is not body:
                    continue  # removed (or never here) since it was queued
                following.extend(self._try_rules(model, scope.graph, node, hits))
            seen: set[int] = set()
            work = [n for n in following if not (id(n) in seen or seen.add(id(n)))]
            if not work:
                return
        logger.warning(
            "rewrite rules in %s still matched after %d rounds; stopped there",
            scope.path,
            self.max_rounds,
        )

    def _try_rules(
        self,
        model: ir.Model,
        graph_or_function: ir.Graph | ir.Function,
        node: ir.Node,
        hits: dict[str, int],
    ) -> list[ir.Node]:
        """Applies the first rule that matches at ``node``; returns the next candidates."""
        for info in self.infos:
            if not info.may_match(node):
                continue
            spec = self._spec(info)
            saved = _snapshot_opsets(model, graph_or_function)
            delta = spec.rule.try_rewrite(model, graph_or_function, node)
            if delta is None:
                continue
            _restore_opsets(saved)
            _apply(graph_or_function, node, spec.rule, delta)
            for new_node in delta.new_nodes:
                new_node.metadata_props[RULE_TAG_KEY] = spec.name
            hits[spec.name] += 1
            return _next_candidates(delta.new_nodes, delta.new_outputs)
        return []


def _snapshot_opsets(
    model: ir.Model, graph_or_function: ir.Graph | ir.Function
) -> list[tuple[dict[str, int], dict[str, int]]]:
    tables = [model.graph.opset_imports, graph_or_function.opset_imports]
    return [(table, dict(table)) for table in tables]


def _restore_opsets(saved: list[tuple[dict[str, int], dict[str, int]]]) -> None:
    """Undoes onnxscript's opset bookkeeping for a rewrite.

    ``try_rewrite`` records the default domain with version 1 in any graph that does not
    import it under the spelling "": every subgraph (which imports nothing) and a model
    that spells it "ai.onnx". eyefold's rules only emit default-domain ops, which the
    model already imports, so the tables stay as they were.
    """
    for table, before in saved:
        if table != before:
            table.clear()
            table.update(before)


def _apply(
    graph_or_function: ir.Graph | ir.Function,
    root: ir.Node,
    rule: RewriteRule,
    delta,  # onnxscript's ReplacementSubgraph
) -> None:
    if delta.new_initializers:
        # No eyefold rule creates initializers; a future one must register them here.
        raise AssertionError(f"rule {rule.name} created initializers")
    removed_inputs = [v for n in delta.match.nodes for v in n.inputs if v is not None]
    ir.convenience.replace_nodes_and_values(
        graph_or_function,
        root,
        delta.match.nodes if rule.remove_nodes else [],
        delta.new_nodes,
        delta.match.outputs,
        delta.new_outputs,
    )
    remove_dead_producers(list(removed_inputs))
