"""Cast(EyeLike(Cast(x, to=s), k, dtype?), to=t) -> EyeLike(x, k, dtype=t).

This is the opset-9 bfloat16 workaround: EyeLike-9 has no bfloat16, so exporters make a
float identity and cast it, ``Cast(EyeLike(Cast(x, to=FLOAT)), to=BFLOAT16)``. From opset
22 EyeLike makes bfloat16 itself, and the three nodes become one. The same holds for any
pair of types.

Identity: the inner Cast keeps the shape of x and EyeLike reads only the shape (its
output type comes from ``s`` or its ``dtype``), so ``EyeLike(Cast(x))`` is the EyeLike of
x made in that type; the outer Cast of a 0/1 matrix is the same matrix made in ``t``.

Why it is exact: it composes ``drop_input_producer`` and ``cast_to_dtype``, both exact;
0 and 1 are exact in every EyeLike type.

Conditions:
    * x has a known type that is a valid EyeLike input type at the opset in force;
    * ``t`` is a valid EyeLike output type at that opset (bfloat16 only from opset 22,
      so below 22 the outer Cast to bfloat16 stays);
    * both intermediate values are used only inside the pattern and are not graph
      outputs.
"""

from __future__ import annotations

import onnx_ir as ir

from eyefold.core.rule_spec import MatchResult, Reach, RuleSpec, match_result
from eyefold.rules._common import (
    adopt_shape,
    eyelike_attributes,
    eyelike_k,
    legalized_for,
    scope_opset,
    shapes_agree,
    valid_eyelike_type,
)

__all__ = ["CastEyeLikeCast", "spec"]


class CastEyeLikeCast:
    """Collapses a Cast -> EyeLike -> Cast chain into one EyeLike."""

    def pattern(self, op, x, inner, to):
        """Cast(x) feeding an EyeLike feeding a Cast."""
        cast_in = op.Cast(x, to=inner, _outputs=["cast_in"])
        eye = op.EyeLike(cast_in, _outputs=["eye"])
        return op.Cast(eye, to=to)

    def check(
        self,
        context,
        x: ir.Value,
        inner: ir.Attr,
        to: ir.Attr,
        cast_in: ir.Value,
        eye: ir.Value,
    ) -> MatchResult:
        """Accepts when x and the final type are EyeLike types at the opset."""
        del inner
        result = match_result()
        if (runtime := legalized_for(eye.producer())) is not None:
            return result.fail(f"EyeLike was legalized for {runtime}; its Casts stay")
        if not shapes_agree(x, cast_in):
            return result.fail("declared shapes of the Cast input and output disagree")
        opset = scope_opset(context.graph_or_function, context.model)
        if not valid_eyelike_type(x.dtype, opset):
            return result.fail(f"x has no valid EyeLike input type at opset {opset}")
        if to.type != ir.AttributeType.INT or not valid_eyelike_type(to.as_int(), opset):
            return result.fail(f"final Cast target is not an EyeLike type at opset {opset}")
        if eyelike_k(eye.producer()) is None:
            return result.fail("EyeLike k attribute is not an int")
        return result

    def rewrite(
        self,
        op,
        x: ir.Value,
        inner: ir.Attr,
        to: ir.Attr,
        cast_in: ir.Value,
        eye: ir.Value,
    ) -> ir.Value:
        """One EyeLike on x, made in the final type."""
        del inner
        node = eye.producer()
        adopt_shape(x, cast_in)  # Cast preserves shape
        attributes = eyelike_attributes(eyelike_k(node) or 0, ir.DataType(to.as_int()))
        return op.EyeLike(x, _name=node.name, **attributes)


# Root: the Cast after the EyeLike, which becomes an EyeLike; another Cast feeds it.
REACH = Reach(frozenset({"Cast"}), depth=1, replaces=frozenset({"Cast"}))
# Dims left symbolic, so nothing folds first.
FIRING_MODEL = """<ir_version: 10, opset_import: ["" : 22]>
agraph (float[N, M] x) => (y) {
    c = Cast<to=7>(x)
    e = EyeLike(c)
    y = Cast<to=1>(e)
}"""
spec = RuleSpec.declare(
    __name__,
    __doc__,
    CastEyeLikeCast,
    exactness="exact",
    phase="before-fold",
    reach=REACH,
    firing_model=FIRING_MODEL,
)
__getattr__ = spec.module_attribute  # `rule`: the onnxscript rule, built on first use
