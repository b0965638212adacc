"""Shared pytest fixtures for the eyefold tests."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType

import numpy as np
import onnx_ir as ir
import pytest

import eyefold
from eyefold.passes.apply_rules import ApplyEyeLikeRulesPass


def _assert_bit_identical(actual: np.ndarray, expected: np.ndarray) -> None:
    """Fails unless both arrays have the same dtype, shape and raw bytes."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    assert actual.tobytes() == expected.tobytes(), (
        f"bytes differ:\nactual={actual!r}\nexpected={expected!r}"
    )


@pytest.fixture(scope="session")
def assert_bit_identical() -> Callable[[np.ndarray, np.ndarray], None]:
    """Returns ``check(actual, expected)``: same dtype, same shape, same raw bytes.

    Session-scoped so hypothesis tests can use it too.
    """
    return _assert_bit_identical


def _with_ieee_specials(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Copies of ``feeds`` whose floating inputs start with NaN, inf, -inf and -0.0."""
    specials = np.array([np.nan, np.inf, -np.inf, -0.0], dtype=np.float32)
    planted = {}
    for name, array in feeds.items():
        array = np.array(array)
        if array.dtype.kind == "f" or array.dtype.name == "bfloat16":
            flat = array.reshape(-1)
            count = min(flat.size, specials.size)
            flat[:count] = specials[:count].astype(array.dtype)
        planted[name] = array
    return planted


@pytest.fixture(scope="session")
def with_ieee_specials() -> Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]:
    """Returns ``plant(feeds)``: floating inputs get NaN, inf, -inf and -0.0 first."""
    return _with_ieee_specials


def _apply_eyelike_rules(text: str, **options: object) -> tuple[object, object, object]:
    before = ir.to_proto(ir.from_onnx_text(text))
    model = ir.from_onnx_text(text)
    result = ApplyEyeLikeRulesPass(**options)(model)  # type: ignore[arg-type]
    return before, model, result


@pytest.fixture(scope="session")
def apply_eyelike_rules() -> Callable[..., tuple[object, object, object]]:
    """Returns ``apply(onnx_text, **pass_options) -> (original proto, rewritten ir.Model,
    the pass's RulesResult, with its hits)``."""
    return _apply_eyelike_rules


def _external_data_model(folder, location: str, **fields: int):
    """Writes ``folder/model.onnx``: ``y = Add(w, EyeLike(w))``, ``w: float[4,4]`` stored as
    external data at ``location`` (plus ``offset``/``length`` fields when given)."""
    from onnx import TensorProto, helper

    tensor = TensorProto(
        name="w", data_type=TensorProto.FLOAT, dims=[4, 4], data_location=TensorProto.EXTERNAL
    )
    for key, value in {"location": location, **fields}.items():
        entry = tensor.external_data.add()
        entry.key, entry.value = key, str(value)
    nodes = [
        helper.make_node("EyeLike", ["w"], ["e"], name="eye"),
        helper.make_node("Add", ["w", "e"], ["y"], name="add"),
    ]
    output = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])
    graph = helper.make_graph(nodes, "external", [], [output], [tensor])
    opsets = [helper.make_opsetid("", 22)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=10)
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return path


@pytest.fixture(scope="session")
def external_data_model() -> Callable[..., object]:
    """Returns ``write(folder, location, **fields) -> path`` of a model whose initializer
    ``w`` (16 floats, 64 bytes) lives in the external data file ``location``."""
    return _external_data_model


def _optimize_onnx_text(text: str, **options: object) -> tuple[object, object, object]:
    before = ir.to_proto(ir.from_onnx_text(text))
    model = ir.from_onnx_text(text)
    result = eyefold.optimize_with_report(model, **options)  # type: ignore[arg-type]
    return before, model, result.report


@pytest.fixture(scope="session")
def optimize_onnx_text() -> Callable[..., tuple[object, object, object]]:
    """Returns ``run(onnx_text, **optimize_options) -> (original proto, optimized
    ir.Model, report)``."""
    return _optimize_onnx_text


@pytest.fixture(scope="session")
def hostile_files() -> ModuleType:
    """``tests/model_files/test_hostile_files.py``: its ``CASES`` and the helpers that lay
    them out."""
    return importlib.import_module("tests.model_files.test_hostile_files")


@pytest.fixture(scope="session")
def fuzz_graphs() -> ModuleType:
    """``tests/corpus/test_fuzz_graphs.py``: its ``models()`` strategy and targeted
    models."""
    return importlib.import_module("tests.corpus.test_fuzz_graphs")


@pytest.fixture(scope="session")
def upgrade_models() -> ModuleType:
    """``tests/helpers/upgrade_models.py``: ``corpus_model()`` and the other models of the
    opset upgrade tests, written in each source opset's own form."""
    return importlib.import_module("tests.helpers.upgrade_models")
