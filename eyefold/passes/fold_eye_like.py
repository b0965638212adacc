"""Replace every statically known EyeLike by a constant computed with the bundled kernel."""

from __future__ import annotations

import dataclasses
import logging

import onnx_ir as ir

from eyefold import kernel
from eyefold.core.analysis import EyeLikeAnalysis, analyze_eyelike, node_label
from eyefold.core.dead_code import remove_dead_producers
from eyefold.core.limits import DEFAULT_SIZE_LIMIT_BYTES
from eyefold.core.metadata_keys import BAKED_IN_KEY
from eyefold.core.origins import removed_origins
from eyefold.core.run_findings import FED_A_FOLD_REASON, RunFindings
from eyefold.core.scopes import Scope, is_eyelike, iter_scopes
from eyefold.errors import SizeLimitError

__all__ = [
    "UNUSED_REASON",
    "FoldEyeLikePass",
    "FoldResult",
    "graph_inputs_feeding",
]

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class FoldResult(ir.passes.PassResult):
    """The pass result, with the analysis of every node folded (in visiting order)."""

    folded: list[EyeLikeAnalysis] = dataclasses.field(default_factory=list)
    # Census number -> why, for input EyeLike nodes removed instead of folded: unused
    # ones, and those that only fed folded ones.
    removed: dict[int, str] = dataclasses.field(default_factory=dict)

    def report_into(self, findings: RunFindings) -> None:
        """The folded nodes, and those removed instead of folded."""
        findings.folded = self.folded
        findings.removed_by.update(self.removed)


_NO_INPUTS: frozenset[str] = frozenset()


def _has_static_dim(value: ir.Value) -> bool:
    """Whether ``value`` is a graph input declared with at least one static dim."""
    shape = value.shape
    return (
        value.is_graph_input()
        and shape is not None
        and any(isinstance(dim, int) for dim in shape.dims)
    )


def graph_inputs_feeding(value: ir.Value, memo: dict[int, frozenset[str]]) -> frozenset[str]:
    """Names of the graph inputs (of any scope) with a static dim ``value`` comes from.

    A fold resting on one of them may bake that input's declared shape into the model,
    which the report must say. An input whose dims are all symbolic (or undeclared) is
    left out: no static dim of it can be baked in. ``memo`` is shared across calls so a
    pass stays linear, and a value with one parent shares its parent's set instead of
    copying it.
    """
    stack = [value]
    while stack:
        current = stack[-1]
        if id(current) in memo:
            stack.pop()
            continue
        producer = current.producer()
        if current.is_graph_input() or producer is None:
            static = _has_static_dim(current)
            memo[id(current)] = frozenset((current.name or "",)) if static else _NO_INPUTS
            stack.pop()
            continue
        parents = [v for v in producer.inputs if v is not None]
        pending = [p for p in parents if id(p) not in memo]
        if pending:
            stack.extend(pending)
            continue
        sets = [memo[id(p)] for p in parents]
        memo[id(current)] = sets[0] if len(sets) == 1 else _NO_INPUTS.union(*sets)
        stack.pop()
    return memo[id(value)]


