"""Shape values are computed as the ops compute them, and only where they are known.

The value rules (``eyefold.shape_facts.values``), and the ops with no rule that are run
by onnx's reference where their inputs are known (``eyefold.shape_facts.evaluate``), are
checked against onnx's reference evaluator run on the whole graph of random shape
chains: every element they call known must equal what the model computes, for every value
of the dims that are not static (two different values each).
"""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import onnx
import onnx.reference
import onnx_ir as ir
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import eyefold
from eyefold.shape_facts.lost import where_lost
from eyefold.shape_facts.rounds import infer_with_values, shape_table
from eyefold.shape_facts.values import propagate

_INT64 = TensorProto.INT64


def _const(name: str, values: list[int] | int) -> onnx.NodeProto:
    array = np.array(values, dtype=np.int64)
    return helper.make_node(
        "Constant", [], [name], value=onnx.numpy_helper.from_array(array, name)
    )


@st.composite
def _chains(draw: st.DrawFn) -> tuple[list[onnx.NodeProto], str, list[object]]:
    """Random shape computations on Shape(x): (nodes, result name, dims of x)."""
    rank = draw(st.integers(1, 4))
    dims: list[object] = [
        draw(st.one_of(st.integers(1, 6), st.sampled_from(["a", "b"]))) for _ in range(rank)
    ]
    nodes = [helper.make_node("Shape", ["x"], ["v0"])]
    length, current = rank, "v0"
    for step in range(draw(st.integers(1, 6))):
        out, c = f"v{step + 1}", f"c{step}"
        kind = draw(
            st.sampled_from(
                [
                    "gather", "slice", "concat", "arith", "cast", "minmax", "where", "neg",
                    "expand", "general",
                ]
            )
        )
        if kind == "gather":
            index = draw(st.integers(-length, length - 1))
            nodes += [_const(c, [index]), helper.make_node("Gather", [current, c], [out])]
            length = 1
        elif kind == "slice":
            start, end = draw(st.integers(-5, 5)), draw(st.integers(-5, 5))
            step_size = draw(st.sampled_from([1, 2, -1]))
            names = [f"{c}s", f"{c}e", f"{c}a", f"{c}p"]
            nodes += [
                _const(names[0], [start]),
                _const(names[1], [end]),
                _const(names[2], [0]),
                _const(names[3], [step_size]),
                helper.make_node("Slice", [current, *names], [out]),
            ]
            length = len(range(*slice(start, end, step_size).indices(length)))
            if length == 0:
                return nodes, out, dims
        elif kind == "concat":
            extra = draw(st.lists(st.integers(-3, 7), min_size=1, max_size=2))
            concat = helper.make_node("Concat", [current, c], [out], axis=0)
            nodes += [_const(c, extra), concat]
            length += len(extra)
        elif kind in ("arith", "minmax"):
            ops = ["Add", "Sub", "Mul", "Div"] if kind == "arith" else ["Min", "Max"]
            op = draw(st.sampled_from(ops))
            operand = draw(st.integers(-4, 4))
            operand = 3 if operand == 0 and op == "Div" else operand
            nodes += [_const(c, [operand]), helper.make_node(op, [current, c], [out])]
        elif kind == "cast":
            nodes += [
                helper.make_node("Cast", [current], [f"{c}f"], to=TensorProto.FLOAT),
                helper.make_node("Cast", [f"{c}f"], [out], to=_INT64),
            ]
        elif kind == "where":
            nodes += [
                _const(c, [2]),
                helper.make_node("Less", [current, c], [f"{c}m"]),
                helper.make_node("Where", [f"{c}m", c, current], [out]),
            ]
        elif kind == "expand":
            size = draw(st.sampled_from([1, length, 0, 3] if length == 1 else [1, length]))
            nodes += [_const(c, [size]), helper.make_node("Expand", [current, c], [out])]
            length = size if length == 1 else length
            if length == 0:
                return nodes, out, dims
        elif kind == "general":
            node, length = _general_op(draw, current, out, c, length)
            nodes += node
        else:
            nodes += [helper.make_node("Neg", [current], [out])]
        current = out
    # Reshape to a vector and back through Unsqueeze/Squeeze, as dynamo writes it.
    nodes += [
        _const("flat", [-1]),
        helper.make_node("Reshape", [current, "flat"], ["r"]),
    ]
    return nodes, "r", dims


