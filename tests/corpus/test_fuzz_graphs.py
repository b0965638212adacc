"""Differential graph fuzzing: random valid EyeLike models through ``eyefold.optimize``.

Every generated model mixes EyeLike nodes (all element types, ``dtype`` absent or present,
any ``k``, static / symbolic / zero dims) fed by graph inputs, initializers, Constant
nodes, ConstantOfShape chains and casts, with consumers such as Add, Mul, MatMul, Cast,
Transpose, Relu and Identity, placed in the main graph, in If branches, in Loop bodies and
in model-local functions, at opsets 9..22. For each one:

* the generated model passes the full checker (the generator's own sanity check);
* ``eyefold.optimize`` succeeds and its result passes the full checker;
* the outputs equal the original's bit for bit under onnx's reference evaluator (and
  under onnxruntime when it can run both; it cannot run many EyeLike types);
* optimizing the result again changes nothing (byte-identical serialization);
* two runs on the same input give byte-identical models.

The CI profile is derandomized (a fixed seed) and bounded; set
``EYEFOLD_FUZZ_EXAMPLES=5000`` for the long profile.
"""

from __future__ import annotations

import copy
import dataclasses
import os

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper

import eyefold
from eyefold.options import DEFAULT_SIZE_LIMIT_BYTES
from eyefold.testing import (
    assert_same_outputs,
    canonical,
    check_model_safely,
    onnxruntime_loads,
    random_inputs,
    run_onnxruntime,
)

# Models per run: two thirds through the default pipeline (opset upgrade on), one third
# with --no-upgrade and random other options.
FUZZ_EXAMPLES = int(os.environ.get("EYEFOLD_FUZZ_EXAMPLES", "300"))

FUZZ_SETTINGS = settings(
    max_examples=max(1, FUZZ_EXAMPLES * 2 // 3),
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _schema_types(opset: int) -> list[ir.DataType]:
    """The EyeLike output types onnx's own schema allows at ``opset`` (not eyefold's table)."""
    schema = onnx.defs.get_schema("EyeLike", opset)
    (allowed,) = [
        c.allowed_type_strs for c in schema.type_constraints if c.type_param_str == "T2"
    ]
    names = sorted(text.removeprefix("tensor(").removesuffix(")").upper() for text in allowed)
    return [ir.DataType[name] for name in names]


EYELIKE_TYPES = _schema_types(22)
SOURCES = (
    "input",
    "initializer",
    "constant",
    "constant_of_shape",
    "shape_chain",
    "torch_chain",
    "cast",
    "transpose",
    "identity",
    "eyelike",
)
PLACEMENTS = ("main", "if", "if_local", "loop", "loop_if", "function")
HUGE_KS = [2**63 - 1, -(2**63), 2**40, -(2**40), 2**31, -(2**31) - 1]
FUNCTION_DOMAIN = "pkg.eyefold.fuzz"
# Half the models at opset 22 (the current EyeLike, the only one with bfloat16).
OPSETS = st.one_of(st.just(22), st.integers(9, 21))


def _valid_types(opset: int) -> list[ir.DataType]:
    """EyeLike element types at ``opset``: bfloat16 only from EyeLike-22."""
    return EYELIKE_TYPES if opset >= 22 else _schema_types(9)


def _arith_types(opset: int) -> set[ir.DataType]:
    """Types Add and Mul accept at ``opset`` (never bool)."""
    types = {
        ir.DataType.FLOAT16,
        ir.DataType.FLOAT,
        ir.DataType.DOUBLE,
        ir.DataType.INT32,
        ir.DataType.INT64,
        ir.DataType.UINT32,
        ir.DataType.UINT64,
    }
    if opset >= 13:
        types.add(ir.DataType.BFLOAT16)
    if opset >= 14:
        types |= {ir.DataType.INT8, ir.DataType.INT16, ir.DataType.UINT8, ir.DataType.UINT16}
    return types


def _scalar_tensor(name: str, data_type: ir.DataType, value: float) -> onnx.TensorProto:
    array = np.array([value], dtype=np.float32).astype(data_type.numpy())
    return ir.serde.serialize_tensor(ir.tensor(array, dtype=data_type, name=name))


def _tensor(name: str, data_type: ir.DataType, array: np.ndarray) -> onnx.TensorProto:
    return ir.serde.serialize_tensor(
        ir.tensor(array.astype(data_type.numpy()), dtype=data_type, name=name)
    )


@dataclasses.dataclass
class _Builder:
    """Accumulates the main graph's pieces; hands out unique names."""

    opset: int
    inputs: list[onnx.ValueInfoProto] = dataclasses.field(default_factory=list)
    initializers: list[onnx.TensorProto] = dataclasses.field(default_factory=list)
    outputs: list[onnx.ValueInfoProto] = dataclasses.field(default_factory=list)
    functions: list[onnx.FunctionProto] = dataclasses.field(default_factory=list)
    counter: int = 0

    def name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}_{self.counter}"

    def add_input(self, prefix: str, elem_type: int, dims: list[int | str]) -> str:
        name = self.name(prefix)
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, dims))
        return name


