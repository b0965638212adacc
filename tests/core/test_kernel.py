"""Tests of the bundled EyeLike kernel (eyefold.kernel)."""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np
import onnx
import onnx_ir as ir
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from eyefold import kernel
from eyefold.errors import SizeLimitError, UnsupportedDtypeError
from eyefold.kernel import diagonal_length, eye, output_nbytes

# The numpy dtype each EyeLike-22 type must come out as, written out independently of
# ir.DataType.numpy() so a wrong mapping there is caught here.
NUMPY_DTYPES: dict[ir.DataType, np.dtype] = {
    ir.DataType.BOOL: np.dtype(np.bool_),
    ir.DataType.DOUBLE: np.dtype(np.float64),
    ir.DataType.FLOAT: np.dtype(np.float32),
    ir.DataType.FLOAT16: np.dtype(np.float16),
    ir.DataType.BFLOAT16: np.dtype(ml_dtypes.bfloat16),
    ir.DataType.INT8: np.dtype(np.int8),
    ir.DataType.INT16: np.dtype(np.int16),
    ir.DataType.INT32: np.dtype(np.int32),
    ir.DataType.INT64: np.dtype(np.int64),
    ir.DataType.UINT8: np.dtype(np.uint8),
    ir.DataType.UINT16: np.dtype(np.uint16),
    ir.DataType.UINT32: np.dtype(np.uint32),
    ir.DataType.UINT64: np.dtype(np.uint64),
}
EYELIKE_TYPES = list(NUMPY_DTYPES)

SHAPES = [(1, 1), (3, 5), (5, 3), (0, 4), (4, 0)]

# Diagonal offsets; "cols" and "-rows" are resolved against the shape under test.
K_SPECS = [0, 1, -1, "cols", "-rows", 2**62, -(2**62)]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _type_param(data_type: ir.DataType):
    return pytest.param(data_type, id=data_type.name)


TYPE_PARAMS = [_type_param(t) for t in EYELIKE_TYPES]
SHAPE_PARAMS = [pytest.param(s, id=f"{s[0]}x{s[1]}") for s in SHAPES]
K_PARAMS = [pytest.param(k, id=f"k={k}") for k in K_SPECS]


def _resolve_k(k_spec: int | str, rows: int, cols: int) -> int:
    if k_spec == "cols":
        return cols
    if k_spec == "-rows":
        return -rows
    assert isinstance(k_spec, int)
    return k_spec


def _zeros_with_ones_at(rows: int, cols: int, k: int, dtype: np.dtype) -> np.ndarray:
    """Independent oracle: ones at [i, i + k], built element by element."""
    expected = np.zeros((rows, cols), dtype=dtype)
    for i in range(rows):
        if 0 <= i + k < cols:
            expected[i, i + k] = 1
    return expected


# --- 1. bit for bit against onnx.reference ------------------------------------------------


def _eyelike_model(data_type: ir.DataType, dtype_attr: bool, k: int) -> onnx.ModelProto:
    """A one-node EyeLike-22 model with a symbolic ['r', 'c'] input."""
    input_type = TensorProto.FLOAT if dtype_attr else int(data_type)
    attributes: dict[str, int] = {"k": k}
    if dtype_attr:
        attributes["dtype"] = int(data_type)
    node = helper.make_node("EyeLike", ["x"], ["y"], **attributes)
    graph = helper.make_graph(
        [node],
        "eyelike",
        [helper.make_tensor_value_info("x", input_type, ["r", "c"])],
        [helper.make_tensor_value_info("y", int(data_type), ["r", "c"])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 22)], ir_version=10
    )
    onnx.checker.check_model(model, full_check=True)
    return model


@functools.cache
def _reference_session(data_type: ir.DataType, dtype_attr: bool, k: int) -> ReferenceEvaluator:
    return ReferenceEvaluator(_eyelike_model(data_type, dtype_attr, k))


def _reference_eye(
    rows: int, cols: int, k: int, data_type: ir.DataType, dtype_attr: bool
) -> np.ndarray:
    session = _reference_session(data_type, dtype_attr, k)
    input_dtype = np.float32 if dtype_attr else NUMPY_DTYPES[data_type]
    (output,) = session.run(None, {"x": np.zeros((rows, cols), dtype=input_dtype)})
    return output