# Ops no value rule computes, run by onnx's reference where their inputs are known, by
# name ("Op-variant"): (the strategy of their second operand or None, attributes).
_GENERAL_OPS = {
    "Mod": (st.integers(-4, 4).filter(bool), {}),
    "Mod-fmod": (st.integers(-4, 4).filter(bool), {"fmod": 1}),
    "Pow": (st.integers(0, 3), {}),
    "BitwiseAnd": (st.integers(0, 7), {}),
    "BitwiseOr": (st.integers(0, 7), {}),
    "Sign": (None, {}),
    "Relu": (None, {}),
    "CumSum": (st.just(0), {}),
    "CumSum-reverse": (st.just(0), {"exclusive": 1, "reverse": 1}),
    "ReduceSum": (st.just([0]), {"keepdims": 1}),
    "ReduceProd": (st.just([0]), {"keepdims": 1}),
    "ReduceMax": (st.just([0]), {"keepdims": 1}),
    "Tile": (st.integers(1, 2), {}),
    "Pad": (st.lists(st.integers(0, 2), min_size=2, max_size=2), {}),
    "ArgMax": (None, {"keepdims": 1}),
    "TopK": (st.just([1]), {}),
}


def _general_op(
    draw: st.DrawFn, current: str, out: str, c: str, length: int
) -> tuple[list[onnx.NodeProto], int]:
    """One op of :data:`_GENERAL_OPS` on ``current``: its nodes and the result's length."""
    name = draw(st.sampled_from(sorted(_GENERAL_OPS)))
    operand, attributes = _GENERAL_OPS[name]
    op = name.split("-")[0]
    value = draw(operand) if operand is not None else None
    if op == "Tile":
        value, grown = [value], length * value
    elif op == "Pad":
        grown = length + sum(value)
    elif op in ("ReduceSum", "ReduceProd", "ReduceMax", "ArgMax", "TopK"):
        grown = 1
    else:
        grown = length
    nodes = [] if value is None else [_const(c, value)]
    inputs = [current] if value is None else [current, c]
    outputs = [out, f"{c}i"] if op == "TopK" else [out]
    return [*nodes, helper.make_node(op, inputs, outputs, **attributes)], grown


def _run(nodes: list[onnx.NodeProto], result: str, dims: list[int]) -> np.ndarray:
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info(result, _INT64, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    x = np.zeros(dims, dtype=np.float32)
    return onnx.reference.ReferenceEvaluator(model).run(None, {"x": x})[0]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_chains())
def test_known_elements_are_what_the_model_computes(case) -> None:
    _assert_known_elements_are_computed(case)


def _assert_known_elements_are_computed(case: tuple[list[onnx.NodeProto], str, list]) -> None:
    """Every element ``propagate`` calls known is what the reference computes, for two
    values of each symbolic dim."""
    nodes, result, dims = case
    shapes = {"x": [d if isinstance(d, int) else None for d in dims]}
    found = propagate(nodes, {}, shapes.get, opset=22).get(result)
    for a, b in ((2, 3), (5, 1)):
        concrete = [d if isinstance(d, int) else (a if d == "a" else b) for d in dims]
        expected = _run(nodes, result, concrete).reshape(-1)
        if found is None:
            continue
        assert len(found.items) == expected.size
        for item, want in zip(found.items, expected.tolist(), strict=True):
            assert item is None or item == want


@st.composite
def _general_chains(draw: st.DrawFn) -> tuple[list[onnx.NodeProto], str, list[object]]:
    """Shape(x) shifted by a constant, then ops only onnx's reference computes."""
    rank = draw(st.integers(1, 4))
    dims: list[object] = [
        draw(st.one_of(st.integers(1, 6), st.integers(1, 6), st.integers(1, 6), st.just("a")))
        for _ in range(rank)
    ]
    shift = draw(st.integers(-4, 4))
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        _const("shift", [shift]),
        helper.make_node("Sub", ["s", "shift"], ["v0"]),
    ]
    length, current = rank, "v0"
    for step in range(draw(st.integers(1, 3))):
        out = f"v{step + 1}"
        added, length = _general_op(draw, current, out, f"c{step}", length)
        nodes += added
        current = out
    return nodes, current, dims


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_general_chains())
def test_ops_only_the_reference_computes_are_what_the_model_computes(case) -> None:
    _assert_known_elements_are_computed(case)


