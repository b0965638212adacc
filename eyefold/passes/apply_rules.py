"""Apply eyefold's rewrite rules next to every EyeLike and identity constant, in every scope.

onnxscript's ``RewriteRuleSet.apply_to_model`` tries every rule on every node, which costs
seconds on graphs of a few thousand nodes. Every eyefold pattern contains an EyeLike node
or a constant identity matrix, and its root (the node whose output it replaces) is that
EyeLike or one of its consumers at most as many nodes down as the rule's declared reach
(``RuleSpec.reach.depth``) allows. So this pass collects
those candidate roots in one linear walk (:mod:`eyefold.rewriting.candidates`), tries the
rules only there, and after each rewrite only the new nodes and their consumers: beyond
that walk, the cost grows with the number of EyeLike nodes and identity constants, not
with the graph. Rewrites use the rules' own ``try_rewrite`` and onnx-ir's
``replace_nodes_and_values``, as onnxscript's driver does.

Where no EyeLike or identity constant has a neighbour one of the selected rules looks at
(``RuleSpec.reach.neighbours``), no rule can match: the pass then tries none, and the
rules (and onnxscript, about 0.15 s to import) are never built.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import onnx_ir as ir

from eyefold.core.dead_code import remove_dead_producers
from eyefold.core.limits import DEFAULT_SIZE_LIMIT_BYTES
from eyefold.core.metadata_keys import RULE_TAG_KEY
from eyefold.core.origins import inherit_origins, removed_origins
from eyefold.core.run_findings import RunFindings
from eyefold.core.scopes import Scope, iter_scopes
from eyefold.rewriting.candidates import candidate_roots, graph_body, next_candidates
from eyefold.rewriting.cost import RewriteJudge
from eyefold.rewriting.declines import DeclineTracer, RuleDeclines, origins_above
from eyefold.rewriting.matcher_state import (
    discard,
    forget_last_match,
    restore_opsets,
    snapshot_opsets,
)
from eyefold.rule_registry import select_rules
from eyefold.rules import Phase, RuleSpec
from eyefold.runtime.support import EyeLikeSupport, get_support, other_profiles

if TYPE_CHECKING:
    from onnxscript.rewriter import RewriteRule

__all__ = [
    "DEFAULT_MAX_ROUNDS",
    "ApplyEyeLikeRulesPass",
    "RulesResult",
]

logger = logging.getLogger(__name__)

# Targets after which the rules judge no runtime: onnxruntime's legalization (the pricing
# it always had) and TensorRT's lowering, whose primitive ops run everywhere.
_UNJUDGED_TARGETS = ("onnxruntime", "tensorrt")

# Why a relaxed rule that would rewrite an EyeLike did not run.
WITHHELD_REASON = "relaxed (not exact for inf, NaN and -0.0): it runs with relaxed=True"

# Rewrites in one scope come in rounds: the candidates, then the nodes the previous round
# created and their consumers. Every rule removes at least one node or replaces a MatMul by
# an Identity no rule matches, so real chains settle in two or three rounds; the bound only
# guards against a rule pair that would undo each other.
DEFAULT_MAX_ROUNDS = 8


@dataclasses.dataclass
class RulesResult(ir.passes.PassResult):
    """The pass result.

    Attributes:
        hits: how often each selected rule fired (registry order).
        declined: how often each rule matched but the cost model refused the rewrite (it
            would have left an EyeLike the runtime cannot run, or one that no longer folds).
        removed: census number of each input EyeLike the rewrites removed -> the rule.
        declines: per EyeLike (census number), the rules that looked at it and declined
            (their check's reason, or the cost model's) and never fired there.
        withheld: per EyeLike (census number), the relaxed rules that would rewrite it
            and did not run only because ``relaxed`` was off.
    """

    hits: dict[str, int] = dataclasses.field(default_factory=dict)
    declined: dict[str, int] = dataclasses.field(default_factory=dict)
    removed: dict[int, str] = dataclasses.field(default_factory=dict)
    declines: RuleDeclines = dataclasses.field(default_factory=RuleDeclines)
    withheld: dict[int, list[str]] = dataclasses.field(default_factory=dict)

    def report_into(self, findings: RunFindings) -> None:
        """Rule hits, refused rewrites, removed EyeLike nodes, declines per EyeLike."""
        for number, names in self.withheld.items():
            reasons = findings.rule_declines.setdefault(number, {})
            reasons.update(dict.fromkeys(names, WITHHELD_REASON))
            for name in names:
                findings.withheld[name] = findings.withheld.get(name, 0) + 1
        findings.hits.update(self.hits)
        findings.declined.update({k: v for k, v in self.declined.items() if v})
        findings.removed_by.update(
            {n: f"removed by rule {r}" for n, r in self.removed.items()}
        )
        for number, reasons in self.declines.standing().items():
            findings.rule_declines.setdefault(number, {}).update(reasons)


class ApplyEyeLikeRulesPass(ir.passes.InPlacePass):
    """Applies the selected rewrite rules in the main graph, subgraphs and functions.

    Each scope is rewritten until no rule fires (at most ``max_rounds`` rounds). Nodes a
    rewrite leaves without users (a bypassed EyeLike, an identity initializer, the chain
    that fed them) are removed; graph inputs and outputs never are. A rewrite the cost
    model refuses (:mod:`eyefold.rewriting.cost`) is not applied: rules never make an
    EyeLike the runtime cannot run, nor one that no longer folds.

    Attributes:
        specs: the selected rules, in registry order.
        max_rounds: bound on the rewrite rounds per scope.
        size_limit_bytes: the fold limit the cost model prices against.
        fold: whether folding runs after the rules.
        target_runtime: the runtime legalization targets afterwards, or None (then
            onnxruntime's table, cached or built in, decides what runs; for openvino,
            tract and tvm the other known runtimes' tables do).
    """

    def __init__(
        self,
        *,
        rules: Sequence[str] | None = None,
        relaxed: bool = False,
        phase: Phase | None = None,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
        size_limit_bytes: int = DEFAULT_SIZE_LIMIT_BYTES,
        fold: bool = True,
        target_runtime: str | None = None,
    ) -> None:
        """Selects the rules (see ``eyefold.rule_registry.select_rules``).

        Raises:
            UnknownRuleError: an unknown rule name, or a relaxed one without ``relaxed``.
        """
        super().__init__()
        self.specs: tuple[RuleSpec, ...] = select_rules(rules, relaxed=relaxed, phase=phase)
        # The relaxed rules the default selection leaves out: where one would rewrite an
        # EyeLike, the report says so (only relaxed=True stands in the way).
        self.withheld: tuple[RuleSpec, ...] = ()
        if rules is None and not relaxed:
            everything = select_rules(None, relaxed=True, phase=phase)
            self.withheld = tuple(s for s in everything if s not in self.specs)
        self.max_rounds = max_rounds
        self.size_limit_bytes = size_limit_bytes
        self.fold = fold
        self.target_runtime = target_runtime

    def call(self, model: ir.Model) -> RulesResult:
        """Rewrites every scope of ``model`` in place."""
        names = [spec.name for spec in self.specs]
        result = RulesResult(
            model, False, dict.fromkeys(names, 0), dict.fromkeys(names, 0), {}
        )
        scopes = list(iter_scopes(model))
        if self.specs:
            self._rewrite(model, scopes, result)
        if self.withheld:
            self._find_withheld(model, list(iter_scopes(model)), result)
        return result

    def _rewrite(self, model: ir.Model, scopes: list[Scope], result: RulesResult) -> None:
        """Applies the selected rules wherever they match and the cost model allows."""
        roots = candidate_roots(scopes, self.specs)
        if roots is None:
            # No rule can match: none is built, onnxscript is not imported, and no
            # runtime's table is looked up.
            return
        judge = RewriteJudge(_judged(self.target_runtime), self.size_limit_bytes, self.fold)
        try:
            for scope in scopes:
                candidates = roots.get(id(graph_body(scope.graph)))
                if candidates:
                    self._rewrite_scope(model, scope, candidates, _Run(judge, result))
        finally:
            forget_last_match(self.specs)
        result.modified = bool(sum(result.hits.values()))
        logger.info("rules fired: %s; declined: %s", result.hits, result.declined)

    def _find_withheld(
        self, model: ir.Model, scopes: list[Scope], result: RulesResult
    ) -> None:
        """Which EyeLike nodes a withheld relaxed rule would rewrite; nothing is changed.

        Only EyeLike nodes are looked at, not identity constants: a relaxed rule next to a
        folded EyeLike gains the user no EyeLike less, so it is not worth a line.
        """
        eyelike_only = [
            dataclasses.replace(spec, constant_dtypes=frozenset()) for spec in self.withheld
        ]
        roots = candidate_roots(scopes, eyelike_only)
        if roots is None:
            return
        try:
            for scope in scopes:
                for node in roots.get(id(graph_body(scope.graph)), []):
                    for spec in self.withheld:
                        saved = snapshot_opsets(model, scope.graph)
                        delta = spec.rule.try_rewrite(model, scope.graph, node)  # type: ignore[arg-type]
                        restore_opsets(saved)
                        if delta is None:
                            continue
                        discard(delta.new_nodes)
                        for number in origins_above(node, spec.reach.depth):
                            named = result.withheld.setdefault(number, [])
                            if spec.name not in named:
                                named.append(spec.name)
        finally:
            forget_last_match(self.withheld)

    def _rewrite_scope(
        self, model: ir.Model, scope: Scope, candidates: list[ir.Node], run: _Run
    ) -> None:
        body = graph_body(scope.graph)
        work = candidates
        for _ in range(self.max_rounds):
            following: list[ir.Node] = []
            for node in work:
                if node.graph is not body:
                    continue  # removed (or never here) since it was queued
                following.extend(self._try_rules(model, scope, node, run))
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
        self, model: ir.Model, scope: Scope, node: ir.Node, run: _Run
    ) -> list[ir.Node]:
        """Applies the first rule that matches at ``node`` and that the cost model allows.

        Returns:
            The next candidates: the new nodes and their consumers.
        """
        for spec in self.specs:
            saved = snapshot_opsets(model, scope.graph)
            tracer = DeclineTracer()
            delta = spec.rule.try_rewrite(model, scope.graph, node, tracer=tracer)  # type: ignore[arg-type]
            restore_opsets(saved)
            declines = run.result.declines
            if delta is None:
                if tracer.reason is not None:
                    origins = origins_above(node, spec.reach.depth)
                    declines.decline(origins, spec.name, tracer.reason)
                continue
            origins = origins_above(node, spec.reach.depth)
            before = run.judge.cost(delta.match.nodes, scope)
            after = run.judge.cost(delta.new_nodes, scope)
            if not before.allows(after):
                run.result.declined[spec.name] += 1
                declines.decline(origins, spec.name, run.judge.why_not(before, after))
                discard(delta.new_nodes)
                continue
            declines.fire(origins, spec.name)
            for number in _apply(scope.graph, node, spec.rule, delta):
                run.result.removed[number] = spec.name
            for new_node in delta.new_nodes:
                new_node.metadata_props[RULE_TAG_KEY] = spec.name
            run.result.hits[spec.name] += 1
            return next_candidates(delta.new_nodes, delta.new_outputs)
        return []


@dataclasses.dataclass(frozen=True)
class _Run:
    """One call's judge and the result it fills in."""

    judge: RewriteJudge
    result: RulesResult


def _apply(
    graph_or_function: ir.Graph | ir.Function,
    root: ir.Node,
    rule: RewriteRule,
    delta,  # onnxscript's ReplacementSubgraph
) -> list[int]:
    """Applies one rewrite; returns the census numbers of the input EyeLike nodes it removed.

    A replacement that is an existing graph input, initializer or outer-scope value keeps
    its own name (onnx-ir's replacement would rename it to the replaced value's): the
    rules return such a value only when the replaced one is not a graph output.
    """
    if delta.new_initializers:
        # No eyefold rule creates initializers; a future one must register them here.
        raise AssertionError(f"rule {rule.name} created initializers")
    removed_inputs = [v for n in delta.match.nodes for v in n.inputs if v is not None]
    old_values, new_values = [], []
    created = {id(node) for node in delta.new_nodes}
    for old, new in zip(delta.match.outputs, delta.new_outputs, strict=True):
        existing = id(new.producer()) not in created
        keeps_name = new.is_graph_input() or new.is_initializer() or new.graph is not old.graph
        if existing and keeps_name and not old.is_graph_output():
            old.replace_all_uses_with(new)
        else:
            old_values.append(old)
            new_values.append(new)
    gone = inherit_origins(delta.match.nodes if rule.remove_nodes else [], delta.new_nodes)
    ir.convenience.replace_nodes_and_values(
        graph_or_function,
        root,
        delta.match.nodes if rule.remove_nodes else [],
        delta.new_nodes,
        old_values,
        new_values,
    )
    return gone + removed_origins(remove_dead_producers(removed_inputs))


def _judged(target_runtime: str | None) -> tuple[EyeLikeSupport, ...]:
    """The runtimes whose runnability the rules may not reduce (see rewriting.cost).

    Tables only, cached or built in: never a session.
    """
    if target_runtime is None:
        return (get_support("onnxruntime", probe=False),)
    if target_runtime in _UNJUDGED_TARGETS:
        return ()
    return tuple(profile.support for profile in other_profiles(target_runtime))
