"""UpgradeOpsetPass: opset 9..21 models to opset 22 and to the newest opset onnx knows.

The corpus models are written in each source opset's own form (axes as attributes before
13, Clip bounds as attributes before 11, Softmax flattening before 13...), mix them with
EyeLike, an If subgraph and a model-local function, and are compared with their upgraded
versions under onnx's reference evaluator and onnxruntime. The models come from
``tests/helpers/upgrade_models.py`` (the ``upgrade_models`` fixture); the command-line runs
of the upgrade are in ``tests/cli/test_cli.py``.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import eyefold
from eyefold.core.onnx_safety import defuse_eyelike_dtype
from eyefold.errors import InvalidModelError, UnsupportedDtypeError, UpgradeError
from eyefold.options import PipelineOptions
from eyefold.passes import UpgradeOpsetPass, default_pipeline
from eyefold.upgrade.target import min_ir_version

NEWEST = onnx.defs.onnx_opset_version()


# ---------------------------------------------------------------- helpers


def _feeds(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in model.graph.input:
        dims = [d.dim_value for d in value.type.tensor_type.shape.dim]
        if value.type.tensor_type.elem_type == TensorProto.BOOL:
            feeds[value.name] = np.array(seed % 2 == 0)
        else:
            feeds[value.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds


def _upgrade(model: onnx.ModelProto, target: int) -> tuple[onnx.ModelProto, bool]:
    working = ir.serde.deserialize_model(model)
    result = UpgradeOpsetPass(target)(working)
    return ir.serde.serialize_model(working), result.modified


def _full_check(model: onnx.ModelProto) -> None:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    defuse_eyelike_dtype(copy)
    onnx.checker.check_model(copy, full_check=True)


def _ort_outputs(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list | None:
    """onnxruntime's outputs, or None when it cannot load the model (e.g. a newer opset)."""
    try:
        session = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
    except Exception:  # onnxruntime raises its own Fail/InvalidGraph types
        return None
    return session.run(None, feeds)


# onnx.reference runs Softmax with opset-13 semantics (axis only) at every opset, while
# Softmax-1..12 flattens from the axis on (as onnxruntime does), and its
# BatchNormalization below 14 disagrees with onnxruntime and with (x - mean) /
# sqrt(var + epsilon) * scale + bias. For those outputs below those opsets the reference is
# no oracle; onnxruntime is.
_REFERENCE_GAPS = {"x_soft": 13, "x_drop": 14, "branch": 13}


def _assert_same_outputs(
    original: onnx.ModelProto, upgraded: onnx.ModelProto, source: int | None = None
) -> set[str]:
    """Same outputs under the reference evaluator and onnxruntime (when it loads both).

    Returns the runtimes that compared every output ("reference", "onnxruntime").
    """
    source = _opset(original) if source is None else source
    names = [o.name for o in original.graph.output]
    gaps = {n for n, fixed_at in _REFERENCE_GAPS.items() if n in names and source < fixed_at}
    runtimes = set()
    for seed in (0, 1):  # both If branches
        feeds = _feeds(original, seed)
        expected = ReferenceEvaluator(original).run(None, feeds)
        actual = ReferenceEvaluator(upgraded).run(None, feeds)
        for name, want, got in zip(names, expected, actual, strict=True):
            assert got.dtype == want.dtype, name
            if name not in gaps:
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, err_msg=name)
        if not gaps:
            runtimes.add("reference")
        ort_expected = _ort_outputs(original, feeds)
        ort_actual = _ort_outputs(upgraded, feeds)
        if ort_expected is not None and ort_actual is not None:
            for name, want, got in zip(names, ort_expected, ort_actual, strict=True):
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, err_msg=name)
            runtimes.add("onnxruntime")
    return runtimes


def _eyelike_attributes(model: onnx.ModelProto) -> dict[str, dict[str, object]]:
    """Output name -> attributes of every EyeLike, in every graph and function."""
    found: dict[str, dict[str, object]] = {}

    def visit(nodes: list[onnx.NodeProto]) -> None:
        for node in nodes:
            if node.op_type == "EyeLike":
                found[node.output[0]] = {
                    a.name: helper.get_attribute_value(a) for a in node.attribute
                }
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    visit(list(attribute.g.node))

    visit(list(model.graph.node))
    for function in model.functions:
        visit(list(function.node))
    return found