def _hippynn_chain(batch: int | str) -> onnx.ModelProto:
    """dynamo's ``torch.diagonal`` mask of a [P, 3, 3] tensor: Shape -> Gather (scalar) ->
    Reshape([1]) -> Concat -> ConstantOfShape -> EyeLike, with P dynamic."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        _const("one", 1),
        helper.make_node("Gather", ["shape", "one"], ["rows"]),
        _const("vector", [1]),
        helper.make_node("Reshape", ["rows", "vector"], ["rows1"]),
        _const("two", 2),
        helper.make_node("Gather", ["shape", "two"], ["cols"]),
        helper.make_node("Reshape", ["cols", "vector"], ["cols1"]),
        helper.make_node("Concat", ["rows1", "cols1"], ["dims"], axis=0),
        helper.make_node("ConstantOfShape", ["dims"], ["zeros"]),
        helper.make_node("EyeLike", ["zeros"], ["eye"]),
        helper.make_node("Mul", ["x", "eye"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "hippynn_like",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 3, 3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


def test_onnx_alone_loses_the_reshape_chain_and_the_rounds_recover_it() -> None:
    model = _hippynn_chain("P")
    alone = onnx.shape_inference.infer_shapes(model, data_prop=True)
    assert shape_table(alone.graph)["zeros"] != [3, 3]
    inference = infer_with_values(_hippynn_chain("P"), ["zeros"])
    assert inference.shapes["zeros"] == [3, 3]
    assert inference.rounds == 2 and "dims" in inference.computed


def test_the_reshape_chain_folds_bit_identically() -> None:
    model = _hippynn_chain("P")
    optimized, report = _optimized(model)
    assert report.counts()["folded"] == 1
    x = np.random.default_rng(0).standard_normal((4, 3, 3)).astype(np.float32)
    want = onnx.reference.ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = onnx.reference.ReferenceEvaluator(optimized).run(None, {"x": x})[0]
    assert got.tobytes() == want.tobytes()


def _optimized(model: onnx.ModelProto, **options: object):
    result = eyefold.optimize_with_report(model, **options)
    return result.model, result.report


def _eyelike_of(source_nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto]):
    nodes = [
        *source_nodes,
        helper.make_node("ConstantOfShape", ["dims"], ["zeros"]),
        helper.make_node("EyeLike", ["zeros"], ["y"], name="eye"),
    ]
    graph = helper.make_graph(
        nodes, "lost", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (
            "nonzero",
            {"node": "nonzero", "op": "NonZero", "why": "depends on the values"},
        ),
        ("input_value", {"value": "n", "op": None, "why": "only known at run time"}),
        ("dynamic_dim", {"value": "x", "op": None, "why": "dim 0 ('B') is dynamic"}),
    ],
)
def test_the_report_names_where_the_shape_was_lost(case: str, expected: dict) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 4])
    n = helper.make_tensor_value_info("n", _INT64, [1])
    if case == "nonzero":
        sources = [
            helper.make_node("NonZero", ["x"], ["where"], name="nonzero"),
            helper.make_node("Shape", ["where"], ["dims"], name="shape"),
        ]
        inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])]
    elif case == "input_value":
        sources = [helper.make_node("Concat", ["n", "n"], ["dims"], axis=0, name="concat")]
        inputs = [n]
    else:
        sources = [
            helper.make_node("Shape", ["x"], ["shape"]),
            _const("first", [0]),
            helper.make_node("Gather", ["shape", "first"], ["rows"]),
            helper.make_node("Concat", ["rows", "rows"], ["dims"], axis=0),
        ]
        inputs = [x]
    model = _eyelike_of(sources, inputs)
    _, report = _optimized(model)
    node = report.nodes[0]
    assert node.action == "inferred" and node.shape_lost is not None
    for key, text in expected.items():
        assert (text is None and node.shape_lost[key] is None) or text in node.shape_lost[key]
    assert "lost at" in node.reason
    assert report.to_dict()["nodes"][0]["shape_lost"] == node.shape_lost


def test_a_folded_node_has_no_shape_lost_entry() -> None:
    _, report = _optimized(_hippynn_chain(4))
    assert "shape_lost" not in report.to_dict()["nodes"][0]


def test_where_lost_is_none_for_a_static_shape() -> None:
    inference = infer_with_values(_hippynn_chain(4), ["zeros"])
    assert where_lost(inference, "zeros", ["x"]) is None
    ir_model = ir.serde.deserialize_model(_hippynn_chain("P"))
    assert eyefold.optimize_with_report(ir_model).report.counts()["folded"] == 1


def _unflatten_model(batch: int | str) -> onnx.ModelProto:
    """TorchScript's ``x.unflatten(-1, (4, 4))`` (symbolic_opset13), then the 4x4 diagonal
    mask roma's ``rotmat_to_unitquat`` takes: the dim is normalized by ``Mod`` of two
    Constants, which onnx's data propagation does not follow."""
    nodes = [
        _const("rank", [2]),
        _const("minus_one", [-1]),
        helper.make_node("Add", ["rank", "minus_one"], ["dim_plus_rank"]),
        helper.make_node("Mod", ["dim_plus_rank", "rank"], ["dim"], name="mod"),
        helper.make_node("Shape", ["x"], ["size"]),
        _const("zero", [0]),
        _const("one", [1]),
        helper.make_node("Reshape", ["dim", "one"], ["head_end"]),
        helper.make_node("Slice", ["size", "zero", "head_end"], ["head"]),
        helper.make_node("Add", ["dim", "one"], ["dim_plus_one"]),
        helper.make_node("Reshape", ["dim_plus_one", "one"], ["tail_start"]),
        _const("end", [np.iinfo(np.int64).max]),
        helper.make_node("Slice", ["size", "tail_start", "end"], ["tail"]),
        _const("sizes", [4, 4]),
        helper.make_node("Concat", ["head", "sizes", "tail"], ["final"], axis=0),
        helper.make_node("Reshape", ["x", "final"], ["matrices"]),
        helper.make_node("Shape", ["matrices"], ["matrices_size"]),
        _const("minus_two", [-2]),
        helper.make_node("Slice", ["matrices_size", "minus_two", "end"], ["last_two"]),
        helper.make_node("ConstantOfShape", ["last_two"], ["zeros"]),
        helper.make_node("EyeLike", ["zeros"], ["eye"], name="eye"),
        helper.make_node("Mul", ["matrices", "eye"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "unflatten",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def test_a_constant_mod_folds_on_the_command_line(tmp_path) -> None:
    from eyefold.cli.main import main

    source, output, report = tmp_path / "m.onnx", tmp_path / "o.onnx", tmp_path / "r.json"
    onnx.save(_unflatten_model("B"), source)
    assert main(["optimize", str(source), str(output), "-q", "--report", str(report)]) == 0
    node = json.loads(report.read_text())["nodes"][0]
    assert node["action"] == "folded", node
    x = np.random.default_rng(0).standard_normal((3, 16)).astype(np.float32)
    want = onnx.reference.ReferenceEvaluator(str(source)).run(None, {"x": x})[0]
    got = onnx.reference.ReferenceEvaluator(str(output)).run(None, {"x": x})[0]
    assert got.tobytes() == want.tobytes()


def test_a_constant_mod_folds_in_the_library() -> None:
    ir_model = ir.serde.deserialize_model(_unflatten_model("B"))
    assert eyefold.optimize_with_report(ir_model).report.counts()["folded"] == 1
    _, report = _optimized(_unflatten_model("B"))
    assert report.counts()["folded"] == 1


def _two_constants_then(node: onnx.NodeProto, a: object, b: object) -> list[onnx.NodeProto]:
    return [_const("a", a), _const("b", b), node]


@pytest.mark.parametrize(
    "nodes",
    [
        # an integer division by zero: the runtime's business, not a number to fold
        _two_constants_then(helper.make_node("Mod", ["a", "b"], ["out"]), [5], [0]),
        # a result drawn at random
        [
            _const("a", [3]),
            helper.make_node("Cast", ["a"], ["f"], to=TensorProto.FLOAT),
            helper.make_node("RandomUniformLike", ["f"], ["r"], seed=1.0),
            helper.make_node("Cast", ["r"], ["out"], to=_INT64),
        ],
        # an output a value sizes far beyond a shape value
        [
            _const("a", 0),
            _const("b", 10**9),
            _const("c", 1),
            helper.make_node("Range", ["a", "b", "c"], ["out"]),
        ],
        # another domain's op of the same name
        _two_constants_then(
            helper.make_node("Mod", ["a", "b"], ["out"], domain="x"), [5], [3]
        ),
        # a subgraph
        [
            _const("a", [5]),
            helper.make_node(
                "Loop",
                ["", ""],
                ["out"],
                body=helper.make_graph(
                    [], "body", [], [helper.make_tensor_value_info("a", _INT64, [1])]
                ),
            ),
        ],
        # a sequence is not a tensor value
        [_const("a", 3), helper.make_node("SequenceConstruct", ["a"], ["out"])],
        # a float whose last bit a runtime may round otherwise
        [
            _const("a", [3]),
            helper.make_node("Cast", ["a"], ["f"], to=TensorProto.FLOAT),
            helper.make_node("Exp", ["f"], ["out"]),
        ],
    ],
    ids=[
        "mod-by-zero",
        "random",
        "large-range",
        "other-domain",
        "subgraph",
        "sequence",
        "float-exp",
    ],
)
def test_what_is_not_evaluated_stays_unknown(nodes: list[onnx.NodeProto]) -> None:
    assert "out" not in propagate(nodes, {}, {}.get, opset=22)


@pytest.mark.parametrize(
    ("node", "a", "b", "want"),
    [
        (helper.make_node("Mod", ["a", "b"], ["out"]), [-7, 7], [3], [2, 1]),
        (helper.make_node("Mod", ["a", "b"], ["out"], fmod=1), [-7, 7], [3], [-1, 1]),
        (helper.make_node("Pow", ["a", "b"], ["out"]), [2, 3], [2], [4, 9]),
        (helper.make_node("Tile", ["a", "b"], ["out"]), [1, 2], [2], [1, 2, 1, 2]),
        (helper.make_node("Range", ["a", "b", "c"], ["out"]), 1, 4, [1, 2, 3]),
    ],
    ids=["mod", "fmod", "pow", "tile", "range"],
)
def test_an_op_without_a_rule_is_computed_when_its_inputs_are_known(node, a, b, want):
    nodes = [_const("a", a), _const("b", b), _const("c", 1), node]
    found = propagate(nodes, {}, {}.get, opset=22)["out"]
    assert found.known and list(found.items) == want


def _scm_model() -> onnx.ModelProto:
    """asteroid's ``condition_scm`` on a masked spatial covariance: x [B, F, C, T] and
    mask [B, F, T] make scm [B, F, C, C], and ``torch.eye(scm.shape[-1])`` needs only C."""
    nodes = [
        _const("two", [2]),
        helper.make_node("Unsqueeze", ["mask", "two"], ["mask4"]),
        helper.make_node("Mul", ["x", "mask4"], ["masked"]),
        helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["masked", "xt"], ["scm"]),
        helper.make_node("Shape", ["scm"], ["size"]),
        _const("last", -1),
        helper.make_node("Gather", ["size", "last"], ["n"]),
        _const("axes", [0]),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        helper.make_node("Concat", ["n1", "n1"], ["dims"], axis=0),
        helper.make_node("ConstantOfShape", ["dims"], ["zeros"]),
        helper.make_node("EyeLike", ["zeros"], ["eye"], name="eye"),
        helper.make_node("Add", ["scm", "eye"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "scm",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "F", "C", "T"]),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["B", "F", "T"]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "F", "C", "C"])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _unevaluated_op_model() -> onnx.ModelProto:
    """``x.reshape(n, -1)`` with n from an op eyefold does not evaluate, then
    ``torch.eye(r.shape[1])``: the -1 reads every dim of x, but pinning x does not help."""
    nodes = [
        _const("k", [4]),
        helper.make_node("Foo", ["k"], ["n"], domain="custom", name="foo"),
        _const("rest", [-1]),
        helper.make_node("Concat", ["n", "rest"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["r"]),
        helper.make_node("Shape", ["r"], ["size"]),
        _const("one", [1]),
        helper.make_node("Gather", ["size", "one"], ["cols"]),
        helper.make_node("Concat", ["cols", "cols"], ["dims"], axis=0),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 16])
    model = _eyelike_of(nodes, [x])
    model.opset_import.append(helper.make_opsetid("custom", 1))
    return model


def _runtime_value_model() -> onnx.ModelProto:
    """``torch.eye(x.shape[0], n)`` with n a graph input's value."""
    nodes = [
        helper.make_node("Shape", ["x"], ["size"]),
        _const("first", [0]),
        helper.make_node("Gather", ["size", "first"], ["rows"]),
        helper.make_node("Concat", ["rows", "n"], ["dims"], axis=0),
    ]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 4]),
        helper.make_tensor_value_info("n", _INT64, [1]),
    ]
    return _eyelike_of(nodes, inputs)


