"""Rewrite EyeLike nodes a target runtime cannot run into casts around one it can.

onnxruntime's CPU kernel runs 37 of the 182 (input type, dtype) combinations EyeLike-22
allows; a model with e.g. ``EyeLike(dtype=BOOL)`` does not even load there. EyeLike only
reads its input's shape and writes zeros and ones, which every type holds exactly, so
``Cast(EyeLike(Cast(x, to=A), dtype=B), to=wanted)`` gives the same bits as the original.
"""

from __future__ import annotations

import dataclasses
import logging

import onnx_ir as ir

from eyefold.core.analysis import node_label
from eyefold.core.eyelike_types import allowed_types, to_data_type
from eyefold.core.metadata_keys import LEGALIZED_FOR_KEY, RULE_TAG_KEY
from eyefold.core.names import ModelNames
from eyefold.core.run_facts import RunFacts
from eyefold.core.scopes import Scope, is_eyelike, iter_scopes
from eyefold.runtime.support import EyeLikeSupport, check_runtime, get_support

__all__ = [
    "LEGALIZED_FOR_KEY",
    "LegalizeEyeLikePass",
    "LegalizeOutcome",
    "LegalizeResult",
    "Plan",
    "choose_plan",
]

logger = logging.getLogger(__name__)

# Cast takes bfloat16 from Cast-13 on (EyeLike itself only from EyeLike-22).
_CAST_BFLOAT16_OPSET = 13

# Metadata key on the nodes a legalization made or rewrote; the value names the runtime.


@dataclasses.dataclass(frozen=True)
class Plan:
    """The supported form of one EyeLike: input cast to ``input_type``, then ``dtype``.

    Attributes:
        input_type: the element type the EyeLike input is cast to (or already has).
        dtype: the new ``dtype`` attribute, None to drop it (output = ``input_type``).
        output_type: the element type the node's users expect; a Cast to it follows
            when the new EyeLike produces something else.
    """

    input_type: ir.DataType
    dtype: ir.DataType | None
    output_type: ir.DataType

    @property
    def eyelike_output(self) -> ir.DataType:
        """The element type the rewritten EyeLike produces."""
        return self.input_type if self.dtype is None else self.dtype

    def describe(self, original_input: ir.DataType | None) -> str:
        """E.g. ``Cast(to=INT32) -> EyeLike(dtype=FLOAT) -> Cast(to=BOOL)``."""
        steps = []
        if self.input_type != original_input:
            steps.append(f"Cast(to={self.input_type.name})")
        steps.append("EyeLike" + (f"(dtype={self.dtype.name})" if self.dtype else ""))
        if self.eyelike_output != self.output_type:
            steps.append(f"Cast(to={self.output_type.name})")
        return " -> ".join(steps)


@dataclasses.dataclass
class LegalizeOutcome:
    """What the pass found and did for one EyeLike node.

    Attributes:
        node: the EyeLike node (rewritten in place when legalized).
        scope: where it sits.
        runs: whether the target runs the node as it was; None when it cannot be told.
        legalized: whether the pass rewrote it.
        note: the same in words, for the report.
    """

    node: ir.Node
    scope: Scope
    runs: bool | None
    legalized: bool
    note: str


@dataclasses.dataclass
class LegalizeResult(ir.passes.PassResult):
    """The pass result.

    Attributes:
        support: what the target runs (and where that table came from).
        rewrite: whether the pass rewrote nodes or only judged them.
        outcomes: one per EyeLike node seen, in scope order.
    """

    support: EyeLikeSupport | None = None
    rewrite: bool = True
    outcomes: list[LegalizeOutcome] = dataclasses.field(default_factory=list)

    def report_into(self, facts: RunFacts) -> None:
        """The runtime's verdict on every EyeLike left."""
        facts.runtime = self


def _cast_allows(data_type: ir.DataType, opset: int | None) -> bool:
    return data_type != ir.DataType.BFLOAT16 or opset is None or opset >= _CAST_BFLOAT16_OPSET


def _cost(plan: Plan, source: ir.DataType | None, hidden: int) -> tuple[int, int, int, str]:
    """Casts (ours plus the runtime's own), then bytes written per element, then a tie-break.

    Every cast is a pass over the whole matrix, so fewer casts wins first; between equal
    counts, fewer bytes written per output element (the input cast's tensor, EyeLike's
    output and the final cast's) wins. A combination the runtime runs only by inserting
    casts of its own (onnxruntime does this for float16 on CPU) counts those ``hidden``
    casts too, so a float16 detour never looks cheaper than it runs. Remaining ties prefer
    no ``dtype`` attribute, then type names, so the choice is deterministic.
    """
    casts = (plan.input_type != source) + (plan.eyelike_output != plan.output_type) + hidden
    written = plan.eyelike_output.itemsize
    if plan.input_type != source:
        written += plan.input_type.itemsize
    if plan.eyelike_output != plan.output_type:
        written += plan.output_type.itemsize
    tie = f"{plan.input_type.name}/{plan.dtype.name if plan.dtype else ''}"
    return casts, written, plan.dtype is not None, tie