@dataclasses.dataclass(frozen=True)
class _EyeSpec:
    """One EyeLike block: source, types, k, dims, consumer and placement."""

    source: str
    input_type: ir.DataType
    dtype: ir.DataType | None
    k: int
    dims: tuple[int | str, int | str]
    consumer: str
    placement: str
    else_k: int

    @property
    def output_type(self) -> ir.DataType:
        return self.dtype if self.dtype is not None else self.input_type


@st.composite
def _dims(draw, *, symbolic: bool) -> tuple[int | str, int | str]:
    dim = st.integers(0, 5)
    if symbolic:
        dim = st.one_of(dim, dim, st.sampled_from(["N", "M"]))
    return draw(dim), draw(dim)


@st.composite
def _eye_specs(draw, opset: int) -> _EyeSpec:
    input_type = draw(st.sampled_from(_valid_types(opset)))
    dtype = draw(st.one_of(st.none(), st.sampled_from(_valid_types(opset))))
    source = draw(st.sampled_from(SOURCES))
    k = draw(st.one_of(st.integers(-6, 6), st.sampled_from(HUGE_KS)))
    symbolic = source in (
        "input",
        "shape_chain",
        "torch_chain",
        "cast",
        "transpose",
        "eyelike",
    )
    dims = draw(_dims(symbolic=symbolic))
    output_type = dtype if dtype is not None else input_type
    consumers = ["output", "identity", "transpose", "cast_relu", "cast_matmul"]
    if output_type in _arith_types(opset):
        consumers += ["add", "mul"]
    consumer = draw(st.sampled_from(consumers))
    placement = draw(st.sampled_from(["main", *PLACEMENTS]))  # main twice as often
    else_k = draw(st.integers(-3, 3))
    return _EyeSpec(source, input_type, dtype, k, dims, consumer, placement, else_k)


def _emit_constant(
    b: _Builder,
    nodes: list[onnx.NodeProto],
    prefix: str,
    data_type: ir.DataType,
    data: np.ndarray,
) -> str:
    name = b.name(prefix)
    tensor = _tensor(name, data_type, data)
    nodes.append(
        helper.make_node("Constant", [], [name], name=b.name("constant"), value=tensor)
    )
    return name


def _emit_torch_shape(b: _Builder, spec: _EyeSpec, nodes: list[onnx.NodeProto]) -> str:
    """torch.onnx's ``eye(x.size(0), x.size(1))`` shape: Shape -> Gather -> Unsqueeze ->
    Concat; Unsqueeze takes ``axes`` as an attribute below opset 13, as an input from 13."""
    shape = b.name("shape")
    source = b.add_input("s", onnx.TensorProto.FLOAT, list(spec.dims))
    nodes.append(helper.make_node("Shape", [source], [shape], name=b.name("shape")))
    pieces = []
    for axis in (0, 1):
        index = _emit_constant(b, nodes, "index", ir.DataType.INT64, np.array(axis))
        size, piece = b.name("size"), b.name("piece")
        nodes.append(helper.make_node("Gather", [shape, index], [size], name=b.name("gather")))
        if b.opset < 13:
            nodes.append(
                helper.make_node("Unsqueeze", [size], [piece], name=b.name("unsq"), axes=[0])
            )
        else:
            axes = _emit_constant(b, nodes, "axes", ir.DataType.INT64, np.array([0]))
            nodes.append(
                helper.make_node("Unsqueeze", [size, axes], [piece], name=b.name("unsq"))
            )
        pieces.append(piece)
    both = b.name("dims")
    nodes.append(helper.make_node("Concat", pieces, [both], name=b.name("concat"), axis=0))
    return both