def _shape_lost_on_the_command_line(tmp_path, model: onnx.ModelProto, *args: str) -> dict:
    from eyefold.cli.main import main

    source, output, report = tmp_path / "m.onnx", tmp_path / "o.onnx", tmp_path / "r.json"
    onnx.save(model, source)
    run = ["optimize", str(source), str(output), "-q", "--report", str(report), *args]
    assert main(run) == 0
    (node,) = json.loads(report.read_text())["nodes"]
    return node


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (
            _scm_model,
            {"value": "x", "node": None, "op": None,
             "why": "dim 2 ('C') is dynamic; --input-shape pins it"},
        ),
        (
            _unevaluated_op_model,
            {"value": "n", "node": "foo", "op": "Foo",
             "why": "its value is computed by Foo, which eyefold does not evaluate"},
        ),
        (
            _runtime_value_model,
            {"value": "n", "node": None, "op": None,
             "why": "its value is only known at run time; so is graph input 'x' (dim 0 ('B')"
             " is dynamic, and pinning it leaves the shape unknown)"},
        ),
    ],
    ids=["only-the-dims-it-depends-on", "the-op-not-evaluated", "pinning-does-not-help"],
)  # fmt: skip
def test_lost_at_names_what_the_shape_depends_on(tmp_path, build, expected) -> None:
    node = _shape_lost_on_the_command_line(tmp_path, build())
    assert node["action"] == "inferred"
    assert node["shape_lost"] == expected


