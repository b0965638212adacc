"""Learn the static shapes of EyeLike inputs with onnx's shape inference and data propagation.

An EyeLike fed by ConstantOfShape(Concat(Shape(x)...)), MatMul, Reshape or Transpose chains
has a static shape that onnx can compute but the loaded model may not declare. onnx's
inference is C++ and works on protobuf, and an onnx-ir round trip (to_proto + from_proto) of
a 100k-node model costs about 12x its protobuf load+save; onnx-ir's ShapeInferencePass does
exactly that round trip for the whole model. So this pass

* does nothing (no serialization at all) when every EyeLike input is already static;
* otherwise serializes only the backward slice that feeds those inputs (plus the main-graph
  nodes holding subgraphs that contain such an EyeLike), with large initializers replaced
  by typed graph inputs so no weight is copied, and runs inference once per root graph (the
  main graph, and each function that needs it);
* writes back only the types and shapes of the EyeLike inputs, filling what is unknown.
"""

from __future__ import annotations

import dataclasses
import logging

import onnx
import onnx_ir as ir

from eyefold.core.inference_slices import (
    InferenceSlice,
    anchor_in_root,
    backward_slice,
    declared_dim_params,
    forget_made_up_dims,
    inferred_types,
    slice_model,
)
from eyefold.core.metadata_keys import BAKED_IN_KEY, RULE_FACTS_KEY
from eyefold.core.run_findings import RunFindings
from eyefold.core.scopes import is_eyelike, iter_scopes
from eyefold.core.shapes import merge_shapes
from eyefold.shape_facts.lost import (
    SHAPE_LOST_KEY,
    GraphFacts,
    ShapeLoss,
    copy_for_static_dims,
    input_loss,
    losses,
    static_dims_used,
)
from eyefold.shape_facts.rounds import infer_with_values

__all__ = [
    "RULE_FACTS_KEY",
    "InferEyeLikeInputShapesPass",
    "InferInputShapesResult",
    "RuleOperands",
    "infer_eyelike_input_dims",
    "needs_inference",
]

logger = logging.getLogger(__name__)

# Small initializers travel with the slice so data propagation can read them (Reshape
# targets, Gather indices, Concat pieces are a few int64s); weights are declared as typed
# graph inputs instead (eyefold.core.weightless): inference needs only their shape.


def needs_inference(source: ir.Value) -> bool:
    """True when an EyeLike input lacks a static shape or a type that inference may supply."""
    if source.const_value is not None or source.is_graph_input():
        return False
    shape_known = source.shape is not None and source.shape.is_static()
    return not (shape_known and source.dtype is not None)


@dataclasses.dataclass(frozen=True)
class RuleOperands:
    """The operands the rules read next to an EyeLike, which inference should type too.

    Attributes:
        ops: consumer ops whose other operands' types and shapes a rule reads (the masked
            sum's Mul reads its data operand's rank, dims and element type).
        through: ops a rule reads through to reach those consumers (Cast, Identity...).
    """

    ops: frozenset[str] = frozenset()
    through: frozenset[str] = frozenset()

    def of(self, node: ir.Node, depth: int = 3) -> list[ir.Value]:
        """The operands of ``node``'s consumers (through ``through`` ops) to infer."""
        found: list[ir.Value] = []
        frontier = list(node.outputs)
        for _ in range(depth):
            following = []
            for value in frontier:
                for consumer in value.consumers():
                    if consumer.op_type in self.through:
                        following.extend(consumer.outputs)
                    if consumer.op_type in self.ops:
                        found.extend(
                            v for v in consumer.inputs if v is not None and v is not value
                        )
            frontier = following
        return [v for v in found if v.graph is node.graph and needs_inference(v)]


