"""Cast(EyeLike(x, k, dtype?), to=t) -> EyeLike(x, k, dtype=t).

Identity: casting an EyeLike output to ``t`` gives the EyeLike of the same input, k and
shape made directly in ``t``.

Why it is exact: an EyeLike output holds only 0 and 1, and every EyeLike type (bool, the
integers, float16, bfloat16, float, double) represents both exactly, so Cast maps 0 to 0
and 1 to 1 (``True``/``False`` for bool) whatever the source type. No rounding, no
saturation, no sign of zero is involved.

Conditions:
    * ``t`` is a valid EyeLike output type at the opset in force (bfloat16 only from
      opset 22; string, complex and float8 never);
    * the EyeLike output is used only by the Cast and is not a graph output (otherwise
      both would stay).
"""

from __future__ import annotations

import onnx_ir as ir

from eyefold.core.rule_spec import MatchResult, Reach, RuleSpec, match_result
from eyefold.rules._common import (
    eyelike_attributes,
    eyelike_k,
    legalized_for,
    scope_opset,
    valid_eyelike_type,
)

__all__ = ["CastToDtype", "spec"]


class CastToDtype:
    """Folds a Cast of an EyeLike output into the EyeLike's ``dtype`` attribute."""

    def pattern(self, op, x, to):
        """EyeLike(x) feeding a Cast."""
        eye = op.EyeLike(x, _outputs=["eye"])
        return op.Cast(eye, to=to)

    def check(self, context, x: ir.Value, to: ir.Attr, eye: ir.Value) -> MatchResult:
        """Accepts when ``to`` is an EyeLike type at the opset and k is well formed."""
        del x  # EyeLike reads only its shape, which the new node reads the same way
        result = match_result()
        if (runtime := legalized_for(eye.producer())) is not None:
            return result.fail(f"EyeLike was legalized for {runtime}; its Casts stay")
        opset = scope_opset(context.graph_or_function, context.model)
        if to.type != ir.AttributeType.INT or not valid_eyelike_type(to.as_int(), opset):
            return result.fail(f"Cast target is not an EyeLike output type at opset {opset}")
        if eyelike_k(eye.producer()) is None:
            return result.fail("EyeLike k attribute is not an int")
        return result

    def rewrite(self, op, x: ir.Value, to: ir.Attr, eye: ir.Value) -> ir.Value:
        """One EyeLike made directly in the Cast's target type."""
        node = eye.producer()
        k = eyelike_k(node) or 0
        attributes = eyelike_attributes(k, ir.DataType(to.as_int()))
        return op.EyeLike(x, _name=node.name, **attributes)


# Root: the Cast after the EyeLike, which becomes an EyeLike.
REACH = Reach(frozenset({"Cast"}), depth=1, replaces=frozenset({"Cast"}))
# Dims left symbolic, so nothing folds first.
FIRING_MODEL = """<ir_version: 10, opset_import: ["" : 22]>
agraph (float[N, M] x) => (y) {
    e = EyeLike<k=1>(x)
    y = Cast<to=11>(e)
}"""
spec = RuleSpec.declare(
    __name__,
    __doc__,
    CastToDtype,
    exactness="exact",
    phase="before-fold",
    reach=REACH,
    firing_model=FIRING_MODEL,
)
__getattr__ = spec.module_attribute  # `rule`: the onnxscript rule, built on first use