def _emit_source(b: _Builder, spec: _EyeSpec, nodes: list[onnx.NodeProto], rng) -> str:
    """Appends the nodes producing the EyeLike input; returns its name."""
    elem = int(spec.input_type)
    rows, cols = spec.dims
    if spec.source == "input":
        return b.add_input("x", elem, list(spec.dims))
    if spec.source in ("initializer", "constant"):
        data = rng.integers(0, 3, size=(rows, cols))
        if spec.source == "initializer":
            name = b.name("w")
            b.initializers.append(_tensor(name, spec.input_type, data))
            return name
        return _emit_constant(b, nodes, "c", spec.input_type, data)
    if spec.source == "constant_of_shape":
        shape = _emit_constant(b, nodes, "shape", ir.DataType.INT64, np.array([rows, cols]))
    elif spec.source == "shape_chain":
        shape = b.name("shape")
        nodes.append(
            helper.make_node(
                "Shape",
                [b.add_input("s", onnx.TensorProto.FLOAT, list(spec.dims))],
                [shape],
                name=b.name("shape"),
            )
        )
    elif spec.source == "torch_chain":
        shape = _emit_torch_shape(b, spec, nodes)
    if spec.source in ("constant_of_shape", "shape_chain", "torch_chain"):
        out = b.name("zeros")
        nodes.append(
            helper.make_node(
                "ConstantOfShape",
                [shape],
                [out],
                name=b.name("cos"),
                value=_scalar_tensor("value", spec.input_type, 0),
            )
        )
        return out
    out = b.name("pre")
    if spec.source == "cast":
        x = b.add_input("f", onnx.TensorProto.FLOAT, list(spec.dims))
        nodes.append(helper.make_node("Cast", [x], [out], name=b.name("cast"), to=elem))
    elif spec.source == "transpose":
        x = b.add_input("t", elem, [spec.dims[1], spec.dims[0]])
        nodes.append(helper.make_node("Transpose", [x], [out], name=b.name("tr"), perm=[1, 0]))
    elif spec.source == "eyelike":  # EyeLike of an EyeLike: folds feed folds
        x = b.add_input("f", onnx.TensorProto.FLOAT, list(spec.dims))
        nodes.append(
            helper.make_node("EyeLike", [x], [out], name=b.name("inner_eye"), k=-1, dtype=elem)
        )
    else:
        x = b.add_input("i", elem, list(spec.dims))
        nodes.append(helper.make_node("Identity", [x], [out], name=b.name("id")))
    return out


def _emit_eye(
    b: _Builder, spec: _EyeSpec, source: str, k: int, nodes: list[onnx.NodeProto]
) -> tuple[str, ir.DataType, list[int | str]]:
    """Appends EyeLike and its consumer; returns the final value, its type and dims."""
    eye = b.name("eye")
    attrs: dict[str, int] = {"k": k}
    if spec.dtype is not None:
        attrs["dtype"] = int(spec.dtype)
    nodes.append(helper.make_node("EyeLike", [source], [eye], name=eye, **attrs))
    kind = spec.consumer
    rows, cols = spec.dims
    if kind == "output":
        return eye, spec.output_type, [rows, cols]
    out = b.name("y")
    if kind in ("identity", "transpose"):
        op = "Identity" if kind == "identity" else "Transpose"
        nodes.append(helper.make_node(op, [eye], [out], name=b.name(kind)))
        return out, spec.output_type, [rows, cols] if kind == "identity" else [cols, rows]
    if kind in ("add", "mul"):
        op = "Add" if kind == "add" else "Mul"
        nodes.append(helper.make_node(op, [eye, eye], [out], name=b.name(kind)))
        return out, spec.output_type, [rows, cols]
    as_float = b.name("as_float")
    nodes.append(
        helper.make_node(
            "Cast", [eye], [as_float], name=b.name("cast"), to=onnx.TensorProto.FLOAT
        )
    )
    if kind == "cast_relu":
        nodes.append(helper.make_node("Relu", [as_float], [out], name=b.name("relu")))
        return out, ir.DataType.FLOAT, [rows, cols]
    flipped = b.name("flipped")
    nodes.append(helper.make_node("Transpose", [as_float], [flipped], name=b.name("tr")))
    nodes.append(helper.make_node("MatMul", [as_float, flipped], [out], name=b.name("mm")))
    return out, ir.DataType.FLOAT, [rows, rows]