def _opset(model: onnx.ModelProto, domain: str = "") -> int:
    domains = ("", "ai.onnx") if domain == "" else (domain,)
    return next(o.version for o in model.opset_import if o.domain in domains)


# ---------------------------------------------------------------- corpus


@pytest.mark.parametrize("target", [22, NEWEST], ids=["to22", f"to{NEWEST}"])
@pytest.mark.parametrize("source", [9, 11, 13, 17, 21], ids=lambda s: f"opset{s}")
def test_corpus_converts_validates_and_matches(source, target, upgrade_models):
    original = upgrade_models.corpus_model(source)
    onnx.checker.check_model(original)
    upgraded, modified = _upgrade(original, target)
    assert modified
    assert _opset(upgraded) == target
    assert all(f.opset_import[0].version == target for f in upgraded.functions)
    assert upgraded.ir_version == max(original.ir_version, min_ir_version(target))
    _full_check(upgraded)
    # EyeLike nodes keep k and dtype; an absent dtype stays absent.
    assert _eyelike_attributes(upgraded) == _eyelike_attributes(original)
    assert _eyelike_attributes(original)["eye"] == {}
    runtimes = _assert_same_outputs(original, upgraded)
    if target == 22:
        assert "onnxruntime" in runtimes  # it ran both sides, x_soft included
    else:
        # onnxruntime may not know the newest opset: the reference evaluator compares
        # with the (onnxruntime-checked) opset-22 upgrade, whose semantics match there.
        at_22, _ = _upgrade(original, 22)
        for seed in (0, 1):
            feeds = _feeds(original, seed)
            want = ReferenceEvaluator(at_22).run(None, feeds)
            got = ReferenceEvaluator(upgraded).run(None, feeds)
            for a, b in zip(got, want, strict=True):
                np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("source", [9, 10], ids=["Upsample-9", "Resize-10"])
def test_linear_resize_keeps_its_coordinates_under_onnxruntime(source, upgrade_models):
    # Linear Upsample (9) / Resize (10) map y to y / scale, which Resize-11+ must keep.
    original = upgrade_models.resize_model(
        source, [1.0, 1.0, 3.0, 2.5], "linear", ([1, 2, 5, 7], [1, 2, 15, 17])
    )
    upgraded, modified = _upgrade(original, 22)
    assert modified
    _full_check(upgraded)
    feeds = _feeds(original)
    expected, actual = _ort_outputs(original, feeds), _ort_outputs(upgraded, feeds)
    assert expected is not None and actual is not None
    np.testing.assert_allclose(actual[0], expected[0], rtol=1e-6, atol=1e-6)
    # onnx's converter alone leaves Resize-11's half_pixel default: different numbers.
    plain = onnx.version_converter.convert_version(original, 22)
    plain.ir_version = 10
    plain_out = _ort_outputs(plain, feeds)
    assert plain_out is not None
    assert not np.allclose(plain_out[0], expected[0])


def test_nearest_resize_with_mixed_scales_is_a_clear_error(upgrade_models):
    mixed = upgrade_models.resize_model(
        10, [1.0, 1.0, 2.0, 0.5], "nearest", ([1, 1, 4, 4], [1, 1, 8, 2])
    )
    with pytest.raises(UpgradeError, match=r"rounds down.*upgrade=False"):
        _upgrade(mixed, 22)
    # Enlarging every axis maps exactly (see the corpus); only the mixed case is refused.
    enlarging = upgrade_models.resize_model(
        10, [1.0, 1.0, 2.0, 3.0], "nearest", ([1, 1, 4, 4], [1, 1, 8, 12])
    )
    upgraded, _ = _upgrade(enlarging, 22)
    feeds = _feeds(enlarging)
    np.testing.assert_array_equal(
        _ort_outputs(upgraded, feeds)[0], _ort_outputs(enlarging, feeds)[0]
    )


