"""MatMul with an exact identity operand -> the other operand: the shared matching logic.

``matmul_int_identity`` (exact) and ``matmul_float_identity`` (relaxed) differ only in
which element types they accept (:data:`INTEGER_TYPES` or :data:`FLOAT_TYPES`) and in
their exactness; both subclass :class:`MatMulIdentityBase`.
"""

from __future__ import annotations

from typing import ClassVar

import onnx_ir as ir

from eyefold.core.rule_spec import (
    Exactness,
    MatchResult,
    Mismatch,
    Reach,
    RuleSpec,
    match_result,
)
from eyefold.rules._common import constant_tensor, identity_operand, same_dim

__all__ = [
    "FLOAT_TYPES",
    "INTEGER_TYPES",
    "MatMulIdentityBase",
    "identity_rule_class",
    "identity_side",
    "identity_spec",
]

# Root: the MatMul that reads the identity, which the rewrite removes.
_REACH = Reach(frozenset({"MatMul"}), depth=1, replaces=frozenset({"MatMul"}))

# The integer types MatMul accepts (bool is not a MatMul type): exact.
INTEGER_TYPES = frozenset(
    {ir.DataType.INT32, ir.DataType.INT64, ir.DataType.UINT32, ir.DataType.UINT64}
)
# The floating types MatMul accepts: relaxed (IEEE special values, the sign of zero).
FLOAT_TYPES = frozenset(
    {ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16}
)


def _contracted_dim(other: ir.Value, identity_on_right: bool) -> int | ir.SymbolicDim | None:
    """The dim of ``other`` that MatMul contracts with the identity (None when unknown)."""
    shape = other.shape
    if shape is None:  # a Constant node's output carries its shape in the tensor
        tensor = constant_tensor(other)
        shape = tensor.shape if tensor is not None else None
    if shape is None or len(shape) == 0:
        return None
    dims = shape.dims
    if identity_on_right or len(dims) == 1:
        return dims[-1]
    return dims[-2]


def identity_side(a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.DataType] | str:
    """The operand MatMul(a, b) equals, with its type, or why neither side qualifies.

    The identity must be square ``n x n`` with the contracted dim of the other operand
    provably ``n`` (a dim known only at run time is not enough) and the same element type
    (declared, or implied by MatMul's single type variable), so the product has exactly
    the other operand's shape and type (broadcasting cannot change it: I is 2-D).
    """
    reasons = []
    for identity, other, on_right in ((b, a, True), (a, b, False)):
        found = identity_operand(identity)
        if found is None:
            continue
        size, dtype = found
        # MatMul types both operands alike (T), so an untyped other operand is `dtype`.
        if other.dtype not in (None, dtype):
            reasons.append(f"other operand type is not {dtype.name}")
            continue
        contracted = _contracted_dim(other, on_right)
        if contracted is None or not same_dim(contracted, size):
            reasons.append("contracted dim of the other operand is not provably the size")
            continue
        return other, dtype
    return "; ".join(reasons) or "no operand is an exact square identity"


class MatMulIdentityBase:
    """MatMul(A, I) -> A and MatMul(I, A) -> A for the element types in ``DTYPES``."""

    DTYPES: ClassVar[frozenset[ir.DataType]] = frozenset()

    def pattern(self, op, a, b):
        """Any MatMul; check() looks for the identity on either side."""
        return op.MatMul(a, b, _outputs=["product"])

    def check(self, context, a: ir.Value, b: ir.Value, product: ir.Value) -> MatchResult:
        """Accepts when one side is an exact identity matching the other side."""
        del context, product
        result = match_result()
        declared = {a.dtype, b.dtype} - {None}
        if declared and not declared & self.DTYPES:  # before reading any constant
            return result.fail(Mismatch("element type is not one this rule handles"))
        side = identity_side(a, b)
        if isinstance(side, str):
            return result.fail(side)
        if side[1] not in self.DTYPES:
            name = side[1].name
            return result.fail(Mismatch(f"element type {name} is not one this rule handles"))
        return result

    def rewrite(self, op, a: ir.Value, b: ir.Value, product: ir.Value) -> ir.Value:
        """The other operand; through an Identity only when a graph output name needs it."""
        side = identity_side(a, b)
        assert not isinstance(side, str)  # check() accepted it
        other = side[0]
        # A product that is a graph output must keep its name. The other operand takes it
        # over unless it has a name of its own to keep (a graph input, output,
        # initializer or outer-scope value); only then does an Identity carry the name.
        producer = other.producer()
        owner = product.producer().graph
        if product.is_graph_output() and (
            other.is_graph_input()
            or other.is_graph_output()
            or other.is_initializer()
            or producer is None
            or producer.graph is not owner
        ):
            return op.Identity(other)
        return other


def identity_rule_class(module_name: str, name: str, dtypes: frozenset[ir.DataType]) -> type:
    """The MatMul-by-identity rule class for ``dtypes``: a :class:`MatMulIdentityBase`.

    The two rule modules differ only in their types and exactness; each calls this and
    declares its own spec.
    """
    attributes = {"DTYPES": dtypes, "__doc__": name, "__module__": module_name}
    return type(name, (MatMulIdentityBase,), attributes)


def identity_spec(
    module_name: str,
    module_doc: str | None,
    rule_class: type,
    exactness: Exactness,
    dtypes: frozenset[ir.DataType],
    element_type: str,
) -> RuleSpec:
    """The spec of one MatMul-by-identity rule: phase and reach are the family's.

    Its firing model multiplies by an EyeLike of ``element_type`` (ONNX text's name).
    """
    firing_model = f"""<ir_version: 10, opset_import: ["" : 22]>
agraph ({element_type}[3, 4] a, {element_type}[4, 4] z) => (y) {{
    i = EyeLike(z)
    y = MatMul(a, i)
}}"""
    return RuleSpec.declare(
        module_name,
        module_doc,
        rule_class,
        exactness=exactness,
        # After folding: a folded EyeLike is the identity constant the pattern reads.
        phase="after-fold",
        reach=_REACH,
        firing_model=firing_model,
        constant_dtypes=dtypes,
    )
