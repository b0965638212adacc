"""diagonal_int / diagonal_float: the exporters' masked-sum diagonal read as a strided Slice.

The models are written node for node as the exporters emit them:
    * dynamo: onnxscript ``torch_lib/ops/core.py::aten_diagonal`` (onnxscript 0.7);
    * TorchScript: ``torch/onnx/_internal/torchscript_exporter/symbolic_opset12.py::diagonal``
      (formerly ``torch/onnx/symbolic_opset12.py``);
    * tf2onnx: ``tf2onnx/onnx_opset/nn.py::MatrixBandPart.version_11`` with
      ``num_lower == num_upper == 0`` on a rank-2 input (``_apply_mask_and_transform``).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from onnxscript.rewriter import MatchingTracer

import eyefold
from eyefold.passes.apply_rules import ApplyEyeLikeRulesPass
from eyefold.rules import diagonal_float, diagonal_int
from eyefold.testing import check_model_safely, count_ops, run_onnxruntime, run_reference

RULES = ["diagonal_int", "diagonal_float"]
NUMPY = {"float": np.float32, "int64": np.int64, "bool": np.bool_}
# (symbolic shape, dim1, dim2): batched last dims, leading dims moved last, the same dims
# swapped (the transposed matrix's diagonal), and two dims that are not adjacent.
LAYOUTS = [("b,r,c", 1, 2), ("r,c,b", 0, 1), ("r,c", 1, 0), ("r,b,c", 0, 2)]
SIZES = [(3, 5), (5, 3), (4, 4), (0, 3), (3, 0)]
OFFSETS = [-7, -1, 0, 2, 9]


def aten_diagonal_text(
    dtype: str, shape: str, dim1: int, dim2: int, k: int, opset: int
) -> str:
    """onnxscript torch_lib ``aten_diagonal(self, offset=k, dim1, dim2)`` as it traces."""
    rank = len(shape.split(","))
    perm = [d for d in range(rank) if d not in (dim1, dim2)] + [dim1, dim2]
    if dtype == "bool":  # is_bool: both Mul operands through Cast(INT64), Cast(BOOL) after
        product = f"""xi = Cast<to=7>(x)
        maski = Cast<to=7>(mask)
        xt = Transpose<perm={perm}>(xi)
        prod = Mul(xt, maski)"""
        tail = "sliced = Slice(summed, start, end, axes)\n        y = Cast<to=9>(sliced)"
    else:
        product = f"""masklike = CastLike(mask, x)
        xt = Transpose<perm={perm}>(x)
        prod = Mul(xt, masklike)"""
        tail = "y = Slice(summed, start, end, axes)"
    if k < 0:
        length = (
            "length0 = Add(dim1_size, offset_val)\n        start = Constant<value_ints=[0]>()"
        )
    else:
        length = "length0 = Sub(dim2_size, offset_val)\n        start = Identity(offset_val)"
    return f"""<ir_version: 10, opset_import: ["" : {opset}]>
    agraph ({dtype}[{shape}] x) => (y) {{
        neg_1 = Constant<value_ints=[-1]>()
        i1 = Constant<value_int={dim1}>()
        g1 = Gather(shape1, i1)
        dim1_size = Reshape(g1, neg_1)
        i2 = Constant<value_int={dim2}>()
        shape2 = Shape(x)
        g2 = Gather(shape2, i2)
        dim2_size = Reshape(g2, neg_1)
        mask_shape = Concat<axis=0>(dim1_size, dim2_size)
        zeros = ConstantOfShape(mask_shape)
        mask = EyeLike<k={k}>(zeros)
        {product}
        axes = Constant<value_ints=[{rank - 2}]>()
        summed = ReduceSum<keepdims=0>(prod, axes)
        min_dim_size = Min(dim1_size, dim2_size)
        offset_val = Constant<value_ints=[{k}]>()
        {length}
        zero = Constant<value_ints=[0]>()
        shorter = Min(length0, min_dim_size)
        length = Max(shorter, zero)
        end = Add(start, length)
        {tail}
    }}""".replace("g1 = Gather(shape1", "shape1 = Shape(x)\n        g1 = Gather(shape1")


def torchscript_diagonal_text(k: int) -> str:
    """``symbolic_opset12.diagonal(self, offset=k, dim1=0, dim2=1)`` on a rank-3 input.

    One departure: the source passes CumSum's axis as ``LongTensor([0])`` (1-D), which
    onnxruntime takes but onnx's reference evaluator refuses (the spec says 0-D); the
    axis here is the scalar 0.
    """
    perm, rank = [2, 0, 1], 3
    if k >= 0:
        size = "sub = Sub(dim2_size, offset_op)\n        low = Min(dim1_size, sub)"
    else:
        size = "add = Add(dim1_size, offset_op)\n        low = Min(add, dim2_size)"
    first = abs(k) - 1 if k < 0 else -1  # offset is set to 0 for k >= 0 before this
    return f"""<ir_version: 7, opset_import: ["" : 12]>
    agraph (float[r,c,b] x) => (y) {{
        shape1 = Shape(x)
        c1 = Constant<value = int64[1] {{0}}>()
        dim1_size = Gather<axis=0>(shape1, c1)
        shape2 = Shape(x)
        c2 = Constant<value = int64[1] {{1}}>()
        dim2_size = Gather<axis=0>(shape2, c2)
        mask_shape = Concat<axis=0>(dim1_size, dim2_size)
        zeros = ConstantOfShape<value = float[1] {{0}}>(mask_shape)
        mask = EyeLike<k={k}>(zeros)
        xt = Transpose<perm={perm}>(x)
        prod = Mul(xt, mask)
        result = ReduceSum<axes=[-1], keepdims=0>(prod)
        offset_op = Constant<value = int64[1] {{{k}}}>()
        {size}
        zero = Constant<value = int64[1] {{0}}>()
        diag_max = Max(low, zero)
        diag_size = Concat<axis=0>(diag_max)
        ones = ConstantOfShape<value = int64[1] {{1}}>(diag_size)
        cum_axis = Constant<value = int64 {{0}}>()
        window0 = CumSum(ones, cum_axis)
        first = Constant<value = int64[1] {{{first}}}>()
        window = Add(window0, first)
        rshape = Shape(result)
        a0 = Constant<value = int64[1] {{0}}>()
        batch = Gather<axis=0>(rshape, a0)
        gather_shape = Concat<axis=0>(batch, diag_size)
        indices0 = ConstantOfShape<value = int64[1] {{0}}>(gather_shape)
        scalar0 = Constant<value = int64 {{0}}>()
        empty = Equal(diag_size, scalar0)
        cond = Not(empty)
        y = If(cond) <
            then_branch = g1 () => (float[?, ?] taken) {{
                indices1 = Add(indices0, window)
                indices = Unsqueeze<axes=[{rank - 1}]>(indices1)
                taken = GatherND<batch_dims={rank - 2}>(result, indices)
            }},
            else_branch = g2 () => (float[?, ?] none) {{
                none = ConstantOfShape<value = float[1] {{0}}>(gather_shape)
            }}
        >
    }}"""


def _feeds(dtype: str, shape: str, rows: int, cols: int, batch: int = 2) -> dict:
    dims = {"r": rows, "c": cols, "b": batch}
    sizes = [dims[s] for s in shape.split(",")]
    rng = np.random.default_rng(rows * 31 + cols)
    return {"x": rng.integers(-9, 10, size=sizes).astype(NUMPY[dtype])}


def _assert_same_everywhere(before, after, feeds, expected=None) -> None:
    """Reference and onnxruntime, before and after: the same bits (and the oracle's)."""
    (want,) = run_reference(before, feeds)
    results = [run_reference(after, feeds)[0]]
    for model in (before, after):
        ran = run_onnxruntime(model, feeds)
        assert ran is not None, "onnxruntime runs both models"
        results.append(ran[0])
    for got in results:
        assert (got.dtype, got.shape, got.tobytes()) == (
            want.dtype,
            want.shape,
            want.tobytes(),
        )
    if expected is not None:
        np.testing.assert_array_equal(want, expected)


@pytest.mark.parametrize("k", OFFSETS, ids=lambda k: f"k{k}")
@pytest.mark.parametrize(
    "layout", LAYOUTS, ids=lambda v: f"{v[0].replace(',', '')}-d{v[1]}{v[2]}"
)
@pytest.mark.parametrize("dtype", ["float", "int64", "bool"])
@pytest.mark.parametrize("opset", [18, 22])
def test_aten_diagonal_becomes_a_strided_slice(apply_eyelike_rules, opset, dtype, layout, k):
    shape, dim1, dim2 = layout
    text = aten_diagonal_text(dtype, shape, dim1, dim2, k, opset)
    before, after, rules = apply_eyelike_rules(text, rules=RULES, relaxed=True)
    fired = "diagonal_float" if dtype == "float" else "diagonal_int"
    assert rules.hits[fired] == 1 and sum(rules.hits.values()) == 1
    assert count_ops(after, "EyeLike") == count_ops(after, "ReduceSum") == 0
    assert count_ops(after, "Pad") == 1
    adjacent = abs(dim1 - dim2) == 1
    assert count_ops(after, "Transpose") == (0 if adjacent and shape != "r,c,b" else 1)
    for rows, cols in SIZES:
        feeds = _feeds(dtype, shape, rows, cols)
        expected = np.diagonal(feeds["x"], k, dim1, dim2)
        _assert_same_everywhere(before, after, feeds, expected)


def test_empty_batch_and_static_shapes(apply_eyelike_rules):
    text = aten_diagonal_text("int64", "b,r,c", 1, 2, 1, 22)
    before, after, rules = apply_eyelike_rules(text, rules=["diagonal_int"])
    assert rules.hits["diagonal_int"] == 1
    _assert_same_everywhere(before, after, _feeds("int64", "b,r,c", 3, 4, batch=0))
    static = aten_diagonal_text("float", "2,4,6", 1, 2, -1, 18).replace(
        "(y)", "(float[2,3] y)"
    )
    before, after, report = _optimize(static, relaxed=True)
    assert report.extra["rules"]["diagonal_float"] == 1  # before the mask is folded
    assert count_ops(after, "EyeLike") == 0 and count_ops(after, "ReduceSum") == 0
    check_model_safely(after)
    x = {"x": np.arange(48, dtype=np.float32).reshape(2, 4, 6)}
    _assert_same_everywhere(before, after, x, np.diagonal(x["x"], -1, 1, 2))


def _optimize(text: str, **options):
    before = ir.to_proto(ir.from_onnx_text(text))
    model = ir.from_onnx_text(text)
    return before, model, eyefold.optimize_with_report(model, **options).report


def test_exact_rule_runs_by_default_and_the_relaxed_one_only_when_asked():
    text = aten_diagonal_text("int64", "b,r,c", 1, 2, 0, 22).replace("(y)", "(int64[b,?] y)")
    _, after_int, report = _optimize(text)
    assert report.extra["rules"]["diagonal_int"] == 1
    assert count_ops(after_int, "ReduceSum") == 0
    check_model_safely(after_int)
    _, after_float, report = _optimize(aten_diagonal_text("float", "b,r,c", 1, 2, 0, 22))
    assert "diagonal_float" not in report.extra["rules"]
    assert count_ops(after_float, "ReduceSum") == 1


def test_float_rewrite_is_relaxed_on_ieee_specials(apply_eyelike_rules):
    before, after, _ = apply_eyelike_rules(
        aten_diagonal_text("float", "r,c", 0, 1, 0, 22), rules=["diagonal_float"], relaxed=True
    )
    x = np.array([[1.0, np.inf], [2.0, 3.0]], np.float32)
    (original,) = run_reference(before, {"x": x})
    (rewritten,) = run_reference(after, {"x": x})
    assert np.isnan(original[1]) and rewritten.tolist() == [1.0, 3.0]  # inf * 0 = NaN


@pytest.mark.parametrize("k", [-4, -1, 0, 1, 3])
def test_torchscript_diagonal_at_opset_12(k):
    text = torchscript_diagonal_text(k).replace("(y)", "(float[b,?] y)")
    before, after, report = _optimize(text, relaxed=True)
    assert report.extra["rules"]["diagonal_float"] == 1
    assert count_ops(after, "EyeLike") == 0 and count_ops(after, "ReduceSum") == 0
    # dims 0, 1 are adjacent: read in place; only the diagonal is transposed.
    assert all(n.inputs[0].name != "x" for n in after.graph if n.op_type == "Transpose")
    check_model_safely(after)
    for rows, cols in [(3, 5), (5, 3), (4, 4), (1, 3)]:
        feeds = _feeds("float", "r,c,b", rows, cols)
        _assert_same_everywhere(before, after, feeds, np.diagonal(feeds["x"], k, 0, 1))


def _reason(text: str, rule, root: str = "ReduceSum") -> str:
    """Why ``rule`` does not fire at the first ``root`` node (its MatchResult.fail text)."""
    model = ir.from_onnx_text(text)
    node = next(n for n in model.graph if n.op_type == root)
    tracer = MatchingTracer()
    assert rule.try_rewrite(model, model.graph, node, tracer=tracer) is None
    return " ".join(m.match_result.reason for m in tracer.best_matches_map[rule])


def _variant(old: str, new: str, dtype: str = "float") -> str:
    text = aten_diagonal_text(dtype, "b,r,c", 1, 2, 1, 22)
    assert old in text
    return text.replace(old, new)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (
            _variant("value_ints=[1]>()\n        summed", "value_ints=[0]>()\n        summed"),
            "sums over axis 0, not one of the mask's dims",
        ),
        (
            _variant(
                "Concat<axis=0>(dim1_size, dim2_size)", "Concat<axis=0>(dim1_size, dim1_size)"
            ),
            "not provably the data's last two dims",
        ),
        (
            _variant(
                "prod = Mul(xt, masklike)",
                "prod = Mul(xt, masklike)\n        y2 = Mul(x, mask)",
            ),
            "the mask is used twice",
        ),
        (_variant("keepdims=0", "keepdims=1"), "keepdims=1"),
        (_variant("mask = EyeLike<k=1>(zeros)", "mask = Identity(zeros)"), "no EyeLike mask"),
        (_variant('"" : 22', '"" : 13'), "opset 13 is below 14"),
        (aten_diagonal_text("int64", "b,r,c", 1, 2, 1, 22), "INT64 is not one this rule"),
    ],
    ids=[
        "another-axis",
        "another-mask",
        "mask-twice",
        "keepdims",
        "no-eyelike",
        "opset",
        "int-for-float-rule",
    ],
)
def test_other_patterns_stay_with_the_reason(apply_eyelike_rules, text, why):
    assert why in _reason(text, diagonal_float.rule)
    _, after, rules = apply_eyelike_rules(text, rules=["diagonal_float"], relaxed=True)
    assert rules.hits["diagonal_float"] == 0
    assert count_ops(after, "ReduceSum") == 1