def test_default_domain_spelled_ai_onnx(upgrade_models):
    original = upgrade_models.spell_default_domain(upgrade_models.corpus_model(11), "ai.onnx")
    upgraded, modified = _upgrade(original, 22)
    assert modified
    assert _opset(upgraded, "ai.onnx") == 22
    assert "" not in {o.domain for o in upgraded.opset_import}
    assert _opset(upgraded.functions[0]) == 22
    _full_check(upgraded)
    # The reference evaluator knows only the short spelling; onnxruntime takes both.
    runtimes = _assert_same_outputs(
        upgrade_models.spell_default_domain(original, ""),
        upgrade_models.spell_default_domain(upgraded, ""),
    )
    assert "onnxruntime" in runtimes
    feeds = _feeds(original)
    for got, want in zip(
        _ort_outputs(upgraded, feeds), _ort_outputs(original, feeds), strict=True
    ):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------- unchanged models


@pytest.mark.parametrize("opset", [22, NEWEST], ids=["opset22", "newest"])
def test_models_at_or_above_the_target_are_left_unchanged(opset, upgrade_models):
    original = upgrade_models.corpus_model(21)
    upgraded_once, _ = _upgrade(original, opset)
    before = upgraded_once.SerializeToString(deterministic=True)
    again, modified = _upgrade(upgraded_once, 22)
    assert not modified
    assert again.SerializeToString(deterministic=True) == ir.serde.serialize_model(
        ir.serde.deserialize_model(upgraded_once)
    ).SerializeToString(deterministic=True)
    assert _opset(again) == opset  # never lowered
    assert upgraded_once.SerializeToString(deterministic=True) == before


def test_upgrade_is_idempotent_and_deterministic(upgrade_models):
    first, _ = _upgrade(upgrade_models.corpus_model(9), 22)
    second, modified = _upgrade(first, 22)
    assert not modified
    repeat, _ = _upgrade(upgrade_models.corpus_model(9), 22)
    assert first.SerializeToString(deterministic=True) == repeat.SerializeToString(
        deterministic=True
    )
    assert second.SerializeToString(deterministic=True) == first.SerializeToString(
        deterministic=True
    )


def test_ir_version_is_raised_to_the_minimum_and_never_lowered(upgrade_models):
    low = upgrade_models.corpus_model(13)
    assert low.ir_version < 10
    upgraded, _ = _upgrade(low, 22)
    assert upgraded.ir_version == 10  # what opset 22 needs, not the newest onnx knows
    high = upgrade_models.corpus_model(13)
    high.ir_version = 11
    upgraded_high, _ = _upgrade(high, 22)
    assert upgraded_high.ir_version == 11


def test_unchanged_nodes_and_weights_are_kept_not_copied(upgrade_models):
    model = ir.serde.deserialize_model(upgrade_models.corpus_model(9))
    weight = np.arange(4096, dtype=np.float32).reshape(64, 64)  # over the inline limit
    weight_value = ir.Value(name="big_w", const_value=ir.tensor(weight, name="big_w"))
    model.graph.register_initializer(weight_value)
    eye_node = next(n for n in model.graph if n.op_type == "EyeLike")
    relu = ir.node("Relu", [weight_value])
    relu.outputs[0].name = "relu_w"
    model.graph.append(relu)
    model.graph.outputs.append(relu.outputs[0])
    tensor_before = weight_value.const_value
    UpgradeOpsetPass(22)(model)
    assert model.graph.initializers["big_w"].const_value is tensor_before
    assert eye_node.graph is model.graph  # the EyeLike node object itself is kept
    assert relu.graph is model.graph and relu.inputs[0] is weight_value


def test_model_over_2gib_upgrades_without_touching_its_weights():
    # 3 GiB of zero pages: never read, so they stay virtual (no protobuf could hold them).
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([2, 3]))
    weights = [
        ir.Value(name=f"w{i}", const_value=ir.tensor(np.zeros(1 << 28, np.float32)))
        for i in range(3)
    ]
    nodes = [
        ir.node("ReduceSum", [w], attributes={"axes": [0], "keepdims": 1}) for w in weights
    ]
    unsqueeze = ir.node("Unsqueeze", [x], attributes={"axes": [0]})
    outputs = [unsqueeze.outputs[0], *(n.outputs[0] for n in nodes)]
    graph = ir.Graph(
        [x], outputs, nodes=[unsqueeze, *nodes], initializers=weights, opset_imports={"": 11}
    )
    model = ir.Model(graph, ir_version=6)
    tensors = [w.const_value for w in weights]
    assert sum(t.nbytes for t in tensors) == 3 << 30
    assert UpgradeOpsetPass(22)(model).modified
    assert model.opset_imports[""] == 22 and model.ir_version == 10
    kept = [model.graph.initializers[f"w{i}"].const_value for i in range(3)]
    assert all(a is b for a, b in zip(kept, tensors, strict=True))  # the same objects
    for node in [unsqueeze, *nodes]:
        assert "axes" not in node.attributes and len(node.inputs) == 2  # axes became inputs
        assert node.inputs[1].producer().op_type == "Constant"


