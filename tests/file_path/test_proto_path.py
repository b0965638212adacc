"""The neighbourhood path gives the whole-model path's model, report and outputs.

Each model goes through eyefold's two ways of running the same steps, and
:func:`tests.helpers.both_paths.compare_paths` compares the results. Models: every
sample model, the fuzzer's generator, and onnx's backend test corpus.
"""

from __future__ import annotations

import copy
import glob
import os
import sys
from pathlib import Path

import onnx
import pytest
from hypothesis import HealthCheck, given, settings

from eyefold.options import PipelineOptions
from eyefold.proto_path import NEIGHBOURHOOD_STEP, WHOLE_MODEL_STEP, optimize_proto
from eyefold.report import build_report
from tests.corpus.test_fuzz_graphs import models
from tests.helpers.both_paths import compare_paths, whole_model_result

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "sample_models").glob("*.onnx"))
BACKEND = sorted(
    glob.glob(os.path.join(os.path.dirname(onnx.__file__), "backend/test/data/*/*/model.onnx"))
)
OPTIONS = {
    "default": PipelineOptions(),
    "no-upgrade": PipelineOptions(upgrade=False),
    "relaxed-legalized": PipelineOptions(
        upgrade=False, relaxed=True, target_runtime="onnxruntime"
    ),
}


@pytest.mark.parametrize("option_name", sorted(OPTIONS))
@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_sample_models(path: Path, option_name: str) -> None:
    compare_paths(onnx.load(str(path)), OPTIONS[option_name], run=True)


def test_big_model_takes_the_neighbourhood_path() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import generate

    model = generate.big(500)
    assert compare_paths(model, OPTIONS["default"], run=True) == NEIGHBOURHOOD_STEP


@pytest.mark.slow
@pytest.mark.parametrize("option_name", ["default", "no-upgrade"])
def test_backend_corpus(option_name: str) -> None:
    taken: dict[str, int] = {}
    upgrade_refused = []
    for path in BACKEND:
        model = onnx.load(path)
        has_eyelike = any(n.op_type == "EyeLike" for n in model.graph.node)
        step = compare_paths(model, OPTIONS[option_name], run=has_eyelike)
        taken[step.partition(":")[0]] = taken.get(step.partition(":")[0], 0) + 1
        if step.startswith(f"{WHOLE_MODEL_STEP}: the opset"):
            upgrade_refused.append((path, step))
    # The opset 6..12 models are upgraded on the proto: only the neighbourhood path's
    # own obstacles (an initializer listed as a graph input...) send them whole.
    assert taken.get(NEIGHBOURHOOD_STEP, 0) > len(BACKEND) // 2, taken
    assert not upgrade_refused, upgrade_refused


@pytest.mark.parametrize("opset", [9, 11, 13, 18, 21])
def test_upgrade_corpus_models(opset: int, upgrade_models) -> None:
    model = upgrade_models.corpus_model(opset)
    assert compare_paths(model, OPTIONS["default"], run=True) != "error"


@pytest.mark.parametrize(
    "name", ["large_constant_model", "loop_model", "group_normalization_model"]
)
def test_upgrade_models(name: str, upgrade_models) -> None:
    compare_paths(getattr(upgrade_models, name)(), OPTIONS["default"], run=True)


@pytest.mark.slow
def test_undeclared_eyelike_inputs_are_inferred_on_the_proto() -> None:
    # benchmarks/generate.py's opset-9 chain: every EyeLike reads an undeclared Reshape
    # output. Inferred on the proto, each needs only its producer, not the whole chain.
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import generate

    model = generate.opset9(600)
    assert compare_paths(model, OPTIONS["default"], run=True) == NEIGHBOURHOOD_STEP
    report = build_report(optimize_proto(copy.deepcopy(model), OPTIONS["default"]).record)
    assert report.counts()["folded"] > 0
    hood = report.extra["neighbourhood"]
    assert hood["nodes"] < hood["of"] // 4, hood


