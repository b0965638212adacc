"""LowerEyeLikePass: EyeLike written out in primitive ops, bit-exact in every type."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

import eyefold
from eyefold.core.eyelike_types import EYELIKE_TYPES_OPSET_22
from eyefold.passes.lower_eye_like import LowerEyeLikePass, LowerResult
from eyefold.testing import (
    as_proto,
    check_model_safely,
    count_ops,
    run_onnxruntime,
    run_reference,
)

TYPES = sorted(EYELIKE_TYPES_OPSET_22, key=lambda t: t.value)
PAIRS = [(source, dtype) for source in TYPES for dtype in [None, *TYPES]]
# Offsets cycled over the pairs: inside, on the edge of and far beyond the matrix, and the
# int64 extremes, whose naive ``i + k`` would overflow.
OFFSETS = [0, 1, -1, 3, -4, 5, -6, 2**63 - 1, -(2**63), 100]
SIZES = [(0, 3), (3, 5), (6, 4)]

# The ONNX operators that onnx-tensorrt's parser supports, from its docs/operators.md
# support matrix ("Y" rows), as far as this pass could ever emit them.
TENSORRT_OPS = frozenset(
    {
        "Add", "Cast", "Concat", "Constant", "ConstantOfShape", "Equal", "Expand",
        "Gather", "Identity", "Range", "Reshape", "Shape", "Slice", "Squeeze", "Sub",
        "Unsqueeze", "Where", "Min", "Max", "Mul", "Less", "Greater", "Not", "And",
    }
)  # fmt: skip


def _eyelike_text(source: ir.DataType, dtype: ir.DataType | None, k: int, opset=22) -> str:
    attributes = f"k={k}" + (f", dtype={dtype.value}" if dtype is not None else "")
    out = (dtype or source).name.lower()
    return f"""<ir_version: 10, opset_import: ["" : {opset}]>
    agraph ({source.name.lower()}[rows, cols] x) => ({out}[rows, cols] y) {{
        y = EyeLike<{attributes}>(x)
    }}"""


def _lowered(text: str) -> tuple[object, ir.Model, LowerResult]:
    before = ir.to_proto(ir.from_onnx_text(text))
    model = ir.from_onnx_text(text)
    result = LowerEyeLikePass()(model)
    assert result.modified == any(o.lowered for o in result.outcomes)
    return before, model, result


def _assert_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert (got.dtype, got.shape, got.tobytes()) == (want.dtype, want.shape, want.tobytes())


@pytest.mark.parametrize(
    ("source", "dtype"), PAIRS, ids=[f"{s.name}-{d.name if d else 'none'}" for s, d in PAIRS]
)
def test_every_type_pair_is_bit_exact(source, dtype):
    k = OFFSETS[PAIRS.index((source, dtype)) % len(OFFSETS)]
    before, after, lowering = _lowered(_eyelike_text(source, dtype, k))
    assert [o.lowered for o in lowering.outcomes] == [True]
    assert count_ops(after, "EyeLike") == 0
    assert {n.op_type for n in after.graph} <= TENSORRT_OPS
    for rows, cols in SIZES:
        feeds = {"x": np.zeros((rows, cols), source.numpy())}
        (want,) = run_reference(before, feeds)
        (got,) = run_reference(after, feeds)
        _assert_bits(got, want)
        ran = run_onnxruntime(after, feeds)  # None only for a bfloat16 input or output
        assert ran is not None or ir.DataType.BFLOAT16 in (source, dtype)
        if ran is not None:
            _assert_bits(ran[0], want)


@pytest.mark.parametrize("source", [ir.DataType.FLOAT, ir.DataType.INT64, ir.DataType.BOOL])
def test_an_int64_result_is_a_where_over_the_constants_not_a_cast(source):
    # tract types every Cast to int64 as its shape type TDim, which it cannot return.
    before, after, lowering = _lowered(_eyelike_text(source, ir.DataType.INT64, 1))
    assert "Where(int64 1, 0)" in lowering.outcomes[0].note
    ops = [n.op_type for n in after.graph]
    assert ops[-1] == "Where" and "Cast" not in ops
    where = next(n for n in after.graph if n.op_type == "Where")
    values = [v.producer().attributes["value"].as_tensor().numpy() for v in where.inputs[1:]]
    assert [(c.dtype, c.item()) for c in values] == [(np.int64, 1), (np.int64, 0)]
    feeds = {"x": np.zeros((3, 4), source.numpy())}
    _assert_bits(run_reference(after, feeds)[0], run_reference(before, feeds)[0])


def test_names_come_from_the_output_and_the_pass_is_idempotent_and_deterministic():
    text = _eyelike_text(ir.DataType.FLOAT, ir.DataType.INT32, 2)
    _, first, _ = _lowered(text)
    _, second, _ = _lowered(text)
    assert as_proto(first).SerializeToString() == as_proto(second).SerializeToString()
    names = [v.name for n in first.graph for v in n.outputs]
    assert len(set(names)) == len(names) and names[-1] == "y"
    assert all(name.startswith("y__lowered_") for name in names[:-1])
    again = LowerEyeLikePass()(first)
    assert not again.modified
    check_model_safely(first)


def test_subgraphs_and_functions_are_lowered_with_unique_names():
    text = """<ir_version: 10, opset_import: ["" : 22, "pkg" : 1]>
    agraph (bool c, float[n, m] x) => (float[n, m] y, int64[n, m] z) {
        y = If(c) <
            then_branch = t () => (float[n, m] a) { a = EyeLike<k=-1>(x) },
            else_branch = f () => (float[n, m] b) { b = Identity(x) }
        >
        z = pkg.F(x)
    }
    <domain: "pkg", opset_import: ["" : 22]>
    F (v) => (w) { w = EyeLike<k=1, dtype=7>(v) }"""
    before, after, lowering = _lowered(text)
    assert [o.scope for o in lowering.outcomes] == ["main/If_0.then_branch", "function pkg::F"]
    assert count_ops(after, "EyeLike") == 0 and count_ops(after, "Range") == 4
    check_model_safely(after)
    for cond in (True, False):
        feeds = {"c": np.array(cond), "x": np.ones((4, 3), np.float32)}
        wanted = run_reference(before, feeds)
        for results in (run_reference(after, feeds), run_onnxruntime(after, feeds)):
            for want, got in zip(wanted, results, strict=True):
                _assert_bits(got, want)


@pytest.mark.parametrize("opset", [11, 12, 13])
def test_older_opsets_use_their_unsqueeze(opset):
    text = _eyelike_text(ir.DataType.FLOAT, None, -1, opset).replace("10,", "7,")
    before, after, lowering = _lowered(text)
    assert lowering.outcomes[0].lowered
    unsqueeze = next(n for n in after.graph if n.op_type == "Unsqueeze")
    assert len(unsqueeze.inputs) == (2 if opset >= 13 else 1)
    feeds = {"x": np.zeros((3, 4), np.float32)}
    _assert_bits(run_onnxruntime(after, feeds)[0], run_reference(before, feeds)[0])


def test_below_opset_11_it_refuses_with_the_reason():
    text = _eyelike_text(ir.DataType.FLOAT, None, 0, 10).replace("10,", "5,")
    _, after, lowering = _lowered(text)
    (outcome,) = lowering.outcomes
    assert not outcome.lowered and "no Range" in outcome.note
    assert count_ops(after, "EyeLike") == 1


def test_after_folding_only_what_is_left_is_lowered():
    text = """<ir_version: 10, opset_import: ["" : 22]>
    agraph (float[4, 4] s, float[n, 3] d) => (float[4, 4] a, bool[n, 3] b) {
        a = EyeLike(s)
        b = EyeLike<k=1, dtype=9>(d)
    }"""
    before = ir.to_proto(ir.from_onnx_text(text))
    model = eyefold.optimize(ir.from_onnx_text(text))
    lowering = LowerEyeLikePass()(model)
    assert lowering.modified
    assert [o.name for o in lowering.outcomes] == ["b"]  # `a` was folded already
    assert count_ops(model, "EyeLike") == 0 and count_ops(model, "Cast") == 0  # bool: Equal
    feeds = {"s": np.ones((4, 4), np.float32), "d": np.ones((5, 3), np.float32)}
    for want, got in zip(
        run_reference(before, feeds), run_onnxruntime(model, feeds), strict=True
    ):
        _assert_bits(got, want)


@pytest.mark.parametrize("data", ["float", "bool"])
def test_tf2onnx_band_part_runs_lowered(data):
    # tf2onnx MatrixBandPart.version_11 with num_lower == num_upper == 0 on a rank-2 input:
    # EyeLike(data) is the mask, cast to the data type, then Mul; a bool input goes
    # through FLOAT on both sides and back (_apply_mask_and_transform).
    if data == "bool":
        body = """eye = EyeLike(data)
        maskf = Cast<to=1>(eye)
        dataf = Cast<to=1>(data)
        prod = Mul(maskf, dataf)
        y = Cast<to=9>(prod)"""
    else:
        body = """eye = EyeLike(data)
        mask = Cast<to=1>(eye)
        y = Mul(mask, data)"""
    text = f"""<ir_version: 8, opset_import: ["" : 13]>
    agraph ({data}[r, c] data) => ({data}[r, c] y) {{
        shape = Shape(data)
        {body}
    }}"""
    before = ir.to_proto(ir.from_onnx_text(text))
    model = eyefold.optimize(ir.from_onnx_text(text))
    assert LowerEyeLikePass()(model).modified
    assert count_ops(model, "EyeLike") == 0
    check_model_safely(model)
    for rows, cols in [(3, 5), (4, 2), (0, 2)]:
        x = np.arange(rows * cols).reshape(rows, cols) % 3
        feeds = {"data": x.astype(np.float32 if data == "float" else np.bool_)}
        (want,) = run_reference(before, feeds)
        _assert_bits(run_reference(model, feeds)[0], want)
        _assert_bits(run_onnxruntime(model, feeds)[0], want)


DYNAMIC = """<ir_version: 10, opset_import: ["" : 22]>
agraph (float[4, 4] s, float[n, 3] d) => (float[4, 4] a, int32[n, 3] b) {
    a = EyeLike(s)
    b = EyeLike<k=-1, dtype=6>(d)
}"""


@pytest.mark.parametrize(
    "options",
    [{"target_runtime": "tensorrt"}, {"lower_eyelike": True}, {"lower_eyelike": True,
     "target_runtime": "onnxruntime"}],
    ids=["tensorrt", "lower-eyelike", "lower-and-onnxruntime"],
)  # fmt: skip
def test_optimize_lowers_for_tensorrt_or_when_asked(options):
    before = ir.to_proto(ir.from_onnx_text(DYNAMIC))
    result = eyefold.optimize_with_report(ir.from_onnx_text(DYNAMIC), **options)
    assert "lower" in [step.name for step in result.report.steps]
    assert count_ops(result.model, "EyeLike") == 0
    assert {n.op_type for n in result.model.graph} <= TENSORRT_OPS
    feeds = {"s": np.ones((4, 4), np.float32), "d": np.ones((5, 3), np.float32)}
    for want, got in zip(run_reference(before, feeds), run_onnxruntime(result.model, feeds),
                         strict=True):  # fmt: skip
        _assert_bits(got, want)


def test_default_run_does_not_lower():
    result = eyefold.optimize_with_report(ir.from_onnx_text(DYNAMIC))
    assert "lower" not in [step.name for step in result.report.steps]
    assert count_ops(result.model, "EyeLike") == 1


@pytest.mark.parametrize("flags", [["--target-runtime", "tensorrt"], ["--lower-eyelike"]])
def test_command_line_lowers(tmp_path, flags):
    from eyefold.cli import main

    source, target = tmp_path / "in.onnx", tmp_path / "out.onnx"
    source.write_bytes(ir.to_proto(ir.from_onnx_text(DYNAMIC)).SerializeToString())
    assert main(["optimize", str(source), str(target), "-q", *flags]) == 0
    assert count_ops(ir.to_proto(ir.load(target)), "EyeLike") == 0


def test_a_node_that_cannot_be_lowered_is_a_warning_in_the_report():
    text = """<ir_version: 5, opset_import: ["" : 10]>
    g (float[N,M] x) => (float[N,M] y) { y = EyeLike<k=1>(x) }"""
    report = eyefold.optimize_with_report(
        ir.from_onnx_text(text), upgrade=False, target_runtime="tensorrt"
    ).report
    (node,) = report.nodes
    assert not node.lowered and "opset 10 has no Range" in (node.runtime_note or "")
    assert any("was not lowered" in w and "opset upgrade" in w for w in report.warnings)
    assert "runtime" not in report.to_dict()  # no onnxruntime verdict for a TensorRT target