def _branch(b: _Builder, spec: _EyeSpec, source: str | None, k: int, rng) -> onnx.GraphProto:
    nodes: list[onnx.NodeProto] = []
    if source is None:
        source = _emit_source(b, spec, nodes, rng)
    out, out_type, dims = _emit_eye(b, spec, source, k, nodes)
    value = helper.make_tensor_value_info(out, int(out_type), dims)
    return helper.make_graph(nodes, b.name("branch"), [], [value])


def _if_node(
    b: _Builder,
    cond: str,
    out: str,
    then_branch: onnx.GraphProto,
    else_branch: onnx.GraphProto,
) -> onnx.NodeProto:
    return helper.make_node(
        "If",
        [cond],
        [out],
        name=b.name("if"),
        then_branch=then_branch,
        else_branch=else_branch,
    )


def _branch_output(branch: onnx.GraphProto) -> tuple[ir.DataType, list[int | str]]:
    tensor_type = branch.output[0].type.tensor_type
    dims = [
        d.dim_value if d.HasField("dim_value") else d.dim_param for d in tensor_type.shape.dim
    ]
    return ir.DataType(tensor_type.elem_type), dims


def _emit_block(b: _Builder, spec: _EyeSpec, nodes: list[onnx.NodeProto], rng) -> None:
    """Places one EyeLike block and declares its graph output."""
    if spec.placement == "main":
        source = _emit_source(b, spec, nodes, rng)
        out, out_type, dims = _emit_eye(b, spec, source, spec.k, nodes)
    elif spec.placement in ("if", "if_local"):
        # "if": the source lives in the main graph and both branches read it from the
        # outer scope; "if_local": each branch computes its own source.
        source = None if spec.placement == "if_local" else _emit_source(b, spec, nodes, rng)
        then_branch = _branch(b, spec, source, spec.k, rng)
        else_branch = _branch(b, spec, source, spec.else_k, rng)
        out = b.name("if_out")
        out_type, dims = _branch_output(then_branch)
        cond = b.add_input("cond", onnx.TensorProto.BOOL, [])
        nodes.append(_if_node(b, cond, out, then_branch, else_branch))
    elif spec.placement in ("loop", "loop_if"):
        out, out_type, dims = _emit_loop(b, spec, nodes, rng)
    else:
        out, out_type, dims = _emit_function_call(b, spec, nodes, rng)
    b.outputs.append(helper.make_tensor_value_info(out, int(out_type), dims))


