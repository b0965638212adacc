"""Opset 6..8 upgrades: each conversion reproduces the original or is refused.

onnxruntime has no kernels below opset 7, and onnx's reference evaluator is lenient where
the old ops were strict (it aligns a PRelu slope with whichever axis fits), so the oracle
here is numpy written from the opset-6 specification, the outputs stored with onnx's backend
test models, and onnxruntime running the upgraded model.
"""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from eyefold.errors import UpgradeError
from eyefold.passes import UpgradeOpsetPass

CORPUS = pathlib.Path(onnx.__file__).parent / "backend" / "test" / "data" / "pytorch-converted"
RNG = np.random.default_rng(7)


def _float(name: str, shape: list[int | str] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    opset: int,
    initializers: tuple[onnx.TensorProto, ...] = (),
) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "legacy", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _upgrade(model: onnx.ModelProto) -> onnx.ModelProto:
    working = ir.serde.deserialize_model(model)
    assert UpgradeOpsetPass(22)(working).modified
    upgraded = ir.serde.serialize_model(working)
    onnx.checker.check_model(upgraded, full_check=True)
    return upgraded


def _ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return session.run(None, feeds)


def _normal(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _assert_refused(model: onnx.ModelProto, pattern: str) -> None:
    """UpgradeError matching ``pattern``, in one line naming ``upgrade=False``; no change."""
    working = ir.serde.deserialize_model(model)
    before = ir.serde.serialize_model(working).SerializeToString(deterministic=True)
    with pytest.raises(UpgradeError, match=pattern) as caught:
        UpgradeOpsetPass(22)(working)
    assert "\n" not in str(caught.value)
    assert "upgrade=False" in str(caught.value)  # the library names its keyword
    assert ir.serde.serialize_model(working).SerializeToString(deterministic=True) == before


# ---------------------------------------------------------------- PRelu 6 -> 7


@pytest.mark.parametrize("rank", ["1d", "2d", "3d"])
def test_prelu_multiparam_from_the_backend_corpus_gives_the_stored_outputs(rank):
    # onnx registers CompatibleAdapter("PRelu", 6, 7) (convert.h): the [C] slope stays as
    # is and broadcasts against the last axis, so onnxruntime fails on [N, C, ...] inputs.
    folder = CORPUS / f"test_PReLU_{rank}_multiparam"
    original = onnx.load(folder / "model.onnx")
    upgraded = _upgrade(original)
    x = numpy_helper.to_array(onnx.load_tensor(folder / "test_data_set_0" / "input_0.pb"))
    stored = numpy_helper.to_array(
        onnx.load_tensor(folder / "test_data_set_0" / "output_0.pb")
    )
    (got,) = _ort(upgraded, {original.graph.input[0].name: x})
    np.testing.assert_allclose(got, stored, rtol=1e-6, atol=1e-7)
    slope = numpy_helper.to_array(original.graph.initializer[0])
    channel = slope.reshape((-1,) + (1,) * (x.ndim - 2))
    np.testing.assert_array_equal(got, np.where(x > 0, x, x * channel))


def test_prelu_slope_is_per_channel_when_the_last_dim_equals_the_channel_count():
    # x [2, 3, 4, 3]: a [3] slope kept as is would broadcast against the last axis and
    # run, with other numbers.
    slope = np.array([0.1, 0.2, 0.3], dtype=np.float32)
    model = _model(
        [helper.make_node("PRelu", ["x", "slope"], ["y"])],
        [_float("x", [2, 3, 4, 3])],
        [_float("y", [2, 3, 4, 3])],
        6,
        (numpy_helper.from_array(slope, "slope"),),
    )
    x = _normal(2, 3, 4, 3)
    (got,) = _ort(_upgrade(model), {"x": x})
    np.testing.assert_array_equal(got, np.where(x > 0, x, x * slope.reshape(3, 1, 1)))


def test_prelu_with_an_input_of_unknown_rank_is_refused():
    slope = numpy_helper.from_array(np.array([0.1, 0.2, 0.3], dtype=np.float32), "slope")
    model = _model(
        [helper.make_node("PRelu", ["x", "slope"], ["y"], name="act")],
        [_float("x", None)],
        [_float("y", None)],
        6,
        (slope,),
    )
    _assert_refused(model, r"node 'act' \(PRelu\) at opset 6: its slope is per channel")


# ---------------------------------------------------------------- broadcast ops 6 -> 7


@pytest.mark.parametrize("batch", [3, "N"], ids=["static", "symbolic"])
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
def test_legacy_broadcast_from_an_inner_axis_is_kept(op, batch):
    # A per-channel [C] operand with broadcast=1, axis=1 on [N, C, H, W]. onnx's
    # BroadcastForwardCompatibility appends rank(A) - rank(B) axes, which aligns it with
    # axis 0 (N == C: other numbers), and refuses any symbolic dim.
    model = _model(
        [helper.make_node(op, ["x", "b"], ["y"], broadcast=1, axis=1)],
        [_float("x", [batch, 3, 4, 5]), _float("b", [3])],
        [_float("y", [batch, 3, 4, 5])],
        6,
    )
    x, b = _normal(3, 3, 4, 5), _normal(3) + 2.0
    (got,) = _ort(_upgrade(model), {"x": x, "b": b})
    want = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}[op](
        x, b.reshape(3, 1, 1)
    )
    np.testing.assert_array_equal(got, want)