def _collect_slices(
    model: ir.Model, operands: RuleOperands, dynamic_inputs: list[ir.Value]
) -> list[InferenceSlice]:
    """The slices to infer, one per root graph.

    EyeLike inputs that are graph inputs with dynamic dims go to ``dynamic_inputs``:
    there is nothing to infer, their shape is lost right there.
    """
    slices: dict[int, InferenceSlice] = {}
    anchors: dict[int, list[ir.Node]] = {}
    for scope in iter_scopes(model):
        root = scope.function.graph if scope.function is not None else model.graph
        for node in scope.graph:
            if not is_eyelike(node) or len(node.inputs) != 1 or node.inputs[0] is None:
                continue
            source = node.inputs[0]
            if source.is_graph_input() and source.shape and not source.shape.is_static():
                dynamic_inputs.append(source)
            wanted = [source] if needs_inference(source) else []
            wanted += operands.of(node) if operands.ops else []
            if not wanted:
                continue
            if id(root) not in slices:
                opsets = (
                    scope.function.opset_imports if scope.function else model.opset_imports
                )
                slices[id(root)] = InferenceSlice(root, dict(opsets))
                anchors[id(root)] = []
            slices[id(root)].targets.extend(wanted)
            anchors[id(root)].extend(anchor_in_root(scope, value) for value in wanted)
    for key, piece in slices.items():
        piece.nodes = backward_slice(piece.root, [a for a in anchors[key] if a is not None])
    return list(slices.values())


def _apply(target: ir.Value, type_proto: onnx.TypeProto) -> bool:
    changed = False
    if target.type is None and type_proto.HasField("tensor_type"):
        elem = type_proto.tensor_type.elem_type
        if elem:
            target.type = ir.TensorType(ir.DataType(elem))
            changed = True
    inferred = ir.serde.deserialize_type_proto_for_shape(type_proto)
    merged = None if inferred is None else merge_shapes(target.shape, inferred.dims)
    if merged is not None:
        target.shape = merged
        changed = True
    return changed


@dataclasses.dataclass
class _Learned:
    """What inference found for the EyeLike inputs; nothing in the model is changed yet.

    Attributes:
        types: (EyeLike input, inferred type) pairs.
        losses: (EyeLike input, where its shape was lost) for those still not static.
        dynamic_inputs: EyeLike inputs that are graph inputs with dynamic dims.
        baked_in: (EyeLike input, the graph inputs with a static dim its shape was
            computed from) for those that came out static.
        failure: the message of the last inference that failed, if any.
    """

    types: list[tuple[ir.Value, onnx.TypeProto]] = dataclasses.field(default_factory=list)
    losses: list[tuple[ir.Value, ShapeLoss]] = dataclasses.field(default_factory=list)
    dynamic_inputs: list[ir.Value] = dataclasses.field(default_factory=list)
    baked_in: list[tuple[ir.Value, list[str]]] = dataclasses.field(default_factory=list)
    failure: str | None = None


def _learn(model: ir.Model, operands: RuleOperands | None = None) -> _Learned:
    """What onnx's inference, with shape values computed between rounds, finds."""
    learned = _Learned()
    slices = _collect_slices(model, operands or RuleOperands(), learned.dynamic_inputs)
    for piece in slices:
        sliced = slice_model(model, piece)
        proto, names, defused = sliced.proto, sliced.names, sliced.defused
        declared = declared_dim_params(proto)
        root_targets = [t.name for t in piece.targets if t.graph is piece.root and t.name]
        inputs = [v.name for v in model.graph.inputs if v.name]
        built = copy_for_static_dims(proto, inputs)
        try:
            inference = infer_with_values(proto, root_targets, large=sliced.large)
        except Exception as error:  # onnx raises several unrelated types here
            learned.failure = f"onnx shape inference failed: {defused.restore(str(error))}"
            logger.warning("%s", learned.failure)
            continue
        types = inferred_types(inference.model, names)
        for target in piece.targets:
            graph = target.graph
            found = types.get((id(graph), target.name or "")) if graph else None
            if found is not None:
                forget_made_up_dims(found, declared)
                learned.types.append((target, found))
        sources = [t for t in piece.targets if t.name in root_targets and _feeds_eyelike(t)]
        lost = losses(inference, [t.name or "" for t in sources], inputs)
        learned.losses.extend((t, lost[t.name]) for t in sources if t.name in lost)
        if built is not None:
            facts = GraphFacts.before_rounds(built, inference, sliced.large)
            used = static_dims_used(facts, [t.name or "" for t in sources], inputs)
            learned.baked_in.extend((t, used[t.name]) for t in sources if t.name in used)
    return learned