def _fold(scope: Scope, analysis: EyeLikeAnalysis) -> None:
    """Replaces the node by a constant; its input's producers are left for the caller."""
    node = analysis.node
    rows_cols = analysis.static_dims
    assert rows_cols is not None and analysis.dtype is not None
    try:
        array = kernel.eye(*rows_cols, k=analysis.k, dtype=analysis.dtype)
    except SizeLimitError as error:  # a size limit above what memory can hold
        raise SizeLimitError(
            f"EyeLike node {node_label(node)} in {scope.path}: {error}"
        ) from None
    output = node.outputs[0]
    name = output.name
    output.name = None  # free the name for the constant that takes its place
    tensor = ir.Tensor(array, dtype=analysis.dtype, name=name)
    if scope.is_function:
        # Functions (and graphs nested in them) cannot hold initializers.
        constant = ir.node("Constant", [], attributes={"value": tensor}, name=node.name)
        replacement = constant.outputs[0]
        scope.graph.insert_before(node, constant)
    else:
        replacement = ir.Value(
            name=None, shape=ir.Shape(array.shape), type=ir.TensorType(analysis.dtype)
        )
        replacement.const_value = tensor
    replacement.name = name
    replacement.shape = ir.Shape(array.shape)
    replacement.type = ir.TensorType(analysis.dtype)
    replacement.doc_string = output.doc_string
    replacement.metadata_props.update(output.metadata_props)
    output.replace_all_uses_with(replacement, replace_graph_outputs=True)
    scope.graph.remove(node, safe=True)
    if not scope.is_function:
        graph = scope.graph
        assert isinstance(graph, ir.Graph)
        graph.register_initializer(replacement)


def _baked_in(source: ir.Value, memo: dict[int, frozenset[str]]) -> list[str]:
    """The graph inputs whose declared shape folding ``source``'s EyeLike bakes in.

    Where inference made the shape static, the inputs whose static dims the walk back
    from it reached (:data:`BAKED_IN_KEY`); where the model declared it, every input with
    a static dim it is computed from.
    """
    walked = source.meta.get(BAKED_IN_KEY)
    if walked is not None:
        return list(walked)
    return sorted(graph_inputs_feeding(source, memo))


# Why an input EyeLike is gone after the fold pass (the report's reason for "removed").
UNUSED_REASON = "its output is never used: removed instead of folded"


def _is_unused(value: ir.Value) -> bool:
    return not value.is_graph_output() and not value.uses()


class FoldEyeLikePass(ir.passes.InPlacePass):
    """Folds EyeLike nodes whose output is statically known into constants.

    A node folds when its input shape is static, its output type is known and its output
    fits the size limit. In graphs the output value becomes an initializer of the same name
    (so consumers and graph outputs keep working); in functions it becomes a Constant node.
    Producers of the EyeLike input left without users are removed. A foldable node
    whose output nobody reads is removed instead: folding it would add an unused
    initializer of its full size.

    Attributes:
        size_limit_bytes: largest output, in bytes, that is folded.
    """

    def __init__(self, *, size_limit_bytes: int = DEFAULT_SIZE_LIMIT_BYTES) -> None:
        super().__init__()
        self.size_limit_bytes = size_limit_bytes

    def call(self, model: ir.Model) -> FoldResult:
        """Folds every foldable EyeLike in the main graph, subgraphs and functions."""
        folded: list[EyeLikeAnalysis] = []
        removed: dict[int, str] = {}
        memo: dict[int, frozenset[str]] = {}
        for scope in list(iter_scopes(model)):
            if scope.top_node is not None and scope.top_node.graph is None:
                continue  # its holder was removed as dead code by an earlier fold
            sources: dict[int, ir.Value] = {}
            for node in list(scope.graph):
                if not is_eyelike(node) or node.graph is None:
                    continue
                analysis = analyze_eyelike(node, scope, size_limit_bytes=self.size_limit_bytes)
                if analysis.action != "folded":
                    continue
                source = node.inputs[0]
                assert source is not None
                sources.setdefault(id(source), source)
                if _is_unused(node.outputs[0]):
                    scope.graph.remove(node, safe=True)
                    removed.update(dict.fromkeys(removed_origins([node]), UNUSED_REASON))
                    continue
                analysis.from_inputs = _baked_in(source, memo)
                _fold(scope, analysis)
                folded.append(analysis)
            dead = remove_dead_producers(list(sources.values()))
            removed.update(dict.fromkeys(removed_origins(dead), FED_A_FOLD_REASON))
        logger.info("EyeLike nodes folded: %d", len(folded))
        return FoldResult(model, modified=bool(folded), folded=folded, removed=removed)
