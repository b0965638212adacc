"""A model with only its EyeLike nodes onnxruntime cannot run lowered: a sound way to run it.

onnxruntime implements 37 of EyeLike's 182 type combinations, so it refuses to load many
real exports (MossFormer's ``torch.eye(n, dtype=torch.bool)``: "Could not find an
implementation for EyeLike(9)"), and onnx's reference evaluator cannot run every model
either (MossFormer's negative Pad). ``--check`` then runs the model on onnxruntime with
each EyeLike onnxruntime cannot run replaced by its lowering
(:class:`~eyefold.passes.lower_eye_like.LowerEyeLikePass`: Shape, Range, Equal and Cast),
which gives EyeLike's exact bits in all 182 type combinations
(``tests/passes/test_lower_eye_like.py``). Every other node runs as it is, so the check
compares what the model computes, EyeLike included.
"""

from __future__ import annotations

import dataclasses
import os

import onnx
import onnx_ir as ir

from eyefold.core.scopes import Scope
from eyefold.passes.infer_input_shapes import InferEyeLikeInputShapesPass
from eyefold.passes.lower_eye_like import LowerEyeLikePass
from eyefold.runtime.support import get_support

__all__ = ["LOWERED_NOTE", "Lowered", "lower_unrunnable"]

# How the summary says what was run in place of the EyeLike nodes.
LOWERED_NOTE = "lowered into Range/Equal/Cast (bit-exact in all 182 type pairs)"


@dataclasses.dataclass
class Lowered:
    """The model to run and what was lowered in it.

    Attributes:
        model: the model with the unrunnable EyeLike nodes lowered.
        nodes: the names of the EyeLike nodes lowered.
    """

    model: ir.Model
    nodes: list[str]

    def describe(self) -> str:
        """E.g. ``its EyeLike node onnxruntime cannot run (/inner/EyeLike) lowered...``."""
        count = len(self.nodes)
        nodes = "EyeLike node" if count == 1 else f"{count} EyeLike nodes"
        return f"its {nodes} onnxruntime cannot run ({', '.join(self.nodes)}) {LOWERED_NOTE}"


def _load(source: str | bytes | onnx.ModelProto) -> ir.Model:
    from eyefold.model_files import load_model

    if isinstance(source, (str, os.PathLike)):
        return load_model(source)
    proto = onnx.load_from_string(source) if isinstance(source, bytes) else source
    return ir.serde.deserialize_model(proto)


def lower_unrunnable(source: str | bytes | onnx.ModelProto) -> Lowered | None:
    """The model of ``source`` with the EyeLike nodes onnxruntime cannot run lowered.

    The types of EyeLike inputs nothing declares are inferred first (a lowering needs the
    output type); nothing else changes. Returns None when every EyeLike runs already, or
    when one that does not cannot be lowered (below opset 11, type unknown): the model
    cannot be made runnable this way.
    """
    model = _load(source)
    InferEyeLikeInputShapesPass()(model)
    support = get_support("onnxruntime", probe=True)

    def unrunnable(scope: Scope, node: ir.Node) -> bool:
        source_value = node.inputs[0] if node.inputs else None
        dtype_code = node.attributes.get_int("dtype")
        dtype = ir.DataType(dtype_code) if dtype_code is not None else None
        source_type = source_value.dtype if source_value is not None else None
        return support.verdict(source_type, dtype, scope.opset) is not True

    result = LowerEyeLikePass(select=unrunnable)(model)
    if not result.outcomes or not all(o.lowered for o in result.outcomes):
        return None
    return Lowered(model, [o.name for o in result.outcomes])