def test_loop_body_is_upgraded(upgrade_models):
    original = upgrade_models.loop_model()
    upgraded, modified = _upgrade(original, 22)
    assert modified
    _full_check(upgraded)
    inner = upgraded.graph.node[2].attribute[0].g
    assert "axes" not in {a.name for n in inner.node for a in n.attribute}
    assert _assert_same_outputs(original, upgraded) == {"reference", "onnxruntime"}


def test_large_constant_nodes_are_kept_as_they_are(upgrade_models):
    original = upgrade_models.large_constant_model()
    model = ir.serde.deserialize_model(original)
    main_constant = model.graph.node(0)
    function_constant = next(iter(model.functions.values())).graph.node(0)
    tensors = [c.attributes["value"].as_tensor() for c in (main_constant, function_constant)]
    assert all(t.nbytes > 4096 for t in tensors)  # over the inline limit: never serialized
    assert UpgradeOpsetPass(22)(model).modified
    assert main_constant.graph is model.graph
    assert main_constant.attributes["value"].as_tensor() is tensors[0]
    assert function_constant.attributes["value"].as_tensor() is tensors[1]
    upgraded = ir.serde.serialize_model(model)
    _full_check(upgraded)
    assert "axes" not in {a.name for n in upgraded.functions[0].node for a in n.attribute}
    _assert_same_outputs(original, upgraded)


# ---------------------------------------------------------------- EyeLike specifics


def test_bfloat16_eyelike_below_22_folds_after_the_upgrade(
    assert_bit_identical, upgrade_models
):
    model = upgrade_models.bfloat16_eyelike_model(13)
    result = eyefold.optimize_with_report(model)
    optimized = result.model
    assert _opset(optimized) == 22
    assert result.report.opset_before == 13 and result.report.opset_after == 22
    assert [n.action for n in result.report.nodes] == ["folded"]
    assert "EyeLike" not in {n.op_type for n in optimized.graph.node}
    _full_check(optimized)
    feeds = _feeds(model)
    (want,) = ReferenceEvaluator(upgrade_models.bfloat16_eyelike_model(22)).run(None, feeds)
    (got,) = ReferenceEvaluator(optimized).run(None, feeds)
    assert_bit_identical(got, want)


def test_bfloat16_eyelike_below_22_without_upgrade_is_a_clear_error(upgrade_models):
    with pytest.raises(UnsupportedDtypeError, match="needs EyeLike-22"):
        eyefold.optimize(upgrade_models.bfloat16_eyelike_model(13), upgrade=False)
    with pytest.raises(UnsupportedDtypeError, match="needs EyeLike-22"):
        eyefold.optimize(upgrade_models.bfloat16_eyelike_model(13), target_opset=21)


def test_eyelike_below_opset_9_is_a_clear_error(upgrade_models):
    model = upgrade_models.bfloat16_eyelike_model(8)
    with pytest.raises(InvalidModelError, match=r"EyeLike exists from opset 9.*opset 8"):
        _upgrade(model, 22)
    with pytest.raises(InvalidModelError, match="EyeLike exists from opset 9"):
        eyefold.optimize(model, upgrade=False)