def test_torch_eye_chain_is_upgraded_and_folded_on_the_proto(upgrade_models) -> None:
    model = upgrade_models.torch_eye_chain(9)
    assert compare_paths(model, OPTIONS["default"], run=True) == NEIGHBOURHOOD_STEP


@pytest.mark.slow
@settings(
    max_examples=int(os.environ.get("EYEFOLD_PROTO_PATH_EXAMPLES", "200")),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(model=models())
def test_fuzzed_models(model: onnx.ModelProto) -> None:
    compare_paths(model, OPTIONS["no-upgrade"], run=True)
    compare_paths(model, OPTIONS["relaxed-legalized"], run=False)


_RENAMED_OPERAND = """<ir_version: 10, opset_import: ["" : 22]>
g (int64[4, 4] x) => (int64[4, 4] y, int64[4, 4] z) <int64[4, 4] a, int64[4, 4] c> {
    a = Neg(x)
    b = Abs(x)
    c = Add(a, b)
    e = EyeLike(c)
    p = MatMul(a, e)
    y = Add(p, b)
    z = Mul(a, b)
}"""

_EYELIKE_IN_BRANCH = """<ir_version: 10, opset_import: ["" : 22]>
g (float[2, 2] x, bool c) => (float[2, 2] y) {
    y = If(c) <then_branch = t () => (float[2, 2] o) { o = EyeLike(x) },
               else_branch = f () => (float[2, 2] o) { o = Identity(x) }>
}"""


def test_rule_renaming_a_value_read_outside_the_neighbourhood() -> None:
    # The folded identity turns MatMul(a, I) into a, renamed p: Mul and Add read it too.
    model = onnx.parser.parse_model(_RENAMED_OPERAND)
    step = compare_paths(model, OPTIONS["default"], run=True)
    assert step == NEIGHBOURHOOD_STEP


def test_eyelike_in_a_subgraph_takes_the_whole_model_path() -> None:
    model = onnx.parser.parse_model(_EYELIKE_IN_BRANCH)
    step = compare_paths(model, OPTIONS["default"], run=False)
    assert step == "whole-model: an EyeLike sits in a subgraph"


def test_proto_argument_is_not_changed() -> None:
    import eyefold

    model = onnx.parser.parse_model(_RENAMED_OPERAND)
    before = model.SerializeToString(deterministic=True)
    eyefold.optimize(model)
    assert model.SerializeToString(deterministic=True) == before


def test_made_up_name_taken_outside_takes_the_whole_model_path() -> None:
    # Legalization names its Cast output y__eyefold_float, which the Identity outside owns.
    model = onnx.parser.parse_model(
        """<ir_version: 10, opset_import: ["" : 22]>
        g (bool[2, 3] x) => (bool[2, 3] y, bool[2, 3] y__eyefold_float) {
            y = EyeLike (x)
            y__eyefold_float = Identity (x)
        }"""
    )
    options = PipelineOptions(target_runtime="onnxruntime", fold=False)
    step = compare_paths(model, options, run=True)
    assert step.startswith("whole-model: the result cannot be spliced back")


_TWO_INPUTS = """<ir_version: 10, opset_import: ["" : 22]>
g (float[2, 4] x, float[2, 4] y) => (float[2, 4] d, float[2, 2] e)
    <float[2, 2] w = {1, 0, 0, 1}> {
    a = Relu (x)
    b, c = Split <axis = 1, num_outputs = 2> (y)
    bc = Concat <axis = 1> (b, c)
    d = Add (a, bc)
    e = Identity (w)
}"""


@pytest.mark.parametrize(
    "order", [["d", "a", "c", "e", "x", "w"], ["a", "b", "c", "d", "e"], ["e", "c", "a"]]
)
def test_inputs_feeding_is_the_same_in_any_order_of_questions(order: list[str]) -> None:
    # The input masks are propagated only as far as the latest value asked about, so a
    # later question extends the walk; every order must give the same answers.
    from eyefold.proto_path.scan import scan_model

    index = scan_model(onnx.parser.parse_model(_TWO_INPUTS))
    expected = {
        "a": {"x"},
        "b": {"y"},
        "c": {"y"},
        "d": {"x", "y"},
        "e": set(),
        "x": {"x"},
        "w": set(),
    }
    assert index.obstacle is None
    assert {name: set(index.inputs_feeding(name)) for name in order} == {
        name: expected[name] for name in order
    }


REAL = sorted((ROOT / "sample_models" / "real").glob("*.onnx"))


@pytest.mark.slow
@pytest.mark.parametrize("path", REAL, ids=[p.stem for p in REAL])
def test_real_exports(path: Path) -> None:
    # Their random inputs do not run everywhere (hippynn's indices, MossFormer's negative
    # Pad under the reference evaluator): tests/corpus/test_real_exports.py runs them for real.
    compare_paths(onnx.load(str(path)), OPTIONS["default"], run=False)


# A Tanh (a producer drop_input_producer looks at) and a Reshape (no rule looks at it)
# feed EyeLike nodes; an Add (no rule looks at it) and a MatMul (the identity rules do)
# read their outputs; t and r are read by Add nodes as well, so neither is dead code.
_LOOKED_AT = """<ir_version: 10, opset_import: ["" : 22]>
g (float[4, 4] x) => (float[4, 4] m, float[4, 4] a, float[4, 4] b)
    <int64[2] shape = {4, 4}, float[4, 4] t, float[4, 4] r> {
    t = Tanh (x)
    r = Reshape (x, shape)
    e1 = EyeLike <k = 1> (t)
    e2 = EyeLike (r)
    a = Add (e1, r)
    b = Add (t, x)
    m = MatMul (x, e2)
}"""


def test_neighbourhood_holds_only_the_nodes_a_rule_looks_at() -> None:
    from eyefold.proto_path.extract import build_neighbourhood, choose_nodes
    from eyefold.proto_path.scan import scan_model

    model = onnx.parser.parse_model(_LOOKED_AT)
    index = scan_model(model)
    chosen = choose_nodes(index)
    assert [index.op_types[p] for p in chosen] == ["Tanh", "EyeLike", "EyeLike", "MatMul"]
    hood = build_neighbourhood(model, index, chosen)
    # The sinks read what the Add nodes outside read: t, r and e1.
    assert sorted(hood.sink_names) == ["e1", "r", "t"]
    assert [v.name for v in hood.sink_inputs()] == hood.sink_names
    for options in OPTIONS.values():
        assert compare_paths(model, options, run=True) == NEIGHBOURHOOD_STEP


@pytest.mark.slow
def test_sinks_stay_narrow_for_a_fold_of_thousands() -> None:
    # 600 EyeLike nodes read Reshape outputs that Add nodes outside read too: each
    # EyeLike output and each Reshape output has an outside reader.
    from eyefold.proto_path.extract import SINK_WIDTH, build_neighbourhood, choose_nodes
    from eyefold.proto_path.infer_inputs import infer_undeclared_inputs
    from eyefold.proto_path.scan import scan_model

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import generate

    from eyefold.upgrade.on_proto import upgrade_proto

    model = generate.opset9(600 * 14)
    converted = upgrade_proto(model, 9, 22)
    index = scan_model(model)
    inferred, _ = infer_undeclared_inputs(model, index, converted)
    hood = build_neighbourhood(model, index, choose_nodes(index, inferred), "", inferred)
    assert len(hood.sink_names) == 2 * 600
    assert len(hood.sinks) == -(-len(hood.sink_names) // SINK_WIDTH)
    assert all(len(sink.inputs) <= SINK_WIDTH for sink in hood.sinks)
    assert [v.name for v in hood.sink_inputs()] == hood.sink_names


def _with_large_constant_first(model: onnx.ModelProto) -> onnx.ModelProto:
    import numpy as np

    copied = copy.deepcopy(model)
    tensor = onnx.numpy_helper.from_array(np.zeros((600, 600), np.float32))
    constant = onnx.helper.make_node("Constant", [], ["big_unused"], value=tensor)
    nodes = [constant, *copied.graph.node]
    del copied.graph.node[:]
    copied.graph.node.extend(nodes)
    return copied


def test_the_order_shortcut_gives_what_the_slice_gives() -> None:
    # Where the graph's order rules out large Constants and graph outputs in the slice,
    # the converter's declarations are taken without walking it: they are the ones the
    # slice's own conditions give. Where the order cannot tell, the slice decides.
    from eyefold.proto_path import infer_inputs
    from eyefold.proto_path.scan import scan_model
    from eyefold.shape_facts.inference_slices import backward_slice
    from eyefold.upgrade.on_proto import upgrade_proto

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import generate

    plain = generate.opset9(140)
    early_output = copy.deepcopy(plain)
    early_output.graph.output.append(
        onnx.helper.make_tensor_value_info("b0_mm", onnx.TensorProto.FLOAT, [4, 16])
    )
    for model, shortcut_taken in [
        (plain, True),
        (early_output, False),
        (_with_large_constant_first(plain), False),
    ]:
        converted = upgrade_proto(model, 9, 22)
        index = scan_model(model)
        targets = infer_inputs._undeclared_targets(index)
        assert targets
        shortcut = infer_inputs._typed_before_slicing(index, targets, converted)
        sliced = backward_slice(
            infer_inputs._IndexSource(index), [index.producer[name] for name in targets]
        )
        by_slice = infer_inputs._typed_by_converter(index, sliced, targets, converted)
        assert (shortcut is not None) == shortcut_taken
        if shortcut is not None:
            assert shortcut == by_slice


@pytest.mark.slow
def test_converter_types_spare_the_second_inference(monkeypatch) -> None:
    # The opset-9 chain's EyeLike inputs are undeclared Reshape outputs: the upgrade's
    # converter has typed them all, so no inference of the slice runs. Where the model
    # declares value_info of its own (the converter starts from it, the slice does not),
    # or no upgrade ran, the slice is inferred as before. Both paths agree throughout.
    from eyefold.proto_path import infer_inputs

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import generate

    calls: list[int] = []
    real = infer_inputs.infer_slice

    def spy(sliced, targets, model_inputs):
        calls.append(len(targets))
        return real(sliced, targets, model_inputs)

    monkeypatch.setattr(infer_inputs, "infer_slice", spy)
    plain = generate.opset9(140)
    declared = copy.deepcopy(plain)
    declared.graph.value_info.append(
        onnx.helper.make_tensor_value_info("b0_mm", onnx.TensorProto.FLOAT, [4, 16])
    )
    for model, options, inferred in [
        (plain, OPTIONS["default"], False),
        (declared, OPTIONS["default"], True),
        (plain, OPTIONS["no-upgrade"], True),
    ]:
        calls.clear()
        assert compare_paths(model, options, run=True) == NEIGHBOURHOOD_STEP
        assert bool(calls) == inferred, (options, calls)


def _branch_model() -> onnx.ModelProto:
    """An EyeLike whose input's shape comes through an If, whose branches read ``h``.

    ``h`` is computed in the main graph and read only by the branches; the chain after the
    If reads a large initializer, a large Constant and a small initializer.
    """
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    def branch(name: str, op: str) -> onnx.GraphProto:
        out = helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, None)
        node = helper.make_node(op, ["h"], [f"{name}_out"])
        return helper.make_graph([node], name, [], [out])

    rng = np.random.default_rng(0)
    big_c = numpy_helper.from_array(rng.standard_normal((64, 64), dtype=np.float32), "big_c")
    nodes = [
        helper.make_node("Relu", ["x"], ["h"], name="relu"),
        helper.make_node(
            "If",
            ["cond"],
            ["r"],
            name="branch",
            then_branch=branch("then", "Relu"),
            else_branch=branch("else", "Neg"),
        ),
        helper.make_node("MatMul", ["r", "big_w"], ["m"], name="mm_w"),
        helper.make_node("Constant", [], ["big_c"], name="big_c", value=big_c),
        helper.make_node("MatMul", ["m", "big_c"], ["p"], name="mm_c"),
        helper.make_node("Add", ["p", "b"], ["pb"], name="bias"),
        helper.make_node("Transpose", ["pb"], ["q"], name="transpose"),
        helper.make_node("EyeLike", ["q"], ["e"], name="eye"),
        helper.make_node("Add", ["e", "q"], ["y"], name="out"),
    ]
    initializers = [
        numpy_helper.from_array(rng.standard_normal((32, 64), dtype=np.float32), "big_w"),
        numpy_helper.from_array(rng.standard_normal(64, dtype=np.float32), "b"),
    ]
    graph = helper.make_graph(
        nodes,
        "branch_feeds_eyelike",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 32]),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 4])],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_the_proto_slice_follows_what_subgraphs_read() -> None:
    # The If's branches read h: onnx types their outputs, hence q, only from h's
    # producer. The file path's slice holds it as the whole-model path's does, so q comes
    # out static on the proto and the If stays out of the neighbourhood.
    model = _branch_model()
    for options in (OPTIONS["no-upgrade"], OPTIONS["default"]):
        assert compare_paths(model, options, run=True) == NEIGHBOURHOOD_STEP


