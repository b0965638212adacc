"""Structural checks on a loaded model: no dangling references, no cycles, savable text.

onnx-ir resolves a node's inputs by name while it deserializes a graph. A name nothing
defines (a typo, a value removed by a broken tool) does not fail the load: onnx-ir logs a
warning and invents an input no graph declares. Nodes that read each other's outputs (a
cycle) load silently. Left alone, such a model is optimized and saved as if it were
valid. Text that is not UTF-8 and tensors or attributes without a type load too, then
fail deep inside a pass or the save. These checks turn each into one clear error naming
the node, value or tensor.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import onnx_ir as ir

from eyefold.core.node_order import graph_in_order
from eyefold.core.scopes import Scope, iter_scopes, read_values
from eyefold.errors import InvalidModelError

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


def _find_cycle(graph: ir.Graph | ir.Function) -> ir.Node | None:
    """A node on a dependency cycle among the nodes of ``graph``, or None (iterative DFS)."""
    done: set[int] = set()
    for start in graph:
        if id(start) in done:
            continue
        on_path: set[int] = {id(start)}
        stack = [(start, read_values(start))]
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
            stack.append((producer, read_values(producer)))
    return None


def _check_text(what: str, texts: dict[str, object]) -> None:
    """Fails on text fields protobuf handed back as bytes (not UTF-8): they cannot be saved."""
    for field, text in texts.items():
        if text is not None and not isinstance(text, str):
            raise InvalidModelError(f"the {field} of {what} is not valid UTF-8 text: {text!r}")


def _is_text(value: object) -> bool:
    return value is None or isinstance(value, str)


_NODE_TEXT_FIELDS = ("name", "op type", "domain", "doc string", "overload")


def _check_node(node: ir.Node, scope: Scope) -> None:
    # Messages are built only on failure: this runs once per node of large models.
    fields = (node.name, node.op_type, node.domain, node.doc_string, node.overload)
    if not all(text is None or type(text) is str for text in fields):
        _check_text(
            f"{_label(node)} in {scope.path}",
            dict(zip(_NODE_TEXT_FIELDS, fields, strict=True)),
        )
    for value in node.outputs:
        if not _is_text(value.name):
            _check_text(f"an output of {_label(node)} in {scope.path}", {"name": value.name})
    for attr in node.attributes.values():
        if not _is_text(attr.name):
            _check_text(f"an attribute of {_label(node)} in {scope.path}", {"name": attr.name})
        if attr.type == ir.AttributeType.UNDEFINED:
            raise InvalidModelError(
                f"attribute {attr.name!r} of {_label(node)} in {scope.path} has no type"
            )
        # .value, not .as_tensor(): its protocol check reads nbytes, which needs a dtype.
        is_tensor = attr.type == ir.AttributeType.TENSOR and not attr.is_ref()
        if is_tensor and _has_no_dtype(attr.value):
            raise InvalidModelError(
                f"tensor attribute {attr.name!r} of {_label(node)} in {scope.path} has no"
                " data type"
            )


def _has_no_dtype(tensor: object) -> bool:
    return getattr(tensor, "dtype", None) == ir.DataType.UNDEFINED


def _check_scope(scope: Scope) -> None:
    graph = scope.graph
    _check_text(scope.path, {"name": graph.name, "doc string": graph.doc_string})
    for value in graph.inputs:
        _check_text(f"an input of {scope.path}", {"name": value.name})
    if isinstance(graph, ir.Graph):
        for name, value in graph.initializers.items():
            _check_text(f"an initializer of {scope.path}", {"name": name})
            if _has_no_dtype(value.const_value):
                raise InvalidModelError(
                    f"tensor initializer {name!r} in {scope.path} has no data type"
                )
    for node in graph:
        _check_node(node, scope)
        for value in node.inputs:
            if value is not None and not _is_defined(value):
                raise InvalidModelError(
                    f"{_label(node)} in {scope.path} reads {value.name!r}, which no"
                    " node, graph input or initializer defines (a dangling reference)"
                )
    for value in graph.outputs:
        if not _is_defined(value):
            raise InvalidModelError(
                f"output {value.name!r} of {scope.path} is not produced by any node"
                " and is not an input or initializer"
            )
    # A graph in topological order (the norm) cannot hold a cycle.
    on_cycle = None if graph_in_order(graph) else _find_cycle(graph)
    if on_cycle is not None:
        raise InvalidModelError(
            f"{_label(on_cycle)} in {scope.path} depends on its own output: the graph"
            " has a cycle"
        )


def check_structure(model: ir.Model) -> None:
    """Rejects what onnx-ir loads but eyefold cannot work on or save, in every scope.

    That is: dangling references, cycles, text fields that are not UTF-8, attributes
    without a type and tensors without a data type. Unknown op types are not errors:
    old exporters wrote experimental ops (ImageScaler, Crop...) that onnx has since
    dropped but runtimes still run.

    Raises:
        InvalidModelError: the message names the node, value or tensor.
    """
    _check_text(
        "the model",
        {
            "producer name": model.producer_name,
            "producer version": model.producer_version,
            "domain": model.domain,
            "doc string": model.doc_string,
        },
    )
    for scope in iter_scopes(model):
        _check_scope(scope)
