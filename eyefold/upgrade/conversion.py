"""Run the version converters on one graph body without copying its weights.

onnx.version_converter works on a ModelProto (2 GiB protobuf limit), keeps only the main
graph (model-local functions are dropped) and runs onnx's shape inference first, which
segfaults on an EyeLike with a ``dtype`` whose input type is unknown. So each graph body
(the main graph, or one function body) is handed to it as its own small ModelProto:

* initializers and ``Constant`` tensors over ``WEIGHTLESS_TENSOR_LIMIT_BYTES`` become typed
  graph inputs (shape inference needs only their type; the data is never serialized;
  see :mod:`eyefold.core.weightless`);
* every EyeLike becomes a placeholder with the same output type and shape:
  ``Cast(x, to=dtype)`` when it has a ``dtype`` (``to=@dtype`` when that is a function
  attribute), else ``Identity(x)``. EyeLike-9 and EyeLike-22 differ only in allowing
  bfloat16, so the converters have nothing to do to them, and the placeholders also go
  to onnx's checker;
* nodes taking an attribute from the function's attributes (``ref_attr_name``) are passed
  through unchanged when their op has no newer version up to the target, because the
  C++ converter silently drops such references (and onnxscript's refuses them); otherwise
  the conversion stops with an error.

From opset 18 the same weightless proto goes through onnxscript's converter instead (see
:func:`_convert`). Nodes the converters did not change are recognized afterwards by their
serialized bytes and kept as they are (see :mod:`eyefold.upgrade.writeback_ir` and
:mod:`eyefold.upgrade.writeback_proto`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import onnx
import onnx_ir as ir

from eyefold.core.domains import DEFAULT_DOMAINS, default_opset
from eyefold.core.metadata_keys import HIDDEN_DOMAIN
from eyefold.core.onnx_safety import replacement_ops, restore_names
from eyefold.core.onnxscript_internals import version_converter
from eyefold.core.proto_subgraphs import BodyColumns, body_columns
from eyefold.core.weightless import ir_large_constant, is_large, typed_value_input
from eyefold.errors import InvalidModelError, UpgradeError, one_line
from eyefold.upgrade.legacy_fixes import (
    LEGACY_MIN_OPSET,
    convert_opset_6_to_7,
    keep_resize_10_coordinates,
    refuse_lossy_adapters,
    upsample_inputs,
)
from eyefold.upgrade.onnxscript_conversion import (
    NATIVE_MIN_OPSET,
    convert_with_onnxscript,
    onnxscript_adapts,
)
from eyefold.upgrade.proto_graphs import iter_proto_graphs

__all__ = [
    "BodyConversion",
    "GraphConversion",
    "check_source_opset",
    "convert_body",
    "convert_graph",
    "iter_proto_graphs",
]


@dataclasses.dataclass
class GraphConversion:
    """One weightless graph body before and after the converters.

    Attributes:
        before: the ModelProto handed to the converter (placeholders in place).
        after: the converter's result.
        opaque: output-name tuples of the nodes the converter must not change (EyeLike
            placeholders, nodes with attribute references), mapped to the NodeProto the
            checked copy of the result must hold instead of the converter's (None: the
            converter's is right).
        placeholders: output-name tuples of the EyeLike placeholders, so messages about them
            can name EyeLike.
    """

    before: onnx.ModelProto
    after: onnx.ModelProto
    opaque: dict[tuple[str, ...], onnx.NodeProto | None]
    placeholders: set[tuple[str, ...]] = dataclasses.field(default_factory=set)


@dataclasses.dataclass
class BodyConversion:
    """One onnx-ir graph body and the conversion of its weightless proto.

    Attributes:
        body: the ir graph or function that was converted.
        nodes: the body's nodes that were serialized, aligned with
            ``proto.before.graph.node`` (large Constant nodes are left out).
        proto: the conversion itself.
    """

    body: ir.Graph | ir.Function
    nodes: list[ir.Node]
    proto: GraphConversion


def _has_newer_version(op_type: str, source: int, target: int) -> bool:
    try:
        schema = onnx.defs.get_schema(op_type, max_inclusive_version=target, domain="")
    except onnx.defs.SchemaError:
        return False  # unknown op: the converter itself reports it
    return schema.since_version > source


def _mark_opaque(
    body: BodyColumns,
    opaque: dict[tuple[str, ...], onnx.NodeProto | None],
    where: str | None,
    versions: tuple[int, int],
) -> None:
    """Replaces EyeLike by placeholders and records the nodes the converter must leave alone.

    ``where`` names the function when the graph belongs to one (only function bodies can
    hold attribute references), else None.
    """
    # Outside functions only EyeLike nodes are marked: the rest is not looked at one by one.
    nodes = body.nodes if where is not None else body.with_op("EyeLike")
    for node in nodes:
        if node.op_type == "EyeLike" and node.domain in DEFAULT_DOMAINS:
            dtype = next((a for a in node.attribute if a.name == "dtype"), None)
            del node.attribute[:]
            node.op_type = "Identity" if dtype is None else "Cast"
            if dtype is None or not dtype.ref_attr_name:
                if dtype is not None:
                    node.attribute.append(onnx.helper.make_attribute("to", dtype.i))
                opaque[tuple(node.output)] = None
                continue
            # dtype from a function attribute: Cast(to=@dtype), which the converter damages
            # (it drops references), so the checked copy gets this placeholder back.
            to = node.attribute.add(name="to", ref_attr_name=dtype.ref_attr_name)
            to.type = onnx.AttributeProto.INT
            placeholder = onnx.NodeProto()
            placeholder.CopyFrom(node)
            opaque[tuple(node.output)] = placeholder
        elif where is not None and node.domain in DEFAULT_DOMAINS:
            if not any(a.ref_attr_name for a in node.attribute):
                continue
            if _has_newer_version(node.op_type, *versions):
                label = node.name or node.op_type
                raise UpgradeError(
                    f"{where}: node {label!r} ({node.op_type}) takes an attribute from the"
                    f" function's attributes; onnx's version converter cannot convert it"
                    f" from opset {versions[0]} to {versions[1]}; run with upgrade=False"
                )
            original = onnx.NodeProto()
            original.CopyFrom(node)
            opaque[tuple(node.output)] = original


def _body_proto(
    body: ir.Graph | ir.Function, nodes: list[ir.Node], hidden: list[ir.Node]
) -> onnx.ModelProto:
    """A ModelProto of the body, large tensors declared as typed graph inputs."""
    graph = body if isinstance(body, ir.Graph) else body.graph
    small, large = [], []
    for value in graph.initializers.values():
        tensor = value.const_value
        fits = tensor is not None and not is_large(tensor.nbytes)
        (small if fits else large).append(value)
    view = ir.GraphView(
        inputs=list(body.inputs),
        outputs=list(body.outputs),
        nodes=nodes,
        initializers=small,
        name=graph.name or "eyefold_upgrade",
    )
    model = onnx.ModelProto()
    proto = model.graph
    ir.serde.serialize_graph_into(proto, view)
    declared = {value.name for value in body.inputs}
    for value in large:
        if value.name not in declared:
            proto.input.append(typed_value_input(value, value.const_value))
    for node in hidden:
        tensor = node.attributes["value"].as_tensor()
        proto.input.append(typed_value_input(node.outputs[0], tensor))
    return model


@dataclasses.dataclass(frozen=True)
class BodyUpgrade:
    """What one graph body is converted from and to.

    Attributes:
        opset_imports: the body's opset imports (the default domain's included).
        source: its default-domain opset.
        target: the opset to reach.
        ir_version: the model's ir_version.
        where: the body in words, for messages ("main graph", a function's label).
    """

    opset_imports: dict[str, int]
    source: int
    target: int
    ir_version: int
    where: str


def function_upgrade(
    opset_imports: Mapping[str, int], model: BodyUpgrade, where: str
) -> BodyUpgrade | None:
    """The upgrade of a model-local function, or None when it is at the target already.

    A function that imports no default-domain opset has the model's (``model.source``).
    """
    imports = dict(opset_imports)
    source = default_opset(imports) or model.source
    if source >= model.target:
        return None
    if default_opset(imports) is None:
        imports[""] = source
    return BodyUpgrade(imports, source, model.target, model.ir_version, where)


def convert_body(body: ir.Graph | ir.Function, upgrade: BodyUpgrade) -> BodyConversion:
    """Converts one onnx-ir graph body (see :func:`convert_graph`); changes nothing in it.

    Raises:
        UpgradeError: as :func:`convert_graph`.
    """
    check_source_opset(upgrade.source, upgrade.where)
    hidden = [node for node in body if ir_large_constant(node)]
    hidden_ids = {id(node) for node in hidden}
    nodes = [node for node in body if id(node) not in hidden_ids]
    before = _body_proto(body, nodes, hidden)
    conversion = convert_graph(before, upgrade, in_function=isinstance(body, ir.Function))
    return BodyConversion(body, nodes, conversion)


def check_source_opset(source: int, where: str) -> None:
    """Refuses a source opset older than eyefold upgrades.

    Raises:
        UpgradeError: names the body and the opsets.
    """
    if source < LEGACY_MIN_OPSET:
        raise UpgradeError(
            f"{where}: opset {source} is older than opset {LEGACY_MIN_OPSET}, the oldest"
            f" eyefold upgrades; run with upgrade=False to keep opset {source}"
        )


def convert_graph(
    before: onnx.ModelProto, upgrade: BodyUpgrade, *, in_function: bool
) -> GraphConversion:
    """Converts one weightless graph body, ``before.graph``, from ``source`` to ``target``.

    ``before`` is the caller's own model of the weightless body, handed to the converter
    as it is (a body of tens of thousands of nodes is not copied once more); its IR
    version and opset imports are set here, and its EyeLike nodes become placeholders in
    place. Below opset 7 eyefold writes the opset-7 form itself and the converter starts
    from there (see :mod:`eyefold.upgrade.legacy_fixes`).

    Raises:
        UpgradeError: the source opset is older than eyefold upgrades, a node's conversion
            would change its results, or the converter failed; the message names the body
            and the opsets.
    """
    source, target, where = upgrade.source, upgrade.target, upgrade.where
    check_source_opset(source, where)
    opaque: dict[tuple[str, ...], onnx.NodeProto | None] = {}
    known: set[str] = set()
    graph = before.graph
    # Read before the placeholders replace EyeLike; they hold no subgraphs, so the body's
    # graphs are the same before and after.
    bodies = body_columns(graph)
    placeholders = {
        tuple(node.output)
        for body in bodies
        for node in body.with_op("EyeLike")
        if node.domain in DEFAULT_DOMAINS
    }
    upsamples = upsample_inputs(bodies) if source < 11 else set()
    for body in bodies:
        _mark_opaque(body, opaque, where if in_function else None, (source, target))
        known.update(t.name for t in body.graph.initializer)
    before.ir_version = upgrade.ir_version
    del before.opset_import[:]
    for domain, version in upgrade.opset_imports.items():
        before.opset_import.add(domain=domain, version=version)
    refuse_lossy_adapters(graph, source, where)
    start = convert_opset_6_to_7(before, where) if source < 7 else before
    try:
        after = _convert(start, source, target, where)
    except UpgradeError as error:  # its text may name a placeholder: say EyeLike
        _refuse_if_invalid(before, placeholders, source)
        nodes_before = (n for g in iter_proto_graphs(graph) for n in g.node)
        ops = replacement_ops(nodes_before, placeholders)
        names = {HIDDEN_DOMAIN: "ai.onnx"}
        raise UpgradeError(restore_names(str(error), ops, names)) from None
    _finish_graph(after.graph, known, (source, where), upsamples)
    return GraphConversion(before, after, opaque, placeholders)


def _refuse_if_invalid(
    before: onnx.ModelProto, placeholders: set[tuple[str, ...]], source: int
) -> None:
    """Blames the input, not the converter, when onnx's checker refuses it as given.

    An exporter that writes an op its opset lacks (jax2onnx's BitwiseXor at opset 17)
    makes the converter fail with "No Adapter From Version"; the checker's line says what
    is wrong. Run only once the converter failed: a full check of every upgraded model
    costs the converter's time again.

    Raises:
        InvalidModelError: the checker's first complaint, the op named.
    """
    from eyefold.upgrade.validation import checker_problem  # it imports this module

    problem = checker_problem(before, placeholders)
    if problem is not None:
        raise InvalidModelError(f"the model is invalid at opset {source}{problem}")


def _finish_graph(
    graph: onnx.GraphProto,
    known: set[str],
    source_where: tuple[int, str],
    upsamples: set[tuple[str, str]],
) -> None:
    """The legacy fixes on a converted graph and its subgraphs, each read once."""
    _new_initializers_to_constants(graph, known)
    body = BodyColumns.of(graph)
    keep_resize_10_coordinates(body, *source_where, upsamples)
    for subgraph in body.subgraphs():
        _finish_graph(subgraph, known, source_where, upsamples)


def _convert(before: onnx.ModelProto, source: int, target: int, where: str) -> onnx.ModelProto:
    """Converts with onnxscript's converter from opset 18, else with onnx's C++ one.

    onnx's C++ converter registers a plain version bump for GroupNormalization 20 -> 21
    after the adapter that turns per-group scale and bias into per-channel ones, so its
    output computes something else; onnxscript's converter adapts it. Where onnxscript's
    adapter registry has nothing for the body's ops in the range, its converter would only
    bump versions, as onnx's does, and onnx's (no Python round trip) is used.
    """
    reached = default_opset({o.domain: o.version for o in before.opset_import}) or source
    proto = before
    if source >= NATIVE_MIN_OPSET and onnxscript_adapts(before.graph, source, target):
        reached = min(target, version_converter().SUPPORTED_MAX_ONNX_OPSET)
        proto = convert_with_onnxscript(before, source, reached, where)
    if reached == target:
        return proto
    try:
        return onnx.version_converter.convert_version(proto, target)
    except Exception as error:  # onnx raises RuntimeError, ValueError or its own types
        detail = one_line(str(error)) or repr(error)
        raise UpgradeError(
            f"{where}: onnx's version converter failed from opset {reached} to {target}:"
            f" {detail}; run with upgrade=False to keep opset {source}"
        ) from None


def _new_initializers_to_constants(graph: onnx.GraphProto, known: set[str]) -> None:
    """Turns the initializers an adapter added (e.g. Pad-11's pads) into Constant nodes.

    Function bodies cannot hold initializers, and a Constant node maps onto any body.
    """
    added = [t for t in graph.initializer if t.name not in known]
    if not added:
        return
    kept = [t for t in graph.initializer if t.name in known]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    names = {t.name for t in added}
    inputs = [i for i in graph.input if i.name not in names]
    del graph.input[:]
    graph.input.extend(inputs)
    constants = [onnx.helper.make_node("Constant", [], [t.name], value=t) for t in added]
    nodes = constants + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