def test_pinning_the_dims_named_folds(tmp_path) -> None:
    pin = ["--input-shape", "x:B,F,4,T"]
    node = _shape_lost_on_the_command_line(tmp_path, _scm_model(), *pin)
    assert node["action"] == "folded" and node["shape"] == [4, 4]


def _confusion_matrix_model(declared: list[object]) -> onnx.ModelProto:
    """kornia's ``mean_iou``: a num_classes x num_classes confusion matrix counted from
    pred and target ([B, H, W] each), then ``torch.eye(num_classes)``; the 4x4 is a
    constant's, whatever pred's and target's shapes."""
    nodes = [
        _const("classes", 4),
        helper.make_node("Mul", ["target", "classes"], ["row"]),
        helper.make_node("Add", ["row", "pred"], ["cell"]),
        _const("flat", [-1]),
        helper.make_node("Reshape", ["cell", "flat"], ["cells"]),
        _const("depth", 16),
        _const("off_on", [0, 1]),
        helper.make_node("OneHot", ["cells", "depth", "off_on"], ["hits"]),
        _const("first", [0]),
        helper.make_node("ReduceSum", ["hits", "first"], ["counts"], keepdims=0),
        _const("square", [4, 4]),
        helper.make_node("Reshape", ["counts", "square"], ["confusion"]),
        helper.make_node("EyeLike", ["confusion"], ["eye"], name="eye"),
        helper.make_node("Mul", ["confusion", "eye"], ["y"]),
    ]
    inputs = [
        helper.make_tensor_value_info(name, _INT64, declared) for name in ("pred", "target")
    ]
    graph = helper.make_graph(
        nodes, "confusion", inputs, [helper.make_tensor_value_info("y", _INT64, [4, 4])]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _rotation_model() -> onnx.ModelProto:
    """roma's ``rotmat_to_unitquat`` on ``R: [B, 3, 3]``: the nine entries of each matrix
    mapped linearly to the 16 of the 4x4 matrix whose eigenvector is the quaternion, then
    TorchScript's ``unflatten(-1, (4, 4))`` and its diagonal mask. The 4x4 comes from
    literal constants; R's static 3s only size the linear map's input."""
    model = _unflatten_model("B")
    graph = model.graph
    del graph.input[:]
    graph.input.append(helper.make_tensor_value_info("R", TensorProto.FLOAT, ["B", 3, 3]))
    weights = np.arange(9 * 16, dtype=np.float32).reshape(9, 16) / 100
    entries = [
        _const("rows_of_nine", [0, 9]),
        helper.make_node("Reshape", ["R", "rows_of_nine"], ["entries"]),
        helper.make_node(
            "Constant", [], ["linear"], value=onnx.numpy_helper.from_array(weights, "w")
        ),
        helper.make_node("MatMul", ["entries", "linear"], ["x"]),
    ]
    nodes = [*entries, *graph.node]
    del graph.node[:]
    graph.node.extend(nodes)
    return model


def _sized_by_input_model() -> onnx.ModelProto:
    """TorchScript's ``torch.eye(z.size(-1))`` (symbolic_opset9's ``eye``: Shape, Gather,
    Unsqueeze, Concat, ConstantOfShape, EyeLike) for ``z = x * y.sum()``, ``x: [B, 4]``,
    ``y: [3, T]``: the size is x's static 4; y's 3 is never read."""
    nodes = [
        helper.make_node("ReduceSum", ["y"], ["total"], keepdims=0),
        helper.make_node("Mul", ["x", "total"], ["z"]),
        helper.make_node("Shape", ["z"], ["z_shape"]),
        _const("last", 1),
        helper.make_node("Gather", ["z_shape", "last"], ["n"], axis=0),
        _const("axes", [0]),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n_1"]),
        helper.make_node("Concat", ["n_1", "n_1"], ["square"], axis=0),
        helper.make_node("ConstantOfShape", ["square"], ["zeros"]),
        helper.make_node("EyeLike", ["zeros"], ["eye"], name="eye"),
        helper.make_node("MatMul", ["z", "eye"], ["out"]),
    ]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 4]),
        helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, "T"]),
    ]
    output = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["B", 4])
    graph = helper.make_graph(nodes, "sized_by_input", inputs, [output])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _safe_inverse_model() -> onnx.ModelProto:
    """kornia's ``safe_inverse_with_mask`` as TorchScript exports it for ``H: [B, 3, 3]``:
    ``H_safe = where(mask, H, torch.eye(3).expand_as(H))``, then
    ``torch.eye(H_safe.shape[-1])``. The Where broadcasts H's 3 with the literal's, and
    H of [B, M, M] gives the same 3: nothing of H is baked in."""
    eye, zero = np.eye(3, dtype=np.float32), np.array(0, np.float32)
    nodes = [
        helper.make_node("Constant", [], ["eye3"], value=onnx.numpy_helper.from_array(eye)),
        helper.make_node("Shape", ["H"], ["h_shape"]),
        helper.make_node("Expand", ["eye3", "h_shape"], ["eyes"]),
        helper.make_node("Constant", [], ["zero"], value=onnx.numpy_helper.from_array(zero)),
        helper.make_node("Greater", ["H", "zero"], ["mask"]),
        helper.make_node("Where", ["mask", "H", "eyes"], ["safe"]),
        helper.make_node("Shape", ["safe"], ["safe_shape"]),
        _const("last", -1),
        helper.make_node("Gather", ["safe_shape", "last"], ["n"], axis=0),
        _const("axes", [0]),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n_1"]),
        helper.make_node("Concat", ["n_1", "n_1"], ["square"], axis=0),
        helper.make_node("ConstantOfShape", ["square"], ["zeros"]),
        helper.make_node("EyeLike", ["zeros"], ["eye"], name="eye", dtype=TensorProto.FLOAT),
        helper.make_node("Mul", ["safe", "eye"], ["out"]),
    ]
    h = helper.make_tensor_value_info("H", TensorProto.FLOAT, ["B", 3, 3])
    output = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["B", 3, 3])
    graph = helper.make_graph(nodes, "safe_inverse", [h], [output])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize(
    ("build", "shape", "baked_in"),
    [
        (lambda: _confusion_matrix_model(["B", "H", "W"]), [4, 4], []),
        (lambda: _confusion_matrix_model([2, "H", "W"]), [4, 4], []),
        (_rotation_model, [4, 4], []),
        (_safe_inverse_model, [3, 3], []),
        (_sized_by_input_model, [4, 4], ["x"]),
    ],
    ids=[
        "confusion-all-symbolic",
        "confusion-a-static-dim",
        "rotation",
        "broadcast-with-a-literal",
        "sized-by-input",
    ],
)
def test_bakes_in_is_said_only_where_a_static_declared_dim_was_used(
    tmp_path, build, shape, baked_in
):
    from eyefold.cli.main import main

    source, output, report = tmp_path / "m.onnx", tmp_path / "o.onnx", tmp_path / "r.json"
    onnx.save(build(), source)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["optimize", str(source), str(output), "--report", str(report)]) == 0
    (node,) = json.loads(report.read_text())["nodes"]
    assert node["action"] == "folded" and node["shape"] == shape
    assert node["from_inputs"] == baked_in
    said = [line for line in out.getvalue().splitlines() if "bakes in" in line]
    if baked_in:
        assert len(said) == 1 and "(bakes in the declared shape of input x)" in said[0]
    else:
        assert said == []
    library = eyefold.optimize_with_report(ir.serde.deserialize_model(build()))
    assert library.report.nodes[0].from_inputs == baked_in