def _emit_loop(
    b: _Builder, spec: _EyeSpec, nodes: list[onnx.NodeProto], rng
) -> tuple[str, ir.DataType, list[int | str]]:
    """A two-trip Loop whose body holds the block; its scan output stacks the results.

    Loop-1 needs at least one loop-carried value, so a counter is passed through.
    """
    source = _emit_source(b, spec, nodes, rng)
    iteration, cond_in, cond_out = b.name("iter"), b.name("cond_in"), b.name("cond_out")
    carried_in, carried_out = b.name("carried_in"), b.name("carried_out")
    body_nodes = [
        helper.make_node("Identity", [cond_in], [cond_out], name=cond_out),
        helper.make_node("Identity", [carried_in], [carried_out], name=carried_out),
    ]
    if spec.placement == "loop_if":  # a subgraph in a subgraph: If in the Loop body
        then_branch = _branch(b, spec, source, spec.k, rng)
        else_branch = _branch(b, spec, None, spec.else_k, rng)
        scan = b.name("inner_if_out")
        body_nodes.append(_if_node(b, cond_in, scan, then_branch, else_branch))
        out_type, scan_dims = _branch_output(then_branch)
    else:
        scan, out_type, scan_dims = _emit_eye(b, spec, source, spec.k, body_nodes)
    scalar = helper.make_tensor_value_info
    body = helper.make_graph(
        body_nodes,
        b.name("body"),
        [
            scalar(iteration, onnx.TensorProto.INT64, []),
            scalar(cond_in, onnx.TensorProto.BOOL, []),
            scalar(carried_in, onnx.TensorProto.INT64, []),
        ],
        [
            scalar(cond_out, onnx.TensorProto.BOOL, []),
            scalar(carried_out, onnx.TensorProto.INT64, []),
            scalar(scan, int(out_type), scan_dims),
        ],
    )
    trips, keep_going = b.name("trips"), b.name("go")
    b.initializers.append(_tensor(trips, ir.DataType.INT64, np.array(2)))
    b.initializers.append(_tensor(keep_going, ir.DataType.BOOL, np.array(True)))
    final, out = b.name("loop_final"), b.name("loop_out")
    nodes.append(
        helper.make_node(
            "Loop", [trips, keep_going, trips], [final, out], name=b.name("loop"), body=body
        )
    )
    return out, out_type, [2, *scan_dims]


def _emit_function_call(
    b: _Builder, spec: _EyeSpec, nodes: list[onnx.NodeProto], rng
) -> tuple[str, ir.DataType, list[int | str]]:
    """A model-local function holding the block; the call passes the source in.

    With a constant source (Constant / ConstantOfShape) the function computes its own
    input, which makes the EyeLike foldable inside the function body.
    """
    source = _emit_source(b, spec, nodes, rng)
    body: list[onnx.NodeProto] = []
    local_source = "X"
    if spec.source in ("constant", "constant_of_shape"):
        local_source = _emit_source(b, spec, body, rng)
    final, out_type, dims = _emit_eye(b, spec, local_source, spec.k, body)
    body.append(helper.make_node("Identity", [final], ["Y"], name=b.name("ret")))
    function_name = b.name("EyeBlock")
    b.functions.append(
        helper.make_function(
            FUNCTION_DOMAIN,
            function_name,
            ["X"],
            ["Y"],
            body,
            [helper.make_opsetid("", b.opset)],
        )
    )
    out = b.name("call_out")
    nodes.append(
        helper.make_node(
            function_name, [source], [out], name=b.name("call"), domain=FUNCTION_DOMAIN
        )
    )
    return out, out_type, dims


@st.composite
def models(draw) -> onnx.ModelProto:
    """A random valid model with one to three EyeLike blocks."""
    opset = draw(OPSETS)
    specs = draw(st.lists(_eye_specs(opset), min_size=1, max_size=3))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    builder = _Builder(opset)
    nodes: list[onnx.NodeProto] = []
    for spec in specs:
        _emit_block(builder, spec, nodes, rng)
    graph = helper.make_graph(
        nodes, "fuzz", builder.inputs, builder.outputs, builder.initializers
    )
    opsets = [helper.make_opsetid("", opset)]
    if builder.functions:
        opsets.append(helper.make_opsetid(FUNCTION_DOMAIN, 1))
    ir_version = helper.find_min_ir_version_for(opsets[:1])
    if builder.functions:
        ir_version = max(ir_version, 8)  # model-local functions need IR 8
    model = helper.make_model(
        graph, opset_imports=opsets, ir_version=ir_version, functions=builder.functions
    )
    if draw(st.booleans()):
        _strip_node_names(model)  # exporters often leave nodes unnamed
    return model


def _strip_node_names(model: onnx.ModelProto) -> None:
    def strip(nodes) -> None:
        for node in nodes:
            node.ClearField("name")
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    strip(attr.g.node)

    strip(model.graph.node)
    for function in model.functions:
        strip(function.node)


