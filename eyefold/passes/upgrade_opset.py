"""Upgrade a whole model (main graph, subgraphs, model-local functions) to a newer opset.

The conversion itself is done by the well-kept converters: onnxscript's from opset 18 (up
to the newest opset it has adapters for), onnx's C++ converter below that and beyond it.
eyefold hands them each graph body separately and without its weights (see
:mod:`eyefold.upgrade.conversion`), writes back only the nodes they changed (see
:mod:`eyefold.upgrade.writeback_ir`), raises ``ir_version`` to the minimum the new opset
needs, and validates the result with ``onnx.checker.check_model(full_check=True)`` before
touching the model: a failed upgrade leaves the model as it was.

onnxscript's ``ConvertVersionPass`` itself is not used: it inlines every model-local
function first, and below opset 18 it calls the same C++ converter on a whole-model round
trip.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

import onnx_ir as ir

from eyefold.core.analysis import node_label
from eyefold.core.declarations import check_eyelike_declarations
from eyefold.core.domains import default_opset
from eyefold.core.eyelike_types import EYELIKE_MIN_OPSET
from eyefold.core.gc_pause import cyclic_gc_paused
from eyefold.core.scopes import iter_nodes
from eyefold.errors import InvalidModelError, UpgradeError
from eyefold.passes.infer_input_shapes import infer_eyelike_input_dims
from eyefold.upgrade.conversion import BodyConversion
from eyefold.upgrade.on_ir import checkable_ir_model, convert_bodies
from eyefold.upgrade.target import (
    OpsetNotes,
    UpgradeTarget,
    check_target_opset,
    min_ir_version,
)
from eyefold.upgrade.validation import checker_problem, set_default_opset
from eyefold.upgrade.writeback_ir import write_back

if TYPE_CHECKING:
    from eyefold.core.run_findings import RunFindings

__all__ = ["UpgradeOpsetPass", "UpgradeResult"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class UpgradeResult(ir.passes.PassResult):
    """The pass result, with what the report should say about the target opset."""

    notes: OpsetNotes = dataclasses.field(default_factory=OpsetNotes)

    def report_into(self, findings: RunFindings) -> None:
        """The notes on the target (capped, or below the model's opset)."""
        self.notes.report_into(findings)


class UpgradeOpsetPass(ir.passes.InPlacePass):
    """Raises the default-domain opset of a model to ``target_opset`` (never lowers it).

    Every node of the main graph, of its subgraphs and of every model-local function is
    converted to the target opset's form by onnxscript's or onnx's version converter (see
    :mod:`eyefold.upgrade.conversion`); EyeLike nodes keep their ``k`` and ``dtype`` (an absent
    ``dtype`` stays absent). ``ir_version`` is raised to the minimum the target opset needs
    and never lowered. A model already at or above the target is left unchanged.

    >>> import onnx_ir as ir
    >>> model = ir.from_onnx_text(
    ...     '<ir_version: 7, opset_import: ["" : 11]> g (float[2, 2] m) => (float[2, 2] y)'
    ...     " { y = EyeLike <k = 1> (m) }"
    ... )
    >>> UpgradeOpsetPass(22)(model).modified, model.opset_imports[""], model.ir_version
    (True, 22, 10)

    Attributes:
        target_opset: default-domain opset to reach.
        target: the same, with the opset asked for when a runtime capped it.
        rebuilt_nodes: nodes the last call changed or added (the others were kept as is).
    """

    def __init__(self, target_opset: int | UpgradeTarget) -> None:
        super().__init__()
        if not isinstance(target_opset, UpgradeTarget):
            opset = check_target_opset(target_opset, lowest=1, error=UpgradeError)
            target_opset = UpgradeTarget(opset, opset)
        self.target = target_opset
        self.target_opset = target_opset.opset
        self.rebuilt_nodes = 0

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        """Converts every body below the target, validates, then writes back.

        Raises:
            InvalidModelError: an EyeLike sits in a scope whose opset predates EyeLike.
            UpgradeError: the conversion failed or gave an invalid model (the model is
                left unchanged).
        """
        notes = OpsetNotes(self.target.notes(default_opset(model.opset_imports)))
        with cyclic_gc_paused():
            modified = self._upgrade(model)
        return UpgradeResult(model, modified=modified, notes=notes)

    def _upgrade(self, model: ir.Model) -> bool:
        self.rebuilt_nodes = 0
        # Checked here, not in requires(): PassBase wraps requires() errors in its own type.
        opsets = [default_opset(model.opset_imports)]
        opsets += [default_opset(f.opset_imports) for f in model.functions.values()]
        predates_eyelike = any(o is not None and o < EYELIKE_MIN_OPSET for o in opsets)
        for scope, node in iter_nodes(model) if predates_eyelike else ():
            if scope.opset is not None and scope.opset < EYELIKE_MIN_OPSET:
                raise InvalidModelError(
                    f"EyeLike node {node_label(node)} in {scope.path}: EyeLike exists from"
                    f" opset {EYELIKE_MIN_OPSET}, the model has opset {scope.opset}"
                )
        source = default_opset(model.opset_imports)
        target = self.target_opset
        if source is None or source >= target:
            return False
        ir_version = max(model.ir_version, min_ir_version(target))
        conversions = convert_bodies(model, source, target)
        self._validate(model, conversions, source=source, ir_version=ir_version)
        for conversion in conversions:
            self.rebuilt_nodes += write_back(conversion)
        set_default_opset(model.opset_imports, target)
        for function in model.functions.values():
            set_default_opset(function.opset_imports, target)
        model.ir_version = ir_version
        logger.info(
            "opset %d -> %d: %d nodes changed or added", source, target, self.rebuilt_nodes
        )
        return True

    def _validate(
        self,
        model: ir.Model,
        conversions: list[BodyConversion],
        *,
        source: int,
        ir_version: int,
    ) -> None:
        """Runs onnx's full checker on the converted bodies (weights left out).

        Raises:
            UpgradeError: the converted model is invalid; names the op and the opsets.
            InvalidModelError: the model was invalid before the upgrade already.
        """
        target = self.target_opset
        placeholders = set().union(*(c.proto.placeholders for c in conversions))
        problem = checker_problem(
            checkable_ir_model(model, conversions, target=target, ir_version=ir_version),
            placeholders,
        )
        if problem is None:
            return
        original = checkable_ir_model(
            model, conversions, target=None, ir_version=model.ir_version
        )
        if checker_problem(original, placeholders) is not None:
            # An EyeLike output declared against the spec: eyefold says it in full.
            check_eyelike_declarations(model, infer_eyelike_input_dims(model))
            raise InvalidModelError(f"the model is invalid at opset {source}{problem}")
        raise UpgradeError(
            f"upgrading opset {source} to {target} gave an invalid model{problem};"
            f" run with upgrade=False to keep opset {source}"
        )
