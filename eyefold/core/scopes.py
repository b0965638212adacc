"""Every place an EyeLike node can live: the main graph, subgraphs at any depth, functions.

``ir.traversal.RecursiveGraphIterator`` visits subgraphs but not model-local functions, and
it does not say where a node sits, which the report needs. So eyefold walks scopes itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import onnx_ir as ir

from eyefold.core.domains import DEFAULT_DOMAINS, default_opset, function_label

__all__ = [
    "Scope",
    "is_eyelike",
    "iter_nodes",
    "iter_scopes",
    "read_values",
    "subgraphs_of",
]


@dataclasses.dataclass(frozen=True)
class Scope:
    """A graph or function body, with where it sits and which opset its nodes use.

    Attributes:
        graph: the graph (main or subgraph) or the function whose nodes are listed.
        path: a readable location, e.g. ``main``, ``main/If_3.then_branch``,
            ``function pkg.x::Fn``.
        opset: default-domain opset version in force (None when not imported).
        function: the model-local function this scope belongs to, if any.
        top_node: for a subgraph, the main-graph (or function-body) node that holds it.
    """

    graph: ir.Graph | ir.Function
    path: str
    opset: int | None
    function: ir.Function | None = None
    top_node: ir.Node | None = None

    @property
    def is_function(self) -> bool:
        """True in a function body or its subgraphs, which cannot hold initializers."""
        return self.function is not None


def subgraphs_of(node: ir.Node) -> list[tuple[str, ir.Graph]]:
    """(label, graph) for every graph attribute of ``node``; GRAPHS entries get ``[i]``."""
    # The common case, checked first (scope walks visit every node). Attributes is a
    # collections.UserDict: its ``data`` dict answers without the Mapping-protocol calls.
    attributes = node.attributes.data
    if not attributes:
        return []
    found: list[tuple[str, ir.Graph]] = []
    for attr in attributes.values():
        if attr.type == ir.AttributeType.GRAPH:
            found.append((attr.name, attr.as_graph()))
        elif attr.type == ir.AttributeType.GRAPHS:
            found.extend((f"{attr.name}[{i}]", g) for i, g in enumerate(attr.as_graphs()))
    return found


def read_values(node: ir.Node) -> Iterator[ir.Value]:
    """What ``node`` reads: its inputs and, through its subgraphs, outer-scope values.

    Depth first; the values its subgraphs compute themselves are among them too.
    """
    yield from (v for v in node.inputs if v is not None)
    for _, subgraph in subgraphs_of(node):
        for inner in subgraph:
            yield from read_values(inner)


def _node_label(node: ir.Node, index: int) -> str:
    return node.name or f"{node.op_type}_{index}"


def _subscopes(parent: Scope, top_node: ir.Node | None) -> Iterator[Scope]:
    for index, node in enumerate(parent.graph):
        holder = top_node if top_node is not None else node
        for label, subgraph in subgraphs_of(node):
            scope = Scope(
                graph=subgraph,
                path=f"{parent.path}/{_node_label(node, index)}.{label}",
                opset=parent.opset,
                function=parent.function,
                top_node=holder,
            )
            yield scope
            yield from _subscopes(scope, holder)


def iter_scopes(model: ir.Model) -> Iterator[Scope]:
    """Yields the main graph, its subgraphs (depth first), then each function and its own."""
    main = Scope(graph=model.graph, path="main", opset=default_opset(model.opset_imports))
    yield main
    yield from _subscopes(main, None)
    for function in model.functions.values():
        scope = Scope(
            graph=function,
            path=function_label(function),
            opset=default_opset(function.opset_imports) or main.opset,
            function=function,
        )
        yield scope
        yield from _subscopes(scope, None)


def is_eyelike(node: ir.Node) -> bool:
    """True for an EyeLike node of the default domain."""
    return node.op_type == "EyeLike" and node.domain in DEFAULT_DOMAINS


def iter_nodes(model: ir.Model, op_type: str = "EyeLike") -> Iterator[tuple[Scope, ir.Node]]:
    """Yields (scope, node) for every default-domain node of ``op_type`` in the model."""
    for scope in iter_scopes(model):
        for node in list(scope.graph):
            if node.op_type == op_type and node.domain in DEFAULT_DOMAINS:
                yield scope, node