def _dynamo_shapes_model() -> onnx.ModelProto:
    """As dynamo writes a model: the inputs' dim names (and expressions of them) in the
    intermediate value_info and the graph outputs, and an EyeLike sized by x's dim 0."""
    nodes = [
        helper.make_node("Shape", ["x"], ["size"]),
        _const("first", 0),
        helper.make_node("Gather", ["size", "first"], ["rows"]),
        _const("vector", [1]),
        helper.make_node("Reshape", ["rows", "vector"], ["rows1"]),
        _const("three", [3]),
        helper.make_node("Concat", ["rows1", "three"], ["dims"], axis=0),
        helper.make_node(  # a value tract reads (it refuses the default)
            "ConstantOfShape", ["dims"], ["zeros"], value=helper.make_tensor("", 1, [1], [0.0])
        ),
        helper.make_node("EyeLike", ["zeros"], ["eye"], name="eye"),
        helper.make_node("MatMul", ["eye", "w"], ["picked"]),
        helper.make_node("Mul", ["x", "x"], ["square"]),
        helper.make_node("Concat", ["square", "x"], ["both"], axis=0),
        helper.make_node("Relu", ["both"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "dynamo_shapes",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["s0", 3, 3]),
            helper.make_tensor_value_info("w", TensorProto.FLOAT, [3, 3]),
        ],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, ["2*s0", 3, 3]),
            helper.make_tensor_value_info("picked", TensorProto.FLOAT, ["s0", 3]),
        ],
        value_info=[
            helper.make_tensor_value_info("square", TensorProto.FLOAT, ["s0", 3, 3]),
            helper.make_tensor_value_info("both", TensorProto.FLOAT, ["2*s0", 3, 3]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    return model


@pytest.mark.parametrize("runtime", ["tract", "openvino"])
def test_pinning_leaves_no_stale_shape(tmp_path, runtime: str) -> None:
    from eyefold.cli.main import main
    from eyefold.runtime.runners import runner_for

    source, unpinned, pinned = (tmp_path / f"{n}.onnx" for n in ("m", "unpinned", "pinned"))
    onnx.save(_dynamo_shapes_model(), source)
    assert main(["optimize", str(source), str(unpinned), "-q"]) == 0
    assert main(["optimize", str(source), str(pinned), "-q", "--input-shape", "x:8,3,3"]) == 0
    written = onnx.load(pinned)
    assert not any(n.op_type == "EyeLike" for n in written.graph.node)
    declared = {
        info.name: [d.dim_value if d.HasField("dim_value") else d.dim_param for d in
                    info.type.tensor_type.shape.dim]
        for info in [*written.graph.value_info, *written.graph.output]
    }  # fmt: skip
    assert declared["square"] == [8, 3, 3] and declared["both"] == [16, 3, 3]
    assert declared["y"] == [16, 3, 3] and declared["picked"] == [8, 3]
    feeds = {
        "x": np.arange(72, dtype=np.float32).reshape(8, 3, 3),
        "w": np.arange(9, dtype=np.float32).reshape(3, 3),
    }
    run = runner_for(runtime)
    want = run(str(unpinned), feeds)  # what ran unpinned runs pinned
    got = run(str(pinned), feeds)
    for a, b in zip(want, got, strict=True):
        np.testing.assert_array_equal(a, b)