def choose_plan(
    support: EyeLikeSupport,
    source: ir.DataType | None,
    output_type: ir.DataType,
    opset: int | None,
) -> Plan | None:
    """The cheapest supported form of an EyeLike from ``source`` to ``output_type``.

    Args:
        support: what the target runs.
        source: the input's element type; None when unknown (the input is then always cast).
        output_type: the element type the node must still produce.
        opset: the default-domain opset of the node's scope; every type and cast the plan
            uses must exist there (bfloat16 needs EyeLike-22 and Cast-13).

    Returns:
        The plan, or None when no supported form exists at ``opset``.
    """
    types = allowed_types(opset)
    if source is not None and not _cast_allows(source, opset):
        return None
    candidates = []
    for input_type in types:
        if input_type != source and not _cast_allows(input_type, opset):
            continue
        for dtype in [None, *types]:
            plan = Plan(input_type, dtype, output_type)
            produced = plan.eyelike_output
            if produced != output_type and not (
                _cast_allows(produced, opset) and _cast_allows(output_type, opset)
            ):
                continue
            if support.runs(input_type, dtype, opset):
                hidden = support.hidden_casts(input_type, dtype, opset)
                candidates.append((_cost(plan, source, hidden), plan))
    return min(candidates, key=lambda item: item[0])[1] if candidates else None


def _cast_node(
    source: ir.Value, output: ir.Value, beside: ir.Node, role: str, base: str
) -> ir.Node:
    """``Cast(source, to=output's type)``, named after the EyeLike it sits ``beside``.

    An unnamed EyeLike lends its output's name (``base``) instead: left unnamed, the Cast
    would get a name from the graph's counter, which a second run would not reproduce.
    """
    assert output.dtype is not None
    return ir.Node(
        "",
        "Cast",
        [source],
        attributes=[ir.AttrInt64("to", output.dtype)],
        outputs=[output],
        name=f"{beside.name or base}__eyefold_{role}",
        metadata_props={LEGALIZED_FOR_KEY: beside.metadata_props[LEGALIZED_FOR_KEY]},
    )


def _rewrite(scope: Scope, node: ir.Node, plan: Plan, names: ModelNames, runtime: str) -> None:
    source, result = node.inputs[0], node.outputs[0]
    # The node is the legalization's now. A rule tag would name a rewrite it re-expanded
    # (the rules fold these casts back on a second run), so a second run would differ.
    node.metadata_props.pop(RULE_TAG_KEY, None)
    node.metadata_props[LEGALIZED_FOR_KEY] = runtime
    assert source is not None
    base = result.name or "eyelike"
    if plan.input_type != source.dtype:
        cast_out = ir.Value(
            name=names.new_value(f"{base}__eyefold_input_{plan.input_type.name.lower()}"),
            type=ir.TensorType(plan.input_type),
            shape=None if source.shape is None else ir.Shape(source.shape),
        )
        scope.graph.insert_before(node, _cast_node(source, cast_out, node, "cast_input", base))
        node.replace_input_with(0, cast_out)
    # Written as the rules write an EyeLike (k unless 0, then dtype): they fold these
    # casts back on a second run and this pass re-expands them, and that run must give
    # the same bytes.
    k = node.attributes.pop("k", None)
    node.attributes.pop("dtype", None)
    if k is not None and (k.is_ref() or k.type != ir.AttributeType.INT or k.value != 0):
        node.attributes["k"] = k
    if plan.dtype is not None:
        node.attributes["dtype"] = ir.AttrInt64("dtype", plan.dtype)
    if plan.eyelike_output == plan.output_type:
        return
    # The node keeps producing ``result`` (renamed, retyped); a new value with the old name
    # and type takes over every use and graph-output slot, so nothing downstream changes.
    users = list(result.uses())
    final = ir.Value(
        name=result.name,
        type=ir.TensorType(plan.output_type),
        shape=None if result.shape is None else ir.Shape(result.shape),
    )
    result.name = names.new_value(f"{base}__eyefold_{plan.eyelike_output.name.lower()}")
    result.type = ir.TensorType(plan.eyelike_output)
    scope.graph.insert_after(node, _cast_node(result, final, node, "cast_output", base))
    for user, index in users:
        user.replace_input_with(index, final)
    outputs = scope.graph.outputs
    for position, output in enumerate(outputs):
        if output is result:
            outputs[position] = final