def _bytes(model: onnx.ModelProto) -> bytes:
    return model.SerializeToString(deterministic=True)


def _check_invariants(original: onnx.ModelProto, **options: object) -> None:
    check_model_safely(original)  # the generator must only make valid models
    frozen = _bytes(original)
    once = eyefold.optimize(copy.deepcopy(original), **options)
    assert _bytes(original) == frozen
    check_model_safely(once)
    for seed in (0, 1):
        assert_same_outputs(original, once, random_inputs(original, seed=seed))
    again = eyefold.optimize(copy.deepcopy(original), **options)
    assert _bytes(again) == _bytes(once), "two runs differ (not deterministic)"
    twice = eyefold.optimize(once, **options)
    assert _bytes(twice) == _bytes(once), "optimizing again changed the model"
    in_place = eyefold.optimize(ir.serde.deserialize_model(copy.deepcopy(original)), **options)
    # The ModelProto path deserializes only the EyeLike neighbourhood: the same model,
    # though not laid out byte for byte as onnx-ir lays out a whole model.
    assert canonical(ir.to_proto(in_place)) == canonical(once), (
        "ir.Model and ModelProto differ"
    )


@pytest.mark.slow
@FUZZ_SETTINGS
@given(models())
def test_fuzz_optimize_keeps_meaning(model: onnx.ModelProto):
    _check_invariants(model)


# Other pipeline options: sizes on both sides of small EyeLike outputs, no folding, and
# legalization for onnxruntime (EyeLike types it lacks become a supported one + Cast).
OPTIONS = st.fixed_dictionaries(
    {
        "size_limit": st.sampled_from([0, 48, DEFAULT_SIZE_LIMIT_BYTES]),
        "fold": st.booleans(),
        "target_runtime": st.sampled_from([None, "onnxruntime"]),
    }
)


