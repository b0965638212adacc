"""onnxscript's version converter on a weightless ModelProto (opset 18 and up).

onnx's C++ converter registers a plain version bump for GroupNormalization 20 -> 21
after the adapter that turns per-group scale and bias into per-channel ones, so its
output computes something else; onnxscript's converter adapts it. It is used where its
adapter registry has something for the body's ops in the range (see
:func:`onnxscript_adapts`); :mod:`eyefold.upgrade.conversion` calls it.
"""

from __future__ import annotations

import logging

import onnx
import onnx_ir as ir

from eyefold.core.domains import DEFAULT_DOMAINS
from eyefold.core.metadata_keys import HIDDEN_DOMAIN
from eyefold.core.onnxscript_internals import version_converter
from eyefold.errors import UpgradeError, one_line
from eyefold.upgrade.proto_graphs import iter_proto_graphs

__all__ = ["NATIVE_MIN_OPSET", "convert_with_onnxscript", "onnxscript_adapts"]

# onnxscript's converter works natively from opset 18 (its SUPPORTED_MIN_ONNX_OPSET, which
# a test compares) up to its newest adapter table; it is imported only for bodies at 18+.
NATIVE_MIN_OPSET = 18


def onnxscript_adapts(graph: onnx.GraphProto, source: int, target: int) -> bool:
    """Whether onnxscript has an up-conversion adapter for an op of ``graph`` in range."""
    ops = {
        node.op_type
        for subgraph in iter_proto_graphs(graph)
        for node in subgraph.node
        if node.domain in DEFAULT_DOMAINS
    }
    converter = version_converter()
    steps = range(source, min(target, converter.SUPPORTED_MAX_ONNX_OPSET))
    lookup = converter.registry.lookup_adapters
    return any(lookup("", op, step, True) is not None for op in ops for step in steps)


class _Collect(logging.Handler):
    """Keeps the log records of one call (onnxscript logs, and skips, nodes it fails on)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def convert_with_onnxscript(
    before: onnx.ModelProto, source: int, target: int, where: str
) -> onnx.ModelProto:
    """Runs onnxscript's converter on a weightless copy of ``before``.

    Its public ``ConvertVersionPass`` first inlines every model-local function, so the
    converter itself is called, on the weightless proto (never on the user's model), after
    onnx's shape inference (safe there: EyeLike nodes are placeholders), since its adapters
    read shapes (GroupNormalization's channel count). Nodes with attribute references, which
    it refuses, are hidden in a private domain (they were checked to need no conversion) and
    put back afterwards.
    """
    try:
        typed = onnx.shape_inference.infer_shapes(before, check_type=False, strict_mode=False)
    except Exception:  # onnx raises several types; the converter then says what it lacks
        typed = before
    model = ir.serde.deserialize_model(typed)
    hidden = [
        node
        for node in model.graph.all_nodes()
        if node.domain in DEFAULT_DOMAINS and any(a.is_ref() for a in node.attributes.values())
    ]
    domains = [node.domain for node in hidden]
    for node in hidden:
        node.domain = HIDDEN_DOMAIN
    collect = _Collect()
    converter = version_converter()
    converter_logger = logging.getLogger(converter.__name__)
    propagate = converter_logger.propagate
    converter_logger.addHandler(collect)
    converter_logger.propagate = False  # its warnings become our error, not stderr noise
    try:
        converter.convert_version(model, target_version=target)
        failure = collect.messages[0] if collect.messages else None
    except Exception as error:  # VersionConverterError, or an adapter's own failure
        failure = one_line(str(error)) or repr(error)
    finally:
        converter_logger.removeHandler(collect)
        converter_logger.propagate = propagate
    if failure is not None:
        raise UpgradeError(
            f"{where}: onnxscript's version converter failed from opset {source} to"
            f" {target}: {failure}; run with upgrade=False to keep opset {source}"
        )
    for node, domain in zip(hidden, domains, strict=True):
        node.domain = domain
    return ir.serde.serialize_model(model)