def test_gemm_6_with_a_symbolic_batch_dim_is_converted():
    # onnx's Gemm_6_7 needs every input dim static; Gemm-7 broadcasts C as Gemm-6 did.
    model = _model(
        [helper.make_node("Gemm", ["a", "w", "c"], ["y"], broadcast=1, transB=1)],
        [_float("a", ["N", 2]), _float("w", [4, 2]), _float("c", [4])],
        [_float("y", ["N", 4])],
        6,
    )
    feeds = {"a": _normal(5, 2), "w": _normal(4, 2), "c": _normal(4)}
    (got,) = _ort(_upgrade(model), feeds)
    np.testing.assert_allclose(got, feeds["a"] @ feeds["w"].T + feeds["c"], rtol=1e-6)


@pytest.mark.parametrize("op", ["Greater", "Less", "Equal"])
def test_comparisons_at_opset_6_are_converted(op):
    # onnx has no 6 -> 7 adapter for them ("Missing in this group", convert.h).
    model = _model(
        [helper.make_node(op, ["x", "b"], ["y"], broadcast=1, axis=0)],
        [_float("x", [3, 4]), _float("b", [3])],
        [helper.make_tensor_value_info("y", TensorProto.BOOL, [3, 4])],
        6,
    )
    x, b = _normal(3, 4), _normal(3)
    x[:, 0] = b  # equal entries
    (got,) = _ort(_upgrade(model), {"x": x, "b": b})
    compare = {"Greater": np.greater, "Less": np.less, "Equal": np.equal}[op]
    np.testing.assert_array_equal(got, compare(x, b.reshape(3, 1)))


def test_lstm_with_output_sequence_is_converted():
    # LSTM-1's output_sequence only made Y optional; LSTM-7 dropped it (no onnx adapter).
    weights = (
        numpy_helper.from_array(_normal(1, 16, 3), "W"),
        numpy_helper.from_array(_normal(1, 16, 4), "R"),
    )
    nodes = [
        helper.make_node("LSTM", ["x", "W", "R"], ["Y"], hidden_size=4, output_sequence=1)
    ]
    inputs, outputs = [_float("x", [5, 2, 3])], [_float("Y", [5, 1, 2, 4])]
    model = _model(nodes, inputs, outputs, 6, weights)
    del nodes[0].attribute[1]  # the same LSTM in its opset-7 form
    assert [a.name for a in nodes[0].attribute] == ["hidden_size"]
    at_7 = _model(nodes, inputs, outputs, 7, weights)
    feeds = {"x": _normal(5, 2, 3)}
    np.testing.assert_array_equal(_ort(_upgrade(model), feeds)[0], _ort(at_7, feeds)[0])


# ---------------------------------------------------------------- modes and refusals


def _batch_norm(opset: int, **attributes: int) -> onnx.ModelProto:
    stats = [
        numpy_helper.from_array(np.linspace(0.5, 1.5, 3, dtype=np.float32) + i, name)
        for i, name in enumerate(["scale", "bias", "mean", "var"])
    ]
    node = helper.make_node(
        "BatchNormalization",
        ["x", "scale", "bias", "mean", "var"],
        ["y"],
        name="bn",
        **attributes,
    )
    return _model(
        [node], [_float("x", [2, 3, 4, 5])], [_float("y", [2, 3, 4, 5])], opset, stats
    )


def test_batch_normalization_6_in_test_mode_is_converted():
    model = _batch_norm(6, is_test=1)
    x = _normal(2, 3, 4, 5)
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    (got,) = _ort(_upgrade(model), {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["BatchNormalization", "Dropout"])
def test_training_mode_at_opset_6_is_refused(op):
    # is_test defaults to 0 (training: batch statistics, random drops); onnx's converter
    # drops it only when set, and a one-output BatchNormalization-7 runs in test mode.
    if op == "BatchNormalization":
        model = _batch_norm(6)
    else:
        node = helper.make_node("Dropout", ["x"], ["y"], name="bn", ratio=0.25)
        model = _model([node], [_float("x", [2, 3])], [_float("y", [2, 3])], 6)
    _assert_refused(model, rf"node 'bn' \({op}\) at opset 6: without is_test=1 .*training")


def test_upsample_1_nearest_is_converted_and_bilinear_refused():
    def upsample(mode: str) -> onnx.ModelProto:
        node = helper.make_node(
            "Upsample", ["x"], ["y"], name="up", height_scale=2.0, width_scale=3.0, mode=mode
        )
        return _model([node], [_float("x", [1, 2, 3, 4])], [_float("y", [1, 2, 6, 12])], 6)

    x = _normal(1, 2, 3, 4)
    (got,) = _ort(_upgrade(upsample("nearest")), {"x": x})
    np.testing.assert_array_equal(got, x.repeat(2, axis=2).repeat(3, axis=3))
    _assert_refused(
        upsample("bilinear"), r"node 'up' \(Upsample\) at opset 6: mode 'bilinear'"
    )


def test_scan_8_is_refused():
    # onnx's Scan_8_9 strips the batch axis from the declared types, not from the data.
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"])],
        "body",
        [_float("s_in", [3]), _float("x_t", [3])],
        [_float("s_out", [3])],
    )
    scan = helper.make_node(
        "Scan", ["", "s0", "xs"], ["s"], name="scan", body=body, num_scan_inputs=1
    )
    model = _model(
        [scan], [_float("s0", [2, 3]), _float("xs", [2, 4, 3])], [_float("s", [2, 3])], 8
    )
    _assert_refused(model, r"node 'scan' \(Scan\) at opset 8: Scan-8 has a batch axis")


def test_opsets_below_6_are_refused():
    model = _model(
        [helper.make_node("Relu", ["x"], ["y"])], [_float("x", [2])], [_float("y", [2])], 5
    )
    _assert_refused(model, r"opset 5 is older than opset 6, the oldest eyefold upgrades")
