"""Rewrite EyeLike nodes a target runtime cannot run into a form it runs.

onnxruntime's CPU kernel runs 37 of the 182 (input type, dtype) combinations EyeLike-22
allows; a model with e.g. ``EyeLike(dtype=BOOL)`` does not even load there. TVM takes no
``dtype`` other than the input's, tract no bool output. EyeLike only reads its input's
shape and writes zeros and ones, which every type holds exactly, so
``Cast(EyeLike(Cast(x, to=A), dtype=B), to=wanted)`` gives the same bits as the original,
and so does eyefold's lowered form. :func:`eyefold.runtime.forms.choose_form` picks the
cheapest that the target runs and that keeps running on every other known runtime which
ran the node; what the target cannot run in any form (bfloat16 on tract) is a warning.
A target that fills a ConstantOfShape without ``value`` otherwise than the spec (tract)
also gets that default spelled out where such a node feeds an EyeLike left
(``eyefold/passes/explicit_fill.py``): the node as it was does not run there.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Sequence

import onnx_ir as ir

from eyefold.core.analysis import node_label
from eyefold.core.eyelike_types import to_data_type
from eyefold.core.metadata_keys import LEGALIZED_FOR_KEY, RULE_TAG_KEY
from eyefold.core.names import ModelNames
from eyefold.core.run_findings import RunFindings
from eyefold.core.scopes import Scope, is_eyelike, iter_scopes
from eyefold.passes.explicit_fill import (
    IMPLICIT_FILL_NOTE,
    implicit_fill_producer,
    spell_out_fill,
)
from eyefold.passes.lower_eye_like import lower_node, lowering_blocker
from eyefold.runtime.forms import CastForm, Choice, Lowered, choose_cast_form, choose_form
from eyefold.runtime.profile import RuntimeProfile
from eyefold.runtime.support import EyeLikeSupport, check_runtime, get_profile, other_profiles

__all__ = [
    "LEGALIZED_FOR_KEY",
    "CastForm",
    "LegalizeEyeLikePass",
    "LegalizeOutcome",
    "LegalizeResult",
    "choose_cast_form",
]

logger = logging.getLogger(__name__)

# A target that fills a ConstantOfShape without value otherwise (tract: float64) gets the
# spec's default written out, in these words.
_FILL = "the ConstantOfShape's value 0.0 (float) spelled out"


@dataclasses.dataclass
class LegalizeOutcome:
    """What the pass found and did for one EyeLike node.

    Attributes:
        node: the EyeLike node (rewritten in place when legalized).
        scope: where it sits.
        runs: whether the target runs the node as it was; None when it cannot be told.
        legalized: whether the pass rewrote it.
        note: the same in words, for the report.
        lowered: whether the rewrite is the lowered form (the node is then gone).
        warning: set when the target cannot run the node in any form, in words.
    """

    node: ir.Node
    scope: Scope
    runs: bool | None
    legalized: bool
    note: str
    lowered: bool = False
    warning: str | None = None


@dataclasses.dataclass
class LegalizeResult(ir.passes.PassResult):
    """The pass result.

    Attributes:
        support: what the target runs (and where that table came from).
        rewrite: whether the pass rewrote nodes or only judged them.
        outcomes: one per EyeLike node seen, in scope order.
        lacks: names of the element types the target cannot hold at all.
    """

    support: EyeLikeSupport | None = None
    rewrite: bool = True
    outcomes: list[LegalizeOutcome] = dataclasses.field(default_factory=list)
    lacks: frozenset[str] = frozenset()

    def report_into(self, findings: RunFindings) -> None:
        """The runtime's verdict on every EyeLike left."""
        findings.runtime = self


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


