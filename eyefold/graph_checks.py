"""Structural checks on a loaded model: known operators, no dangling references, no cycles.

onnx-ir resolves a node's inputs by name while it deserializes a graph. A name nothing
defines (a typo, a value removed by a broken tool) does not fail the load: onnx-ir logs a
warning and invents an input no graph declares. Nodes that read each other's outputs (a
cycle) load silently. Left alone, such a model is optimized and saved as if it were
valid. These checks turn either into one clear error naming the node and value.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import onnx
import onnx_ir as ir

from eyefold.errors import InvalidModelError
from eyefold.passes._scopes import DEFAULT_DOMAINS, Scope, iter_scopes, subgraphs_of

__all__ = ["check_structure", "held_load_warnings"]

_ONNX_IR_LOGGER = "onnx_ir"


class _Holder(logging.Filter):
    """Keeps the warnings of a logger aside instead of letting them through."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        self.records.append(record)
        return False


@contextlib.contextmanager
def held_load_warnings() -> Iterator[None]:
    """Holds onnx-ir's log records while a model loads and is checked.

    If the block raises (the model is rejected), the records are dropped: the error says
    what is wrong, in one line. Otherwise they are logged as usual.
    """
    holder = _Holder()
    loggers = [
        logging.getLogger(name)
        for name in (_ONNX_IR_LOGGER, *logging.root.manager.loggerDict)
        if name == _ONNX_IR_LOGGER or name.startswith(_ONNX_IR_LOGGER + ".")
    ]
    for logger in loggers:
        logger.addFilter(holder)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(holder)
    for record in holder.records:
        logging.getLogger(record.name).handle(record)


def _is_defined(value: ir.Value) -> bool:
    return value.producer() is not None or value.is_graph_input() or value.is_initializer()


def _label(node: ir.Node) -> str:
    return f"node {node.name!r} ({node.op_type})" if node.name else f"a {node.op_type} node"


def _read_values(node: ir.Node) -> Iterator[ir.Value]:
    """What ``node`` reads: its inputs and, through its subgraphs, outer-scope values."""
    yield from (v for v in node.inputs if v is not None)
    for _, subgraph in subgraphs_of(node):
        for inner in subgraph:
            yield from _read_values(inner)


def _find_cycle(graph: ir.Graph | ir.Function) -> ir.Node | None:
    """A node on a dependency cycle among the nodes of ``graph``, or None (iterative DFS)."""
    done: set[int] = set()
    for start in graph:
        if id(start) in done:
            continue
        on_path: set[int] = {id(start)}
        stack = [(start, _read_values(start))]
        while stack:
            node, reads = stack[-1]
            value = next(reads, None)
            if value is None:
                stack.pop()
                on_path.discard(id(node))
                done.add(id(node))
                continue
            producer = value.producer()
            if producer is None or producer.graph is not node.graph or id(producer) in done:
                continue
            if id(producer) in on_path:
                return producer
            on_path.add(id(producer))
            stack.append((producer, _read_values(producer)))
    return None


def _check_operator(node: ir.Node, scope: Scope) -> None:
    """Rejects default-domain ops that do not exist at the opset in force (garbage names)."""
    if node.domain not in DEFAULT_DOMAINS or scope.opset is None:
        return
    if scope.opset > onnx.defs.onnx_opset_version():
        return  # newer than the installed onnx knows: nothing to compare with
    if not isinstance(node.op_type, str) or not onnx.defs.has(node.op_type, scope.opset):
        raise InvalidModelError(
            f"{_label(node)} in {scope.path}: no operator {node.op_type!r} exists in the"
            f" default domain at opset {scope.opset}"
        )


def _check_scope(scope: Scope) -> None:
    graph = scope.graph
    seen: set[int] = set()
    in_order = True  # topologically sorted graphs (the norm) cannot hold a cycle
    for node in graph:
        _check_operator(node, scope)
        for value in node.inputs:
            if value is not None and not _is_defined(value):
                raise InvalidModelError(
                    f"{_label(node)} in {scope.path} reads {value.name!r}, which no"
                    " node, graph input or initializer defines (a dangling reference)"
                )
        if in_order:
            reads = _read_values(node) if subgraphs_of(node) else node.inputs
            for value in reads:
                producer = None if value is None else value.producer()
                if (
                    producer is not None
                    and producer.graph is graph
                    and id(producer) not in seen
                ):
                    in_order = False
                    break
            seen.add(id(node))
    for value in graph.outputs:
        if not _is_defined(value):
            raise InvalidModelError(
                f"output {value.name!r} of {scope.path} is not produced by any node"
                " and is not an input or initializer"
            )
    on_cycle = None if in_order else _find_cycle(graph)
    if on_cycle is not None:
        raise InvalidModelError(
            f"{_label(on_cycle)} in {scope.path} depends on its own output: the graph"
            " has a cycle"
        )


def check_structure(model: ir.Model) -> None:
    """Rejects unknown default-domain ops, dangling references and cycles everywhere.

    Raises:
        InvalidModelError: a node reads, or a graph returns, a value that no node, graph
            input or initializer defines, or nodes depend on each other in a cycle; the
            message names the node and the value.
    """
    for scope in iter_scopes(model):
        _check_scope(scope)