def _slice_handed(monkeypatch, module, run) -> list[tuple[object, ...]]:
    """What ``run`` hands onnx's inference through ``module``: each slice, described."""
    real = module.infer_slice
    handed: list[tuple[object, ...]] = []

    def spy(sliced, targets, model_inputs):
        graph = sliced.model.graph
        handed.append(
            (
                [(n.op_type, n.domain, list(n.input), list(n.output)) for n in graph.node],
                [(i.name, i.type.SerializeToString()) for i in graph.input],
                [(t.name, list(t.dims)) for t in graph.initializer],
                [o.name for o in graph.output],
                sorted((o.domain, o.version) for o in sliced.model.opset_import),
                sorted(sliced.large),
                list(targets),
                list(model_inputs),
            )
        )
        return real(sliced, targets, model_inputs)

    with monkeypatch.context() as patched:
        patched.setattr(module, "infer_slice", spy)
        run()
    return handed


def test_both_paths_hand_onnx_the_same_slice(monkeypatch) -> None:
    # The file path's inference, on the proto, and infer-input-shapes, on the onnx-ir
    # model, build the slice the same way: same nodes, inputs typed alike, the same small
    # initializers carried and the same large tensors declared.
    from eyefold.passes import infer_input_shapes
    from eyefold.proto_path import infer_inputs

    model = _branch_model()
    options = OPTIONS["no-upgrade"]
    on_proto = _slice_handed(
        monkeypatch, infer_inputs, lambda: optimize_proto(copy.deepcopy(model), options)
    )
    whole = _slice_handed(
        monkeypatch,
        infer_input_shapes,
        lambda: whole_model_result(copy.deepcopy(model), options),
    )
    assert len(on_proto) == len(whole) == 1
    assert on_proto == whole
    nodes, inputs, initializers, _, _, large, _, _ = on_proto[0]
    assert [op for op, *_ in nodes] == ["Relu", "If", "MatMul", "MatMul", "Add", "Transpose"]
    assert [name for name, _ in inputs] == ["x", "cond", "big_w", "big_c"]
    assert initializers == [("b", [64])]
    assert large == ["big_c", "big_w"]
