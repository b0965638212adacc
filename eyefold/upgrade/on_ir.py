"""The upgrade of an onnx-ir model's bodies: converted copies, and the model onnx checks.

:class:`eyefold.passes.UpgradeOpsetPass` converts with :func:`convert_bodies` (the model is
not touched), checks :func:`checkable_ir_model`, then writes back
(:mod:`eyefold.upgrade.writeback_ir`). The ModelProto's counterpart is
:mod:`eyefold.upgrade.on_proto`.
"""

from __future__ import annotations

import onnx
import onnx_ir as ir

from eyefold.core.domains import function_label
from eyefold.upgrade.conversion import (
    BodyConversion,
    BodyUpgrade,
    convert_body,
    function_upgrade,
)
from eyefold.upgrade.validation import FunctionBody, checkable_model

__all__ = ["checkable_ir_model", "convert_bodies"]


def convert_bodies(model: ir.Model, source: int, target: int) -> list[BodyConversion]:
    """Converts the main graph, then every function below ``target``; changes nothing."""
    main = BodyUpgrade(
        dict(model.opset_imports), source, target, model.ir_version, "main graph"
    )
    conversions = [convert_body(model.graph, main)]
    for function in model.functions.values():
        upgrade = function_upgrade(function.opset_imports, main, function_label(function))
        if upgrade is not None:
            conversions.append(convert_body(function, upgrade))
    return conversions


def checkable_ir_model(
    model: ir.Model,
    conversions: list[BodyConversion],
    *,
    target: int | None,
    ir_version: int,
) -> onnx.ModelProto:
    """The converted model (or with ``target`` None, the original) for onnx's checker."""
    main, *functions = conversions
    converted = {id(c.body): c for c in functions}
    bodies = []
    for function in model.functions.values():
        body = FunctionBody(ir.serde.serialize_function(function))
        conversion = converted.get(id(function))
        if conversion is not None:
            serialized = {id(node) for node in conversion.nodes}
            body.conversion = conversion.proto
            body.hidden = [
                ir.serde.serialize_node(node)
                for node in function
                if id(node) not in serialized
            ]
        bodies.append(body)
    return checkable_model(
        main.proto, bodies, dict(model.opset_imports), target=target, ir_version=ir_version
    )