@pytest.mark.parametrize("shape", SHAPE_PARAMS)
@pytest.mark.parametrize("k_spec", K_PARAMS)
@pytest.mark.parametrize(
    "dtype_attr", [pytest.param(False, id="no_dtype"), pytest.param(True, id="dtype_attr")]
)
@pytest.mark.parametrize("data_type", TYPE_PARAMS)
def test_matches_onnx_reference_bit_for_bit(
    data_type, dtype_attr, k_spec, shape, assert_bit_identical
):
    rows, cols = shape
    k = _resolve_k(k_spec, rows, cols)
    expected = _reference_eye(rows, cols, k, data_type, dtype_attr)
    assert expected.dtype == NUMPY_DTYPES[data_type]
    assert_bit_identical(eye(rows, cols, k, dtype=data_type), expected)


# --- 2. property test against np.eye --------------------------------------------------------


def _expected_eye(rows: int, cols: int, k: int, dtype: np.dtype) -> np.ndarray:
    if abs(k) > rows + cols:
        # np.eye is not trusted with offsets near the int64 limits; nothing is on the matrix.
        return np.zeros((rows, cols), dtype=dtype)
    return np.eye(rows, cols, k).astype(dtype)


@settings(derandomize=True, max_examples=200, deadline=None, database=None)
@given(
    rows=st.integers(0, 40),
    cols=st.integers(0, 40),
    k=st.one_of(st.integers(-50, 50), st.integers(INT64_MIN, INT64_MAX)),
    data_type=st.sampled_from(EYELIKE_TYPES),
)
def test_matches_numpy_eye(rows, cols, k, data_type, assert_bit_identical):
    dtype = NUMPY_DTYPES[data_type]
    actual = eye(rows, cols, k, dtype=data_type)
    assert_bit_identical(actual, _expected_eye(rows, cols, k, dtype))
    assert np.count_nonzero(actual) == diagonal_length(rows, cols, k)


@pytest.mark.parametrize("data_type", TYPE_PARAMS)
def test_small_shapes_exhaustively(data_type, assert_bit_identical):
    dtype = NUMPY_DTYPES[data_type]
    for rows in range(7):
        for cols in range(7):
            for k in range(-8, 9):
                actual = eye(rows, cols, k, dtype=data_type)
                assert_bit_identical(actual, _zeros_with_ones_at(rows, cols, k, dtype))
                assert np.count_nonzero(actual) == diagonal_length(rows, cols, k)


@pytest.mark.parametrize(
    ("rows", "cols", "k"),
    [
        pytest.param(3, 5, 2, id="3x5-k=2"),
        pytest.param(5, 3, -2, id="5x3-k=-2"),
        pytest.param(4, 4, 3, id="4x4-k=3"),
        pytest.param(4, 4, -4, id="4x4-k=-4"),
        pytest.param(1, 7, 6, id="1x7-k=6"),
        pytest.param(7, 1, -6, id="7x1-k=-6"),
        pytest.param(6, 6, INT64_MAX, id="6x6-k=int64_max"),
        pytest.param(6, 6, INT64_MIN, id="6x6-k=int64_min"),
    ],
)
def test_matches_elementwise_definition(rows, cols, k, assert_bit_identical):
    dtype = NUMPY_DTYPES[ir.DataType.INT32]
    assert_bit_identical(
        eye(rows, cols, k, dtype=ir.DataType.INT32), _zeros_with_ones_at(rows, cols, k, dtype)
    )


# --- 3. TensorProto codes and ir.DataType are interchangeable --------------------------------


@pytest.mark.parametrize("data_type", TYPE_PARAMS)
def test_tensorproto_code_and_data_type_agree(data_type, assert_bit_identical):
    code = getattr(TensorProto, data_type.name)
    assert type(code) is int
    assert code == data_type.value
    for rows, cols, k in [(3, 5, 1), (5, 3, -2), (0, 4, 0)]:
        assert_bit_identical(
            eye(rows, cols, k, dtype=code), eye(rows, cols, k, dtype=data_type)
        )
    assert output_nbytes(3, 5, code) == output_nbytes(3, 5, data_type)


def test_default_dtype_is_float(assert_bit_identical):
    assert_bit_identical(eye(2, 3), eye(2, 3, 0, dtype=ir.DataType.FLOAT))


# --- 4. invalid dtypes ----------------------------------------------------------------------

