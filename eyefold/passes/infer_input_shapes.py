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

from eyefold.core.onnx_safety import StandIns
from eyefold.core.run_facts import RunFacts
from eyefold.core.scopes import Scope, is_eyelike, iter_scopes, subgraphs_of
from eyefold.core.shapes import merge_shapes
from eyefold.core.weightless import ir_large_constant, is_large, weightless_model

__all__ = [
    "InferEyeLikeInputShapesPass",
    "InferInputShapesResult",
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


@dataclasses.dataclass
class _Slice:
    """The nodes to serialize for one root graph and the EyeLike inputs to learn."""

    root: ir.Graph
    opset_imports: dict[str, int]
    nodes: list[ir.Node] = dataclasses.field(default_factory=list)
    targets: list[ir.Value] = dataclasses.field(default_factory=list)


def _owner_root(value: ir.Value, roots: set[int]) -> ir.Graph | None:
    graph = value.graph
    return graph if graph is not None and id(graph) in roots else None


def _captured_values(node: ir.Node) -> list[ir.Value]:
    """Inputs of ``node`` and of every node in its subgraphs (outer-scope references)."""
    values = [v for v in node.inputs if v is not None]
    for _, graph in subgraphs_of(node):
        for inner in graph:
            values.extend(_captured_values(inner))
    return values


def _backward_slice(root: ir.Graph, anchors: list[ir.Node]) -> list[ir.Node]:
    """Nodes of ``root`` that the anchors depend on, in the graph's order."""
    selected: set[int] = set()
    work = list(anchors)
    while work:
        node = work.pop()
        if id(node) in selected:
            continue
        selected.add(id(node))
        if ir_large_constant(node):
            continue
        for value in _captured_values(node):
            producer = value.producer()
            if producer is not None and producer.graph is root:
                work.append(producer)
    return [node for node in root if id(node) in selected]


def _collect_slices(model: ir.Model) -> list[_Slice]:
    slices: dict[int, _Slice] = {}
    anchors: dict[int, list[ir.Node]] = {}
    for scope in iter_scopes(model):
        root = scope.function.graph if scope.function is not None else model.graph
        for node in scope.graph:
            if not is_eyelike(node) or len(node.inputs) != 1 or node.inputs[0] is None:
                continue
            source = node.inputs[0]
            if not needs_inference(source):
                continue
            if id(root) not in slices:
                opsets = (
                    scope.function.opset_imports if scope.function else model.opset_imports
                )
                slices[id(root)] = _Slice(root, dict(opsets))
                anchors[id(root)] = []
            slices[id(root)].targets.append(source)
            anchors[id(root)].append(_anchor_in_root(scope, source))
    for key, piece in slices.items():
        piece.nodes = _backward_slice(piece.root, [a for a in anchors[key] if a is not None])
    return list(slices.values())


def _anchor_in_root(scope: Scope, source: ir.Value) -> ir.Node | None:
    """The root-graph node whose backward slice determines ``source``."""
    if scope.top_node is not None:
        return scope.top_node
    return source.producer()


def _free_values(nodes: list[ir.Node], large: set[int]) -> list[ir.Value]:
    """Values the slice reads but does not compute (``large``: ids of big Constant nodes)."""
    produced = {id(out) for node in nodes if id(node) not in large for out in node.outputs}
    free: dict[int, ir.Value] = {}
    for node in nodes:
        if id(node) in large:
            free.update({id(out): out for out in node.outputs})
            continue
        for value in _captured_values(node):
            if id(value) not in produced and value.name and value.graph is node.graph:
                free.setdefault(id(value), value)
    return list(free.values())


def _name_subgraphs(
    ir_node: ir.Node, proto_node: onnx.NodeProto, names: dict[str, ir.Graph]
) -> None:
    """Gives every serialized subgraph a unique name, mapped to its ir.Graph."""
    for proto_attr in proto_node.attribute:
        ir_attr = ir_node.attributes.get(proto_attr.name)
        if ir_attr is None:
            continue
        if proto_attr.type == onnx.AttributeProto.GRAPH:
            pairs = [(ir_attr.as_graph(), proto_attr.g)]
        elif proto_attr.type == onnx.AttributeProto.GRAPHS:
            pairs = list(zip(ir_attr.as_graphs(), proto_attr.graphs, strict=True))
        else:
            continue
        for ir_graph, proto_graph in pairs:
            proto_graph.name = f"eyefold_subgraph_{len(names)}"
            names[proto_graph.name] = ir_graph
            for inner_ir, inner_proto in zip(ir_graph, proto_graph.node, strict=True):
                _name_subgraphs(inner_ir, inner_proto, names)


def _slice_model(
    model: ir.Model, piece: _Slice
) -> tuple[onnx.ModelProto, dict[str, ir.Graph], StandIns]:
    slice_model = onnx.ModelProto()
    graph = slice_model.graph
    graph.name = "eyefold_slice"
    names: dict[str, ir.Graph] = {graph.name: piece.root}
    large = {id(node) for node in piece.nodes if ir_large_constant(node)}
    for value in _free_values(piece.nodes, large):
        tensor = value.const_value
        if tensor is not None and not is_large(tensor.nbytes):
            proto = ir.serde.serialize_tensor(tensor)
            proto.name = value.name or ""
            graph.initializer.append(proto)
        else:
            graph.input.append(ir.serde.serialize_value(value))
    for node in piece.nodes:
        if id(node) in large:
            continue
        proto_node = ir.serde.serialize_node(node)
        _name_subgraphs(node, proto_node, names)
        graph.node.append(proto_node)
    graph.output.extend(onnx.ValueInfoProto(name=v.name) for v in piece.targets if v.name)
    proto, stand_ins = weightless_model(
        slice_model,
        ir_version=model.ir_version,
        opset_imports=(
            onnx.OperatorSetIdProto(domain=d, version=v)
            for d, v in piece.opset_imports.items()
        ),
        functions=(ir.serde.serialize_function(f) for f in model.functions.values()),
    )
    # onnx's messages name the slice's graphs; say them as the user's model names them.
    for proto_name, ir_graph in names.items():
        stand_ins.names[proto_name] = ir_graph.name or (
            "main graph" if ir_graph is model.graph else "subgraph"
        )
    return proto, names, stand_ins


def _declared_dim_params(proto: onnx.ModelProto) -> set[str]:
    """Every dim name the slice holds before inference (the others, onnx made up)."""
    found: set[str] = set()

    def visit(graph: onnx.GraphProto) -> None:
        for info in [*graph.input, *graph.output, *graph.value_info]:
            found.update(d.dim_param for d in info.type.tensor_type.shape.dim)
        for node in graph.node:
            for attr in node.attribute:
                for sub in [attr.g] if attr.HasField("g") else attr.graphs:
                    visit(sub)

    visit(proto.graph)
    return found


def _forget_made_up_dims(type_proto: onnx.TypeProto, declared: set[str]) -> None:
    """Unnames the dims onnx named itself (``unk__0``...): they mean nothing to the user."""
    for dim in type_proto.tensor_type.shape.dim:
        if dim.HasField("dim_param") and dim.dim_param not in declared:
            dim.ClearField("dim_param")


def _inferred_types(
    proto: onnx.ModelProto, names: dict[str, ir.Graph]
) -> dict[tuple[int, str], onnx.TypeProto]:
    found: dict[tuple[int, str], onnx.TypeProto] = {}

    def visit(graph: onnx.GraphProto) -> None:
        ir_graph = names.get(graph.name)
        if ir_graph is not None:
            for info in [*graph.value_info, *graph.output]:
                if info.HasField("type"):
                    found[(id(ir_graph), info.name)] = info.type
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    visit(attr.g)
                for sub in attr.graphs:
                    visit(sub)

    visit(proto.graph)
    return found


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


def _learn(model: ir.Model) -> tuple[list[tuple[ir.Value, onnx.TypeProto]], str | None]:
    """(EyeLike input, inferred type) pairs and the last failure; changes nothing."""
    learned: list[tuple[ir.Value, onnx.TypeProto]] = []
    failure = None
    for piece in _collect_slices(model):
        proto, names, stand_ins = _slice_model(model, piece)
        declared = _declared_dim_params(proto)
        try:
            inferred = onnx.shape_inference.infer_shapes(
                proto, check_type=False, strict_mode=False, data_prop=True
            )
        except Exception as error:  # onnx raises several unrelated types here
            failure = f"onnx shape inference failed: {stand_ins.restore(str(error))}"
            logger.warning("%s", failure)
            continue
        types = _inferred_types(inferred, names)
        for target in piece.targets:
            graph = target.graph
            found = types.get((id(graph), target.name or "")) if graph else None
            if found is not None:
                _forget_made_up_dims(found, declared)
                learned.append((target, found))
    return learned, failure


def infer_eyelike_input_dims(model: ir.Model) -> dict[int, list[int | str | None]]:
    """Dims onnx's inference gives the EyeLike inputs, by ``id()`` of the value.

    For messages about a model that is being refused: nothing in ``model`` changes.
    """
    dims: dict[int, list[int | str | None]] = {}
    for target, type_proto in _learn(model)[0]:
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

    def report_into(self, facts: RunFacts) -> None:
        """A failed (skipped) inference is a warning."""
        if self.failure:
            facts.warnings.append(self.failure)


class InferEyeLikeInputShapesPass(ir.passes.InPlacePass):
    """Fills in the types and shapes of EyeLike inputs with onnx's data-propagating inference.

    Best effort: if onnx's inference raises, the model is left as it was and the failure is
    logged and returned in the result (the fold pass then keeps the affected nodes and
    says why).
    """

    def call(self, model: ir.Model) -> InferInputShapesResult:
        """Runs inference once per root graph whose EyeLike inputs need it."""
        found, failure = _learn(model)
        learned = [target for target, type_proto in found if _apply(target, type_proto)]
        logger.info("EyeLike inputs learned by shape inference: %d", len(learned))
        return InferInputShapesResult(
            model, modified=bool(learned), learned=learned, failure=failure
        )