class LegalizeEyeLikePass(ir.passes.InPlacePass):
    """Rewrites each EyeLike the target runtime cannot run into a form it can run.

    ``EyeLike(x: T_in, dtype=T_out)`` becomes ``Cast(to=T_out)`` of an EyeLike in a
    combination the runtime runs, fed by ``Cast(x, to=A)`` when the input type is one the
    kernel does not take. Exact: the values are zeros and ones, and the input's values are
    never read. Types are chosen by :func:`choose_plan`: fewest casts, then fewest bytes
    written (see ``_cost``), and only types and casts that exist at the node's opset.

    Nodes left alone: those the runtime runs already, and those whose input type is unknown
    with no ``dtype`` (the output type is unknown too, so there is nothing to judge or to
    cast to; the outcome says so). With an unknown input type and a ``dtype``, the node is
    rewritten unless the runtime runs that dtype for every input type: casting the input
    makes its type known, and one cast is cheaper than a model that may not load.

    Run it after folding and output inference: folded nodes need nothing, and inference
    gives the input and output types this pass reads.

    Attributes:
        runtime: the target, e.g. ``onnxruntime``.
        support: what the target runs; measured (or read from the cache) on first use when
            not given.
        rewrite: False only judges (the result's ``outcomes``) and changes nothing.
    """

    def __init__(
        self,
        runtime: str = "onnxruntime",
        *,
        support: EyeLikeSupport | None = None,
        rewrite: bool = True,
    ) -> None:
        super().__init__()
        check_runtime(runtime)
        self.runtime = runtime
        self.support = support
        self.rewrite = rewrite

    def call(self, model: ir.Model) -> LegalizeResult:
        """Legalizes the EyeLike nodes of every scope."""
        if self.support is None:
            # Judging only never creates a session: the cached measurement or the table.
            self.support = get_support(self.runtime, probe=self.rewrite)
        support = self.support
        names = ModelNames(model)
        outcomes = [
            self._visit(scope, node, support, names)
            for scope in iter_scopes(model)
            for node in list(scope.graph)
            if is_eyelike(node)
        ]
        count = sum(outcome.legalized for outcome in outcomes)
        logger.info("EyeLike nodes legalized for %s: %d", support.describe(), count)
        return LegalizeResult(
            model,
            modified=bool(count),
            support=support,
            rewrite=self.rewrite,
            outcomes=outcomes,
        )

    def _visit(
        self, scope: Scope, node: ir.Node, support: EyeLikeSupport, names: ModelNames
    ) -> LegalizeOutcome:
        source = node.inputs[0].dtype if node.inputs and node.inputs[0] is not None else None
        attr = node.attributes.get("dtype")
        target = support.describe()
        if attr is not None and attr.is_ref():
            note = (
                f"dtype refers to the function attribute {attr.ref_attr_name!r}: whether"
                f" {target} runs {node_label(node)} depends on each call; left as is"
            )
            return LegalizeOutcome(node, scope, None, False, note)
        dtype = to_data_type(attr.as_int()) if attr is not None else None
        output_type = dtype or source
        runs = support.verdict(source, dtype, scope.opset)
        combination = (
            f"EyeLike {source.name if source else '(unknown)'} -> "
            f"{output_type.name if output_type else '(unknown)'}"
        )
        if runs:
            return LegalizeOutcome(node, scope, True, False, f"{target} runs {combination}")
        if output_type is None:
            note = (
                f"input type unknown and no dtype: cannot tell whether {target} runs"
                f" {node_label(node)}; left as is"
            )
            return LegalizeOutcome(node, scope, None, False, note)
        what = "cannot run" if runs is False else "may not run (input type unknown)"
        plan = choose_plan(support, source, output_type, scope.opset)
        if plan is None:
            note = f"{target} {what} {combination}, and no supported form exists at opset"
            return LegalizeOutcome(node, scope, runs, False, f"{note} {scope.opset}")
        if not self.rewrite:
            note = f"{target} {what} {combination}; would become {plan.describe(source)}"
            return LegalizeOutcome(node, scope, runs, False, note)
        _rewrite(scope, node, plan, names, support.runtime)
        note = f"{target} {what} {combination}; legalized as {plan.describe(source)}"
        return LegalizeOutcome(node, scope, runs, True, note)