def _feeds_eyelike(value: ir.Value) -> bool:
    return any(is_eyelike(consumer) for consumer in value.consumers())


def _keep_for_rules(target: ir.Value, type_proto: onnx.TypeProto) -> None:
    """What inference found of a rule operand, in its ``meta`` for the rules to read.

    The value itself is left as it was: a shape the rules read and do not rewrite does not
    end up in the saved model.
    """
    inferred = ir.serde.deserialize_type_proto_for_shape(type_proto)
    elem = type_proto.tensor_type.elem_type if type_proto.HasField("tensor_type") else 0
    dtype = target.dtype or (ir.DataType(elem) if elem else None)
    shape = merge_shapes(target.shape, inferred.dims) if inferred is not None else None
    target.meta[RULE_FACTS_KEY] = (dtype, shape if shape is not None else target.shape)


def infer_eyelike_input_dims(model: ir.Model) -> dict[int, list[int | str | None]]:
    """Dims onnx's inference gives the EyeLike inputs, by ``id()`` of the value.

    For messages about a model that is being refused: nothing in ``model`` changes.
    """
    dims: dict[int, list[int | str | None]] = {}
    for target, type_proto in _learn(model).types:
        inferred = ir.serde.deserialize_type_proto_for_shape(type_proto)
        merged = None if inferred is None else merge_shapes(target.shape, inferred.dims)
        shape = merged if merged is not None else target.shape
        if shape is not None:
            dims[id(target)] = [d if isinstance(d, int) else d.value for d in shape.dims]
    return dims


@dataclasses.dataclass
class InferInputShapesResult(ir.passes.PassResult):
    """The pass result.

    Attributes:
        learned: EyeLike inputs whose type or shape the call filled in.
        failure: the message of a failed (skipped) inference, or None.
    """

    learned: list[ir.Value] = dataclasses.field(default_factory=list)
    failure: str | None = None

    def report_into(self, findings: RunFindings) -> None:
        """A failed (skipped) inference is a warning."""
        if self.failure:
            findings.warnings.append(self.failure)


class InferEyeLikeInputShapesPass(ir.passes.InPlacePass):
    """Fills in the types and shapes of EyeLike inputs with onnx's data-propagating inference.

    Best effort: if onnx's inference raises, the model is left as it was and the failure is
    logged and returned in the result (the fold pass then keeps the affected nodes and
    says why).

    Attributes:
        operands: the operands next to an EyeLike that the selected rules read; their
            inferred types go in their ``meta`` (:data:`RULE_FACTS_KEY`), not onto them.
    """

    def __init__(self, operands: RuleOperands | None = None) -> None:
        super().__init__()
        self.operands = operands or RuleOperands()

    def call(self, model: ir.Model) -> InferInputShapesResult:
        """Runs inference once per root graph whose EyeLike inputs (or rule operands) need it.

        An input whose shape stays dynamic gets, in its ``meta`` (never saved), where the
        shape was lost (:data:`~eyefold.shape_facts.lost.SHAPE_LOST_KEY`), for the report.
        """
        found = _learn(model, self.operands)
        learned = []
        for target, type_proto in found.types:
            if not _feeds_eyelike(target):
                _keep_for_rules(target, type_proto)
            elif _apply(target, type_proto):
                learned.append(target)
        for target, loss in found.losses:
            if target.shape is None or not target.shape.is_static():
                target.meta[SHAPE_LOST_KEY] = loss
        for target, names in found.baked_in:
            target.meta[BAKED_IN_KEY] = names
        for source in found.dynamic_inputs:
            dims = [d if isinstance(d, int) else d.value for d in source.shape.dims]
            source.meta[SHAPE_LOST_KEY] = input_loss(source.name or "", dims)
        logger.info("EyeLike inputs learned by shape inference: %d", len(learned))
        return InferInputShapesResult(
            model, modified=bool(learned), learned=learned, failure=found.failure
        )