def test_tf2onnx_band_part_has_no_sum_to_rewrite(apply_eyelike_rules):
    # MatrixBandPart.version_11, num_lower == num_upper == 0, rank 2: EyeLike(data) as mask.
    text = """<ir_version: 8, opset_import: ["" : 13]>
    agraph (int64[r, c] data) => (y) {
        shape = Shape(data)
        eye = EyeLike(data)
        mask = Cast<to=7>(eye)
        y = Mul(mask, data)
    }"""
    before, after, rules = apply_eyelike_rules(text, rules=RULES, relaxed=True)
    assert sum(rules.hits.values()) == 0
    assert [n.op_type for n in after.graph] == [n.op_type for n in before.graph.node]
    summed = text.replace('"" : 13', '"" : 14').replace(
        "y = Mul(mask, data)",
        "p = Mul(mask, data)\n axes = Constant<value_ints=[0]>()\n"
        " y = ReduceSum<keepdims=0>(p, axes)",
    )
    before, after, rules = apply_eyelike_rules(summed, rules=["diagonal_int"])
    assert rules.hits["diagonal_int"] == 1  # the same mask, summed: its diagonal
    feeds = {"data": np.arange(12, dtype=np.int64).reshape(3, 4)}
    _assert_same_everywhere(before, after, feeds, np.pad(np.diagonal(feeds["data"]), (0, 1)))


def test_registry_declares_both_rules():
    assert (diagonal_int.spec.exactness, diagonal_float.spec.exactness) == ("exact", "relaxed")
    assert diagonal_int.spec.phase == diagonal_float.spec.phase == "before-fold"
    assert ApplyEyeLikeRulesPass(rules=RULES, relaxed=True).specs == (
        diagonal_int.spec,
        diagonal_float.spec,
    )