def test_opset_8_model_without_eyelike_is_upgraded(upgrade_models):
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    graph = helper.make_graph(
        nodes,
        "old",
        [upgrade_models.float_info("x", [2, 2])],
        [upgrade_models.float_info("y", [2, 2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)])
    upgraded, modified = _upgrade(model, 22)
    assert modified and _opset(upgraded) == 22
    _full_check(upgraded)
    _assert_same_outputs(model, upgraded)


def test_torch_eye_chain_at_opset_9_folds_with_and_without_the_upgrade(upgrade_models):
    model = upgrade_models.torch_eye_chain(9)
    upgraded = eyefold.optimize_with_report(model)
    assert [n.action for n in upgraded.report.nodes] == ["folded"]
    assert "EyeLike" not in {n.op_type for n in upgraded.model.graph.node}
    _assert_same_outputs(model, upgraded.model)
    # onnx's data propagation stops at Unsqueeze below opset 13; eyefold's shape values
    # between its rounds of inference do not.
    kept = eyefold.optimize_with_report(model, upgrade=False)
    assert [n.action for n in kept.report.nodes] == ["folded"]
    assert _opset(kept.model) == 9
    _assert_same_outputs(model, kept.model)


# ---------------------------------------------------------------- errors


def test_converter_rejecting_the_model_is_an_error_and_leaves_the_model_alone(upgrade_models):
    """Unsqueeze-13 with its axes as an attribute: the converter fails on it, and onnx's
    checker refuses the input itself, so the error names the input, not the converter."""
    model = ir.serde.deserialize_model(upgrade_models.unsqueeze_with_axes_attribute_at_13())
    before = ir.serde.serialize_model(model).SerializeToString(deterministic=True)
    refused = r"invalid at opset 13 at op Unsqueeze"
    with pytest.raises(InvalidModelError, match=refused) as caught:
        UpgradeOpsetPass(22)(model)
    assert not isinstance(caught.value, UpgradeError)
    assert "input size 1 not in range" in str(caught.value)
    assert ir.serde.serialize_model(model).SerializeToString(deterministic=True) == before


def test_model_invalid_before_the_upgrade_is_not_blamed_on_it(upgrade_models):
    nodes = [helper.make_node("Relu", ["x"], ["y"], not_an_attribute=1)]
    graph = helper.make_graph(
        nodes,
        "bad_attr",
        [upgrade_models.float_info("x", [2])],
        [upgrade_models.float_info("y", [2])],
    )
    model = ir.serde.deserialize_model(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    )
    before = ir.serde.serialize_model(model).SerializeToString(deterministic=True)
    with pytest.raises(InvalidModelError, match=r"invalid at opset 11 at op Relu") as caught:
        UpgradeOpsetPass(22)(model)
    assert not isinstance(caught.value, UpgradeError)
    assert ir.serde.serialize_model(model).SerializeToString(deterministic=True) == before
    # The same Relu without the stray attribute upgrades.
    del model.graph.node(0).attributes["not_an_attribute"]
    assert UpgradeOpsetPass(22)(model).modified


def test_converter_failure_names_the_op_and_leaves_the_model_alone(upgrade_models):
    nodes = [helper.make_node("NotAnOnnxOp", ["x"], ["y"])]
    graph = helper.make_graph(
        nodes,
        "unknown",
        [upgrade_models.float_info("x", [2])],
        [upgrade_models.float_info("y", [2])],
    )
    model = ir.serde.deserialize_model(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    )
    before = ir.serde.serialize_model(model).SerializeToString(deterministic=True)
    # The converter fails on it; onnx's checker says why: the op does not exist.
    refused = r"invalid at opset 11 at op NotAnOnnxOp: No Op registered for NotAnOnnxOp"
    with pytest.raises(InvalidModelError, match=refused):
        UpgradeOpsetPass(22)(model)
    assert ir.serde.serialize_model(model).SerializeToString(deterministic=True) == before


def test_function_attribute_reference_on_a_changed_op_is_an_error_naming_the_function(
    upgrade_models,
):
    cases = (("Softmax", "axis", 11, False), ("Cast", "to", 19, True))  # both converters
    for op, attr, opset, grid_sample in cases:
        model = upgrade_models.function_with_reference(
            op, attr, opset, grid_sample=grid_sample
        )
        pattern = rf"function pkg\.corpus::Ref.*{op}.*{opset} to 22.*upgrade=False"
        with pytest.raises(UpgradeError, match=pattern):
            _upgrade(model, 22)


@pytest.mark.parametrize(
    ("opset", "grid_sample"),
    [(11, False), (19, False), (19, True)],
    ids=["onnx-converter-11", "onnx-converter-19", "onnxscript-converter-19"],
)
def test_function_attribute_reference_on_an_unchanged_op_is_kept(
    opset, grid_sample, upgrade_models
):
    # Shrink has one version, 9.
    model = upgrade_models.function_with_reference(
        "Shrink", "bias", opset, grid_sample=grid_sample
    )
    upgraded, modified = _upgrade(model, 22)
    assert modified
    node = upgraded.functions[0].node[-1]
    assert node.op_type == "Shrink" and node.attribute[0].ref_attr_name == "bias"
    _full_check(upgraded)
    if not grid_sample:
        _assert_same_outputs(model, upgraded)
        return
    (sample,) = [n for n in upgraded.functions[0].node if n.op_type == "GridSample"]
    assert helper.get_attribute_value(sample.attribute[0]) == b"linear"  # onnxscript's adapter
    # onnx.reference does not run GridSample-19's "bilinear"; onnxruntime runs both.
    feeds = _feeds(model)
    expected, actual = _ort_outputs(model, feeds), _ort_outputs(upgraded, feeds)
    assert expected is not None and actual is not None
    np.testing.assert_allclose(actual[0], expected[0], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("target", [22, NEWEST], ids=["to22", f"to{NEWEST}"])
def test_group_normalization_18_keeps_its_per_group_scale(target, upgrade_models):
    original = upgrade_models.group_normalization_model()
    upgraded, modified = _upgrade(original, target)
    assert modified and _opset(upgraded) == target
    _full_check(upgraded)
    runtimes = _assert_same_outputs(original, upgraded)
    assert "reference" in runtimes
    if target == 22:
        assert "onnxruntime" in runtimes
    # onnx's C++ converter alone only bumps the version: per-group scale, per-channel op.
    plain = onnx.version_converter.convert_version(original, 22)
    assert list(plain.graph.node[1].input) == ["x_relu", "scale", "bias"]
    with pytest.raises(TypeError, match=r"Issues with types"):  # scale [2] vs 4 channels
        ReferenceEvaluator(plain).run(None, _feeds(original))


def test_eyelike_taking_k_and_dtype_from_function_attributes_is_kept(upgrade_models):
    node = helper.make_node("EyeLike", ["a"], ["out"])
    node.attribute.extend(
        upgrade_models.attribute_reference(name, onnx.AttributeProto.INT)
        for name in ("k", "dtype")
    )
    function = upgrade_models.single_input_function("Eye", [node], 9, ["k", "dtype"])
    call = helper.make_node("Eye", ["x"], ["y"], domain=upgrade_models.FUNCTION_DOMAIN, k=1)
    call.attribute.append(helper.make_attribute("dtype", TensorProto.DOUBLE))
    y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, [3, 4])
    graph = helper.make_graph([call], "eye_ref", [upgrade_models.float_info("x", [3, 4])], [y])
    opsets = [
        helper.make_opsetid("", 9),
        helper.make_opsetid(upgrade_models.FUNCTION_DOMAIN, 1),
    ]
    model = helper.make_model(graph, opset_imports=opsets, functions=[function])
    upgraded, modified = _upgrade(model, 22)
    assert modified
    (kept,) = upgraded.functions[0].node
    assert [(a.name, a.ref_attr_name) for a in kept.attribute] == [
        ("k", "k"),
        ("dtype", "dtype"),
    ]
    _full_check(upgraded)
    _assert_same_outputs(model, upgraded)


# ---------------------------------------------------------------- pipeline


def test_no_upgrade_keeps_the_opset(upgrade_models):
    model = upgrade_models.corpus_model(11)
    kept = eyefold.optimize_with_report(model, upgrade=False)
    assert _opset(kept.model) == 11
    assert kept.report.opset_before == kept.report.opset_after == 11
    assert "upgrade" not in {s.name for s in kept.report.steps}
    upgraded = eyefold.optimize_with_report(model)
    assert upgraded.report.opset_after == 22
    assert "upgrade" in {s.name for s in upgraded.report.steps}


def test_default_pipeline_runs_the_upgrade_first(upgrade_models):
    manager = default_pipeline(PipelineOptions(target_opset=21))
    assert isinstance(manager.passes[0], UpgradeOpsetPass)
    model = ir.serde.deserialize_model(upgrade_models.corpus_model(13))
    manager(model)
    assert model.opset_imports[""] == 21
    assert not any(
        isinstance(p, UpgradeOpsetPass)
        for p in default_pipeline(PipelineOptions(upgrade=False)).passes
    )