INVALID_DATA_TYPES = [
    ir.DataType.STRING,
    ir.DataType.COMPLEX64,
    ir.DataType.COMPLEX128,
    ir.DataType.FLOAT8E4M3FN,
    ir.DataType.FLOAT8E5M2,
    ir.DataType.INT4,
    ir.DataType.UINT4,
    ir.DataType.FLOAT4E2M1,
    ir.DataType.UNDEFINED,
]
INVALID_DTYPE_PARAMS = [
    *(pytest.param(t, t.name, id=t.name) for t in INVALID_DATA_TYPES),
    *(pytest.param(t.value, t.name, id=f"code_{t.value}") for t in INVALID_DATA_TYPES),
    pytest.param(999, "999", id="unknown_code_999"),
]


@pytest.mark.parametrize(("dtype", "name_in_message"), INVALID_DTYPE_PARAMS)
def test_invalid_dtype_raises(dtype, name_in_message):
    with pytest.raises(UnsupportedDtypeError, match=name_in_message):
        eye(2, 2, dtype=dtype)
    with pytest.raises(UnsupportedDtypeError, match=name_in_message):
        output_nbytes(2, 2, dtype)


# --- 5. size checks -------------------------------------------------------------------------


def test_oversized_output_refused_before_allocation(monkeypatch):
    def no_allocation(*args, **kwargs):
        raise AssertionError("eye allocated although the size check should have failed")

    monkeypatch.setattr(kernel.np, "zeros", no_allocation)
    with pytest.raises(SizeLimitError, match="over the limit"):
        eye(2**40, 2**40, dtype=ir.DataType.FLOAT, max_bytes=1 << 20)


def test_output_nbytes_is_exact():
    nbytes = output_nbytes(2**40, 2**40, ir.DataType.FLOAT)
    assert type(nbytes) is int
    assert nbytes == 2**82
    assert output_nbytes(2**63 - 1, 2**63 - 1, ir.DataType.DOUBLE) == (2**63 - 1) ** 2 * 8


@pytest.mark.parametrize("data_type", TYPE_PARAMS)
def test_output_nbytes_per_type(data_type):
    itemsize = NUMPY_DTYPES[data_type].itemsize
    assert output_nbytes(3, 5, data_type) == 15 * itemsize
    assert output_nbytes(0, 4, data_type) == 0
    assert eye(3, 5, dtype=data_type).nbytes == 15 * itemsize


@pytest.mark.parametrize("shape", SHAPE_PARAMS)
@pytest.mark.parametrize("data_type", TYPE_PARAMS)
def test_max_bytes_boundary(data_type, shape):
    rows, cols = shape
    nbytes = output_nbytes(rows, cols, data_type)
    assert eye(rows, cols, dtype=data_type, max_bytes=nbytes).shape == shape
    with pytest.raises(SizeLimitError):
        eye(rows, cols, dtype=data_type, max_bytes=nbytes - 1)


@pytest.mark.parametrize(
    ("rows", "cols"),
    [
        pytest.param(-1, 3, id="rows=-1"),
        pytest.param(3, -1, id="cols=-1"),
        pytest.param(-1, -1, id="both=-1"),
        pytest.param(INT64_MIN, 3, id="rows=int64_min"),
        pytest.param(2**63, 3, id="rows=2^63"),
        pytest.param(3, 2**63, id="cols=2^63"),
    ],
)
def test_dims_out_of_range_raise(rows, cols):
    with pytest.raises(SizeLimitError):
        eye(rows, cols, dtype=ir.DataType.FLOAT)
    with pytest.raises(SizeLimitError):
        eye(rows, cols, dtype=ir.DataType.FLOAT, max_bytes=1 << 20)
    with pytest.raises(SizeLimitError):
        output_nbytes(rows, cols, ir.DataType.FLOAT)


# --- 6. output array properties -------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPE_PARAMS)
@pytest.mark.parametrize("data_type", TYPE_PARAMS)
def test_output_array_properties(data_type, shape):
    rows, cols = shape
    out = eye(rows, cols, 1, dtype=data_type)
    assert out.dtype == NUMPY_DTYPES[data_type]
    assert out.shape == shape
    assert out.flags.c_contiguous
    assert out.flags.writeable
    out[...] = 1  # writing must not leak into later results
    assert np.count_nonzero(eye(rows, cols, 1, dtype=data_type)) == diagonal_length(
        rows, cols, 1
    )