@pytest.mark.slow
@settings(FUZZ_SETTINGS, max_examples=max(1, FUZZ_EXAMPLES // 3))
@given(models(), OPTIONS)
def test_fuzz_optimize_with_options_keeps_meaning(model: onnx.ModelProto, options: dict):
    _check_invariants(model, upgrade=False, **options)


def _eyelike_count(model: onnx.ModelProto) -> int:
    graphs = [model.graph, *(f for f in model.functions)]
    count = 0
    while graphs:
        graph = graphs.pop()
        for node in graph.node:
            count += node.op_type == "EyeLike" and node.domain in ("", "ai.onnx")
            for attribute in node.attribute:
                graphs.extend([attribute.g] if attribute.HasField("g") else attribute.graphs)
    return count


@pytest.mark.slow
@settings(FUZZ_SETTINGS, max_examples=max(1, FUZZ_EXAMPLES // 3))
@given(models())
def test_fuzz_never_worse(model: onnx.ModelProto):
    """Runnable stays runnable, rules never fold less, every input EyeLike is reported."""
    with_rules = eyefold.optimize_with_report(model)
    without_rules = eyefold.optimize_with_report(model, rules=[])
    if onnxruntime_loads(model):
        assert onnxruntime_loads(with_rules.model), "onnxruntime ran the input only"
    counts = with_rules.report.counts()
    # A node a rule merged into another (EyeLike(EyeLike(x)) -> EyeLike(x)) is removed,
    # not folded: what folded without rules is folded or gone with them, never left.
    assert counts["folded"] + counts["removed"] >= without_rules.report.counts()["folded"]
    actions = ("folded", "inferred", "kept", "removed")
    assert counts["total"] == sum(counts[a] for a in actions) == _eyelike_count(model)


@pytest.mark.slow
def test_generator_covers_every_placement_and_source():
    """The strategy reaches every source, placement and type (so the fuzzer tests them)."""
    seen: set[str] = set()

    @settings(max_examples=300, derandomize=True, database=None, deadline=None)
    @given(OPSETS.flatmap(_eye_specs))
    def collect(spec: _EyeSpec):
        seen.update(
            {
                f"source:{spec.source}",
                f"placement:{spec.placement}",
                f"type:{spec.input_type.name}",
                f"dtype:{spec.dtype.name if spec.dtype else None}",
                f"huge-k:{spec.k in HUGE_KS}",
                f"zero-dim:{0 in spec.dims}",
                f"symbolic:{any(isinstance(d, str) for d in spec.dims)}",
            }
        )

    collect()
    expected = {
        *(f"source:{s}" for s in SOURCES),
        *(f"placement:{p}" for p in PLACEMENTS),
        *(f"type:{t.name}" for t in EYELIKE_TYPES),
        *(f"dtype:{t.name}" for t in EYELIKE_TYPES),
        "dtype:None",
        *(
            f"{feature}:{flag}"
            for feature in ("huge-k", "zero-dim", "symbolic")
            for flag in (True, False)
        ),
    }
    assert expected <= seen, sorted(expected - seen)


@pytest.mark.parametrize(
    ("elem_type", "runs"),
    [(onnx.TensorProto.FLOAT, True), (onnx.TensorProto.BFLOAT16, False)],
    ids=["float-input-runs", "bfloat16-input-skipped"],
)
def test_onnxruntime_oracle_skips_inputs_it_cannot_take(elem_type: int, runs: bool):
    """onnxruntime's Python binding cannot take bfloat16 numpy inputs; the oracle says so."""
    x = helper.make_tensor_value_info("x", elem_type, [2, 2])
    y = helper.make_tensor_value_info("y", elem_type, [2, 2])
    model = helper.make_model(
        helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y]),
        opset_imports=[helper.make_opsetid("", 22)],
        ir_version=10,
    )
    outputs = run_onnxruntime(model, random_inputs(model))
    assert (outputs is not None) == runs
    if runs:
        assert outputs[0].tolist() == random_inputs(model)["x"].tolist()


def _function_with_refs(refs: tuple[str, ...], source: str) -> onnx.ModelProto:
    """A function whose EyeLike takes k and/or dtype from the call's attributes."""
    eye = helper.make_node("EyeLike", [source], ["Y"], name="eye")
    for name, ref in (("k", "kk"), ("dtype", "dt")):
        if name in refs:
            eye.attribute.append(
                onnx.AttributeProto(name=name, ref_attr_name=ref, type=onnx.AttributeProto.INT)
            )
    constant = helper.make_node(
        "Constant", [], ["C"], value=_tensor("c", ir.DataType.FLOAT, np.zeros((3, 4)))
    )
    function = helper.make_function(
        FUNCTION_DOMAIN,
        "RefEye",
        ["X"],
        ["Y"],
        [constant, eye],
        [helper.make_opsetid("", 22)],
        attributes=["kk", "dt"],
    )
    call = helper.make_node(
        "RefEye", ["x"], ["y"], domain=FUNCTION_DOMAIN, kk=1, dt=int(ir.DataType.DOUBLE)
    )
    out_type = onnx.TensorProto.DOUBLE if "dtype" in refs else onnx.TensorProto.FLOAT
    graph = helper.make_graph(
        [call],
        "refs",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", out_type, [3, 4])],
    )
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 22), helper.make_opsetid(FUNCTION_DOMAIN, 1)],
        ir_version=10,
        functions=[function],
    )


@pytest.mark.parametrize("source", ["X", "C"], ids=["function-input", "constant"])
@pytest.mark.parametrize("refs", [("k",), ("dtype",), ("k", "dtype")], ids="+".join)
def test_attribute_references_in_functions_are_not_folded(refs, source):
    """k/dtype naming a function attribute are known per call only: keep the node.

    Regression: a referenced k was read as None and reached the kernel.
    """
    model = _function_with_refs(refs, source)
    result = eyefold.optimize_with_report(copy.deepcopy(model))
    (node,) = result.report.nodes
    assert node.action in ("inferred", "kept")
    for ref in ({"k": "kk", "dtype": "dt"}[r] for r in refs):
        assert f"function attribute '{ref}'" in node.reason
    _check_invariants(model)


