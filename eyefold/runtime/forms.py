"""The forms an EyeLike can take for a runtime, and the cheapest one that runs there.

EyeLike only reads its input's shape and writes zeros and ones, which every type holds
exactly, so three forms give the same bits:

1. the EyeLike as it is;
2. a :class:`CastForm`: ``Cast(EyeLike(Cast(x, to=A), dtype=B), to=wanted)``, keeping only
   the casts needed (for TVM, which takes no ``dtype`` other than the input's, ``B`` is
   absent);
3. :class:`Lowered`: eyefold's primitive-op form (``LowerEyeLikePass``).

:func:`choose_form` picks the first of them, cheapest first, that the target runs *and*
that every other known runtime which ran the node as it was still runs: rewriting for one
runtime never breaks another. This module only decides; the passes rewrite.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import onnx_ir as ir

from eyefold.core.eyelike_types import allowed_types
from eyefold.runtime.profile import RuntimeProfile, spec_allows_cast
from eyefold.runtime.table import EyeLikeSupport

__all__ = [
    "CastForm",
    "Choice",
    "Form",
    "Lowered",
    "choose_cast_form",
    "choose_form",
    "runs_form",
]


@dataclasses.dataclass(frozen=True)
class CastForm:
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


@dataclasses.dataclass(frozen=True)
class Lowered:
    """eyefold's lowered form (Shape, Gather, Range, Unsqueeze, Equal, then the output type).

    Attributes:
        output_type: the element type the node's users expect.
    """

    output_type: ir.DataType

    def describe(self, original_input: ir.DataType | None) -> str:
        """E.g. ``Range/Equal -> Where(int64 1, 0)``; the input type plays no part."""
        del original_input
        if self.output_type == ir.DataType.BOOL:
            return "Range/Equal (lowered)"
        if self.output_type == ir.DataType.INT64:
            return "Range/Equal -> Where(int64 1, 0) (lowered)"
        return f"Range/Equal -> Cast(to={self.output_type.name}) (lowered)"


Form = CastForm | Lowered


def _cost(
    cast_form: CastForm, source: ir.DataType | None, hidden: int
) -> tuple[int, int, int, str]:
    """Casts (ours plus the runtime's own), then bytes written per element, then a tie-break.

    Every cast is a pass over the whole matrix, so fewer casts wins first; between equal
    counts, fewer bytes written per output element (the input cast's tensor, EyeLike's
    output and the final cast's) wins. A combination the runtime runs only by inserting
    casts of its own (onnxruntime does this for float16 on CPU) counts those ``hidden``
    casts too, so a float16 detour never looks cheaper than it runs. Remaining ties prefer
    no ``dtype`` attribute, then type names, so the choice is deterministic.
    """
    casts = (
        (cast_form.input_type != source)
        + (cast_form.eyelike_output != cast_form.output_type)
        + hidden
    )
    written = cast_form.eyelike_output.itemsize
    if cast_form.input_type != source:
        written += cast_form.input_type.itemsize
    if cast_form.eyelike_output != cast_form.output_type:
        written += cast_form.output_type.itemsize
    tie = f"{cast_form.input_type.name}/{cast_form.dtype.name if cast_form.dtype else ''}"
    return casts, written, cast_form.dtype is not None, tie


def _cast_forms(
    support: EyeLikeSupport,
    source: ir.DataType | None,
    output_type: ir.DataType,
    opset: int | None,
    profile: RuntimeProfile | None = None,
) -> list[CastForm]:
    """The cast forms the runtime runs, cheapest first; ``profile``, if given, judges casts."""
    types = allowed_types(opset)
    if source is not None and not spec_allows_cast(source, opset):
        return []
    candidates = []
    for input_type in types:
        if input_type != source and not spec_allows_cast(input_type, opset):
            continue
        for dtype in [None, *types]:
            cast_form = CastForm(input_type, dtype, output_type)
            produced = cast_form.eyelike_output
            if produced != output_type and not (
                spec_allows_cast(produced, opset) and spec_allows_cast(output_type, opset)
            ):
                continue
            if not support.runs(input_type, dtype, opset):
                continue
            if profile is not None and not runs_form(profile, cast_form, source, opset):
                continue
            hidden = support.hidden_casts(input_type, dtype, opset)
            candidates.append((_cost(cast_form, source, hidden), cast_form))
    return [cast_form for _, cast_form in sorted(candidates, key=lambda item: item[0])]


def choose_cast_form(
    support: EyeLikeSupport,
    source: ir.DataType | None,
    output_type: ir.DataType,
    opset: int | None,
) -> CastForm | None:
    """The cheapest supported form of an EyeLike from ``source`` to ``output_type``.

    Every Cast is taken to run (as on onnxruntime); :func:`choose_form` also asks the
    runtime's Casts and the other runtimes.

    Args:
        support: what the target runs.
        source: the input's element type; None when unknown (the input is then always cast).
        output_type: the element type the node must still produce.
        opset: the default-domain opset of the node's scope; every type and cast the form
            uses must exist there (bfloat16 needs EyeLike-22 and Cast-13).

    Returns:
        The cast form, or None when no supported form exists at ``opset``.
    """
    cast_forms = _cast_forms(support, source, output_type, opset)
    return cast_forms[0] if cast_forms else None


def runs_form(
    profile: RuntimeProfile, form: Form, source: ir.DataType | None, opset: int | None
) -> bool:
    """Whether the runtime runs ``form`` of an EyeLike whose input has type ``source``."""
    if source in profile.lacks or form.output_type in profile.lacks:
        return False
    if isinstance(form, Lowered):
        return profile.runs_lowered(source, form.output_type)
    return (
        profile.runs_cast(source, form.input_type, opset)
        and profile.runs_eyelike(form.input_type, form.dtype, opset) is True
        and profile.runs_cast(form.eyelike_output, form.output_type, opset)
    )


@dataclasses.dataclass(frozen=True)
class Choice:
    """What :func:`choose_form` found.

    Attributes:
        form: the cheapest form that runs on the target and keeps running wherever the
            node ran; None when there is none.
        lacked: types of the node the target cannot hold at all (then no form runs).
        blocked_by: runtimes that ran the node as it was but run none of the forms the
            target runs (why ``form`` is None when nothing is lacked).
    """

    form: Form | None
    lacked: tuple[ir.DataType, ...] = ()
    blocked_by: tuple[str, ...] = ()


def choose_form(
    target: RuntimeProfile,
    others: Sequence[RuntimeProfile],
    source: ir.DataType | None,
    dtype: ir.DataType | None,
    output_type: ir.DataType,
    opset: int | None,
    *,
    lowerable: bool,
) -> Choice:
    """The cheapest form of EyeLike(``source``, ``dtype``) for ``target``, breaking no other.

    Call it for a node the target does not run as it is. Cast forms come first, cheapest
    first by the target's costs, then the lowered form when ``lowerable`` (the node's
    opset has Range and its ``k`` is known). A form is taken only when every runtime of
    ``others`` that runs the node as it is also runs that form.
    """
    lacked = tuple(target.lacking([source, output_type]))
    if lacked:
        return Choice(None, lacked=lacked)
    ran = [p for p in others if p.runs_eyelike(source, dtype, opset) is True]
    forms: list[Form] = list(_cast_forms(target.support, source, output_type, opset, target))
    if lowerable and runs_form(target, Lowered(output_type), source, opset):
        forms.append(Lowered(output_type))
    for form in forms:
        if all(runs_form(other, form, source, opset) for other in ran):
            return Choice(form)
    blocked = tuple(
        p.runtime for p in ran if not all(runs_form(p, f, source, opset) for f in forms)
    )
    return Choice(None, blocked_by=blocked if forms else ())
