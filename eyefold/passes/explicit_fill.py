"""Give the ConstantOfShape feeding an EyeLike the ``value`` the spec gives it by default.

torch.onnx's dynamo exporter writes every ``torch.diagonal`` mask as
``EyeLike(ConstantOfShape(shape))`` with no ``value`` attribute: the spec's default, a float
32 zero. tract (0.23.9) fills such a ConstantOfShape with float64 zeros instead, so where
the model declares that output FLOAT (as eyefold's inference writes it) tract refuses the
model ("Impossible to unify F32 with F64"), and where nothing is declared it computes in
the wrong type. Spelling the default out, a 1-element FLOAT tensor of 0, changes nothing
for any runtime that follows the spec and makes tract compute the same. The edit is made
where eyefold declares the EyeLike's type (``eyefold/passes/infer_eye_like.py``: tract ran the
node undeclared), for a target that needs it (``RuntimeProfile.implicit_fill``) and for the
lowered form, which is written to run everywhere.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

__all__ = ["IMPLICIT_FILL_NOTE", "implicit_fill_producer", "spell_out_fill"]

# What an EyeLike fed by such a ConstantOfShape needs, in words, for the report.
IMPLICIT_FILL_NOTE = "its input is a ConstantOfShape without value"


def implicit_fill_producer(node: ir.Node) -> ir.Node | None:
    """The ConstantOfShape without ``value`` that produces ``node``'s first input, if any."""
    source = node.inputs[0] if node.inputs else None
    producer = source.producer() if source is not None else None
    if producer is None or producer.op_type != "ConstantOfShape" or producer.domain != "":
        return None
    return None if "value" in producer.attributes else producer


def spell_out_fill(producer: ir.Node) -> None:
    """Sets the ConstantOfShape's ``value`` to the spec's default: FLOAT ``[0.0]``."""
    zero = ir.tensor(np.zeros(1, dtype=np.float32), name="value")
    producer.attributes["value"] = ir.AttrTensor("value", zero)