def test_literal_attributes_in_functions_still_fold():
    """The twin: the same function with literal k and dtype folds its Constant input."""
    model = _function_with_refs((), "C")
    result = eyefold.optimize_with_report(copy.deepcopy(model))
    assert [n.action for n in result.report.nodes] == ["folded"]
    _check_invariants(model)


@pytest.mark.parametrize(
    "attributes",
    ["<k: int = 0>", "<dtype: int = 11, k: int = 1>", "<k: int = 1, dtype: int = 11>", ""],
    ids=["explicit-k0", "dtype-then-k", "k-then-dtype", "defaults"],
)
@pytest.mark.parametrize("runtime", [None, "onnxruntime"], ids=["plain", "legalized"])
def test_rerun_is_byte_identical_whatever_the_attribute_form(attributes, runtime):
    """Regression: a legalized EyeLike kept an explicit k=0 and its attribute order, but a
    second run folds the casts back (rules) and re-legalizes in the rules' form."""
    model = onnx.parser.parse_model(
        f"""<ir_version: 10, opset_import: ["" : 22]>
        g (bool[3,4] x) => (y) {{ y = EyeLike {attributes} (x) }}"""
    )
    options = {"fold": False, "target_runtime": runtime}
    once = eyefold.optimize(copy.deepcopy(model), **options)
    if runtime is not None:
        assert once.graph.node[0].op_type == "Cast"  # it was legalized
    assert _bytes(eyefold.optimize(copy.deepcopy(once), **options)) == _bytes(once)
    assert_same_outputs(model, once)


TARGETED = {
    "eyelike-output-read-in-a-branch": """<ir_version: 10, opset_import: ["" : 22]>
        g (float[3,3] x, bool c) => (float[3,3] e, float[3,3] y) {
          e = EyeLike (x)
          y = If (c) <
            then_branch = t () => (float[3,3] a) { a = Identity (e) },
            else_branch = f () => (float[3,3] b) { b = Add (e, e) }>
        }""",
    "one-source-two-eyelikes": """<ir_version: 10, opset_import: ["" : 22]>
        g (float[3,N] x) => (float[3,N] e1, double[3,N] e2) {
          z = Relu (x)
          e1 = EyeLike <k: int = 1> (z)
          e2 = EyeLike <dtype: int = 11> (z)
        }""",
    "function-called-with-two-shapes": """<ir_version: 10, opset_import: ["" : 22, "pkg" : 1]>
        g (float[3,3] x, float[2,5] w) => (float[3,3] a, float[2,5] b) {
          a = pkg.F (x)
          b = pkg.F (w)
        }
        <domain: "pkg", opset_import: ["" : 22]>
        F (X) => (Y) { E = EyeLike (X)  Y = Add (X, E) }""",
    "if-with-constant-eyelikes-in-a-function": """<ir_version: 10,
        opset_import: ["" : 22, "pkg" : 1]>
        g (float[3,3] x, bool c) => (float[2,2] a) { a = pkg.G (x, c) }
        <domain: "pkg", opset_import: ["" : 22]>
        G (X, C) => (Y) {
          Y = If (C) <
            then_branch = t () => (float[2,2] p) {
              s = Constant <value = int64[2] {2,2}> ()
              z = ConstantOfShape (s)
              p = EyeLike <k: int = 1> (z)
            },
            else_branch = f () => (float[2,2] q) {
              s2 = Constant <value = int64[2] {2,2}> ()
              z2 = ConstantOfShape (s2)
              q = EyeLike (z2)
            }>
        }""",
    "eyelike-output-twice-a-graph-output": """<ir_version: 10, opset_import: ["" : 22]>
        g (float[3,3] x) => (float[3,3] e, float[3,3] e2) {
          e = EyeLike (x)
          e2 = Identity (e)
        }""",
}


@pytest.mark.parametrize("upgrade", [True, False], ids=["upgrade", "no-upgrade"])
@pytest.mark.parametrize("text", TARGETED.values(), ids=TARGETED.keys())
def test_targeted_structures_keep_meaning(text: str, upgrade: bool):
    """Shapes the generator does not build: shared values, values crossing scopes."""
    _check_invariants(onnx.parser.parse_model(text), upgrade=upgrade)