def _rewrite(
    scope: Scope, node: ir.Node, cast_form: CastForm, names: ModelNames, runtime: str
) -> None:
    source, result = node.inputs[0], node.outputs[0]
    # The node is the legalization's now. A rule tag would name a rewrite it re-expanded
    # (the rules fold these casts back on a second run), so a second run would differ.
    node.metadata_props.pop(RULE_TAG_KEY, None)
    node.metadata_props[LEGALIZED_FOR_KEY] = runtime
    assert source is not None
    base = result.name or "eyelike"
    if cast_form.input_type != source.dtype:
        cast_out = ir.Value(
            name=names.new_value(f"{base}__eyefold_input_{cast_form.input_type.name.lower()}"),
            type=ir.TensorType(cast_form.input_type),
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
    if cast_form.dtype is not None:
        node.attributes["dtype"] = ir.AttrInt64("dtype", cast_form.dtype)
    if cast_form.eyelike_output == cast_form.output_type:
        return
    # The node keeps producing ``result`` (renamed, retyped); a new value with the old name
    # and type takes over every use and graph-output slot, so nothing downstream changes.
    users = list(result.uses())
    final = ir.Value(
        name=result.name,
        type=ir.TensorType(cast_form.output_type),
        shape=None if result.shape is None else ir.Shape(result.shape),
    )
    result.name = names.new_value(f"{base}__eyefold_{cast_form.eyelike_output.name.lower()}")
    result.type = ir.TensorType(cast_form.eyelike_output)
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
    kernel does not take; where no such form runs there, the lowered form
    (``LowerEyeLikePass``). Exact: the values are zeros and ones, and the input's values
    are never read. Forms are chosen by :func:`~eyefold.runtime.forms.choose_form`: casts
    first, fewest casts, then fewest bytes written, only types and casts that exist at the
    node's opset, and only forms that every other known runtime which ran the node runs.

    Nodes left alone: those the runtime runs already, those whose input type is unknown
    with no ``dtype`` (the output type is unknown too, so there is nothing to judge or to
    cast to; the outcome says so), and those the runtime cannot run in any form (a type it
    lacks; the outcome carries a warning). With an unknown input type and a ``dtype``, the
    node is rewritten unless the runtime runs that dtype for every input type: casting the
    input makes its type known, and one cast is cheaper than a model that may not load.

    Run it after folding and output inference: folded nodes need nothing, and inference
    gives the input and output types this pass reads.

    Attributes:
        runtime: the target, e.g. ``onnxruntime`` or ``tract``.
        support: the target's EyeLike table; measured (or read from the cache or the
            shipped table) on first use when not given.
        rewrite: False only judges (the result's ``outcomes``) and changes nothing.
        others: the runtimes a rewrite must keep running where they ran the node; None:
            every other known runtime, by its cached or shipped table.
        profile: the target's whole profile (EyeLike table, Casts, lowered forms), for
            a runtime measured elsewhere; it takes the place of ``support``.
    """

    def __init__(
        self,
        runtime: str = "onnxruntime",
        *,
        support: EyeLikeSupport | None = None,
        rewrite: bool = True,
        others: Sequence[RuntimeProfile] | None = None,
        profile: RuntimeProfile | None = None,
    ) -> None:
        super().__init__()
        check_runtime(runtime)
        self.runtime = runtime
        self.support = profile.support if profile is not None else support
        self.rewrite = rewrite
        self.others = others
        self.profile = profile

    def call(self, model: ir.Model) -> LegalizeResult:
        """Legalizes the EyeLike nodes of every scope."""
        # Judging only never creates a session: the cached measurement or the table.
        profile = self.profile or get_profile(
            self.runtime, probe=self.rewrite, support=self.support
        )
        self.support = profile.support
        judges = _Judges(profile, self.others)
        names = ModelNames(model)
        outcomes = [
            self._visit(scope, node, judges, names)
            for scope in iter_scopes(model)
            for node in list(scope.graph)
            if is_eyelike(node)
        ]
        count = sum(outcome.legalized for outcome in outcomes)
        logger.info("EyeLike nodes legalized for %s: %d", profile.describe(), count)
        return LegalizeResult(
            model,
            modified=bool(count),
            support=profile.support,
            rewrite=self.rewrite,
            outcomes=outcomes,
            lacks=frozenset(t.name for t in profile.lacks),
        )

    def _visit(
        self, scope: Scope, node: ir.Node, judges: _Judges, names: ModelNames
    ) -> LegalizeOutcome:
        source = node.inputs[0].dtype if node.inputs and node.inputs[0] is not None else None
        attr = node.attributes.get("dtype")
        target = judges.target.describe()
        if attr is not None and attr.is_ref():
            note = (
                f"dtype refers to the function attribute {attr.ref_attr_name!r}: whether"
                f" {target} runs {node_label(node)} depends on each call; left as is"
            )
            return LegalizeOutcome(node, scope, None, False, note)
        dtype = to_data_type(attr.as_int()) if attr is not None else None
        output_type = dtype or source
        runs = judges.target.runs_eyelike(source, dtype, scope.opset)
        combination = (
            f"EyeLike {source.name if source else '(unknown)'} -> "
            f"{output_type.name if output_type else '(unknown)'}"
        )
        fill = None if judges.target.implicit_fill else implicit_fill_producer(node)
        if runs and fill is None:
            return LegalizeOutcome(node, scope, True, False, f"{target} runs {combination}")
        if runs:
            verdict = f"{target} runs {combination}, but {IMPLICIT_FILL_NOTE}"
            if not self.rewrite:
                note = f"{verdict}; would run with {_FILL}"
                return LegalizeOutcome(node, scope, False, False, note)
            assert fill is not None
            spell_out_fill(fill)
            note = f"{verdict}; legalized with {_FILL}"
            return LegalizeOutcome(node, scope, False, True, note)
        if output_type is None:
            note = (
                f"input type unknown and no dtype: cannot tell whether {target} runs"
                f" {node_label(node)}; left as is"
            )
            return LegalizeOutcome(node, scope, None, False, note)
        choice = choose_form(
            judges.target,
            judges.others,
            source,
            dtype,
            output_type,
            scope.opset,
            lowerable=lowering_blocker(scope, node) is None,
        )
        what = "cannot run" if runs is False else "may not run (input type unknown)"
        verdict = f"{target} {what} {combination}"
        if choice.form is None:
            return _left(node, scope, runs, verdict, choice)
        form = choice.form.describe(source)
        if not self.rewrite:
            if fill is not None:
                form += f", with {_FILL}"
            return LegalizeOutcome(node, scope, runs, False, f"{verdict}; would become {form}")
        note = f"{verdict}; legalized as {form}" + (f", with {_FILL}" if fill else "")
        if isinstance(choice.form, Lowered):
            lower_node(scope, node, names)  # spells the fill out itself, for every target
            return LegalizeOutcome(node, scope, runs, True, note, lowered=True)
        _rewrite(scope, node, choice.form, names, judges.target.runtime)
        if fill is not None:
            spell_out_fill(fill)
        return LegalizeOutcome(node, scope, runs, True, note)


class _Judges:
    """The target's profile and the other runtimes a rewrite must keep running.

    The others are looked up only when some node needs a form (their versions are
    package metadata reads, and most runs have no node the target cannot run).
    """

    def __init__(self, target: RuntimeProfile, others: Sequence[RuntimeProfile] | None):
        self.target = target
        self._others = others

    @functools.cached_property
    def others(self) -> Sequence[RuntimeProfile]:
        """The profiles of every other known runtime (none probed)."""
        if self._others is not None:
            return self._others
        return other_profiles(self.target.runtime)


def _left(
    node: ir.Node, scope: Scope, runs: bool | None, verdict: str, choice: Choice
) -> LegalizeOutcome:
    """The outcome of a node no form fits: why, and a warning when it names a runtime."""
    label = f"EyeLike {node_label(node)} in {scope.path}"
    if choice.lacked:
        lacked = ", ".join(t.name for t in choice.lacked)
        note = f"{verdict}: it has no {lacked}, so no form of it runs there; left as is"
        return LegalizeOutcome(node, scope, runs, False, note, warning=f"{label}: {note}")
    if choice.blocked_by:
        blocked = ", ".join(choice.blocked_by)
        note = (
            f"{verdict}, and every form it runs would stop {blocked} from running it;"
            " left as is"
        )
        return LegalizeOutcome(node, scope, runs, False, note, warning=f"{label}: {note}")
    note = f"{verdict}, and no supported form exists at opset {scope.opset}"
    return LegalizeOutcome(node, scope, runs, False, note)
