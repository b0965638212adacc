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

The slice, its model and the reading of onnx's answer are the file path's too
(:mod:`eyefold.shape_facts.inference_slices`); this pass hands them its onnx-ir graph.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Sequence

import onnx
import onnx_ir as ir

from eyefold.core.metadata_keys import BAKED_IN_KEY, RULE_FACTS_KEY
from eyefold.core.proto_subgraphs import subgraph_attributes
from eyefold.core.run_findings import RunFindings
from eyefold.core.scopes import is_eyelike, iter_scopes, read_values
from eyefold.core.shapes import merge_shapes
from eyefold.core.weightless import (
    ir_constant_input,
    ir_large_constant,
    ir_large_tensor,
    is_large,
)
from eyefold.shape_facts.inference_slices import (
    SLICE_GRAPH_NAME,
    Declaration,
    backward_slice,
    declared_dim_params,
    forget_made_up_dims,
    infer_slice,
    weightless_slice,
)
from eyefold.shape_facts.lost import SHAPE_LOST_KEY, ShapeLoss, input_loss, losses

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


@dataclasses.dataclass
class _RootTargets:
    """The values to learn in one root graph, and the root nodes whose slice computes them."""

    root: ir.Graph
    opset_imports: dict[str, int]
    targets: list[ir.Value] = dataclasses.field(default_factory=list)
    anchors: list[ir.Node] = dataclasses.field(default_factory=list)


def _collect_targets(
    model: ir.Model, operands: RuleOperands, dynamic_inputs: list[ir.Value]
) -> list[_RootTargets]:
    """The values to infer, one entry per root graph.

    EyeLike inputs that are graph inputs with dynamic dims go to ``dynamic_inputs``:
    there is nothing to infer, their shape is lost right there.
    """
    found: dict[int, _RootTargets] = {}
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
            if id(root) not in found:
                opsets = (
                    scope.function.opset_imports if scope.function else model.opset_imports
                )
                found[id(root)] = _RootTargets(root, dict(opsets))
            found[id(root)].targets.extend(wanted)
            top = scope.top_node  # in a subgraph: the root node holding it
            anchors = [top] if top is not None else [value.producer() for value in wanted]
            found[id(root)].anchors.extend(a for a in anchors if a is not None)
    return list(found.values())


class _Reads(Sequence[tuple[ir.Value, ...]]):
    """What each node reads (:func:`~eyefold.core.scopes.read_values`), when asked.

    The slice asks only about its own nodes.
    """

    def __init__(self, nodes: list[ir.Node]) -> None:
        self._nodes = nodes

    def __getitem__(self, position: int) -> tuple[ir.Value, ...]:  # type: ignore[override]
        return tuple(read_values(self._nodes[position]))

    def __len__(self) -> int:
        return len(self._nodes)


class _GraphSource:
    """A root graph as the slice reads it: its values are the keys.

    Only the slice's nodes are serialized, each subgraph among them under a name of its
    own, so that what onnx infers in it maps back (``graph_names``).
    """

    def __init__(self, root: ir.Graph) -> None:
        self.root = root
        self._nodes = list(root)
        self.reads = _Reads(self._nodes)
        self.outputs = [node.outputs for node in self._nodes]
        self.producer = {value: p for p, values in enumerate(self.outputs) for value in values}
        self.large_constants = {
            p for p, node in enumerate(self._nodes) if ir_large_constant(node)
        }
        self.graph_names: dict[str, ir.Graph] = {SLICE_GRAPH_NAME: root}

    def position(self, node: ir.Node) -> int:
        """Where ``node`` stands in the root graph."""
        if node.outputs:
            return self.producer[node.outputs[0]]
        return self._nodes.index(node)

    def nodes(self, positions: list[int]) -> Iterator[onnx.NodeProto]:
        """The nodes at ``positions``, serialized, their subgraphs named."""
        for position in positions:
            node = self._nodes[position]
            proto = ir.serde.serialize_node(node)
            _name_subgraphs(node, proto, self.graph_names)
            yield proto

    def declare(self, value: ir.Value) -> Declaration | None:
        """A large Constant's output, or an initializer or graph input of the root graph."""
        if value.graph is not self.root:
            return None  # a subgraph's own value
        producer = value.producer()
        if producer is not None:  # the slice computes every other produced value
            constant = producer.attributes["value"].value
            return ir_constant_input(value.name or "", constant), ir_large_tensor(constant)
        if not value.name:
            return None
        tensor = value.const_value
        if tensor is not None and not is_large(tensor.nbytes):
            proto = ir.serde.serialize_tensor(tensor)
            proto.name = value.name
            return proto
        large = None if tensor is None or value.is_graph_input() else ir_large_tensor(tensor)
        return ir.serde.serialize_value(value), large


def _name_subgraphs(
    ir_node: ir.Node, proto_node: onnx.NodeProto, names: dict[str, ir.Graph]
) -> None:
    """Gives every serialized subgraph a unique name, mapped to its ir.Graph."""
    for proto_attr, proto_graphs in subgraph_attributes(proto_node):
        ir_attr = ir_node.attributes.get(proto_attr.name)
        if ir_attr is None:
            continue
        if proto_attr.type == onnx.AttributeProto.GRAPH:
            ir_graphs: Sequence[ir.Graph] = [ir_attr.as_graph()]
        else:
            ir_graphs = ir_attr.as_graphs()
        for ir_graph, proto_graph in zip(ir_graphs, proto_graphs, strict=True):
            proto_graph.name = f"eyefold_subgraph_{len(names)}"
            names[proto_graph.name] = ir_graph
            for inner_ir, inner_proto in zip(ir_graph, proto_graph.node, strict=True):
                _name_subgraphs(inner_ir, inner_proto, names)


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
    inputs = [v.name for v in model.graph.inputs if v.name]
    for piece in _collect_targets(model, operands or RuleOperands(), learned.dynamic_inputs):
        source = _GraphSource(piece.root)
        sliced = weightless_slice(
            source,
            backward_slice(source, [source.position(node) for node in piece.anchors]),
            [t.name for t in piece.targets if t.name],
            ir_version=model.ir_version,
            opset_imports=(
                onnx.OperatorSetIdProto(domain=d, version=v)
                for d, v in piece.opset_imports.items()
            ),
            functions=(ir.serde.serialize_function(f) for f in model.functions.values()),
        )
        # onnx's messages name the slice's graphs; say them as the user's model names them.
        for proto_name, ir_graph in source.graph_names.items():
            sliced.defused.names[proto_name] = ir_graph.name or (
                "main graph" if ir_graph is model.graph else "subgraph"
            )
        declared = declared_dim_params(sliced.model)
        root_targets = [t.name for t in piece.targets if t.graph is piece.root and t.name]
        try:
            found = infer_slice(sliced, root_targets, inputs)
        except Exception as error:  # onnx raises several unrelated types here
            message = sliced.defused.restore(str(error))
            learned.failure = f"onnx shape inference failed: {message}"
            logger.warning("%s", learned.failure)
            continue
        types = found.declarations(source.graph_names)
        graph_names = {id(graph): name for name, graph in source.graph_names.items()}
        for target in piece.targets:
            info = types.get((graph_names.get(id(target.graph), ""), target.name or ""))
            if info is not None:
                forget_made_up_dims(info.type, declared)
                learned.types.append((target, info.type))
        sources = [t for t in piece.targets if t.name in root_targets and _feeds_eyelike(t)]
        names = [t.name or "" for t in sources]
        lost = losses(found.inference, names, inputs)
        learned.losses.extend((t, lost[t.name]) for t in sources if t.name in lost)
        used = found.baked_in(names)
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
