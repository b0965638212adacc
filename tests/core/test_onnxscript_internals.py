"""onnxscript's private API, as eyefold reaches it, still holds on the release installed.

``eyefold.core.onnxscript_internals`` is the one module that uses it, and pyproject caps
onnxscript to the minor release these tests pass on: a new release is allowed once they
pass on it.
"""

from __future__ import annotations

import gc
import importlib.metadata
import pathlib
import weakref

import onnx_ir as ir
from packaging.requirements import Requirement

from eyefold.core.onnxscript_internals import (
    forget_last_match,
    pattern_op_types,
    version_converter,
)
from eyefold.rules import cast_to_dtype, drop_input_producer
from eyefold.upgrade.onnxscript_conversion import NATIVE_MIN_OPSET

PYPROJECT = pathlib.Path(__file__).resolve().parents[2] / "pyproject.toml"


def _rewrite_once() -> weakref.ref:
    """Rewrites cast_to_dtype's firing model and drops it; a reference to its graph."""
    model = ir.from_onnx_text(cast_to_dtype.spec.firing_model)
    cast = next(node for node in model.graph if node.op_type == "Cast")
    assert cast_to_dtype.spec.rule.try_rewrite(model, model.graph, cast) is not None
    return weakref.ref(model.graph)


def test_a_rule_keeps_its_last_graph_until_forgotten() -> None:
    graph = _rewrite_once()
    gc.collect()
    assert graph() is not None, "the matcher no longer keeps its graph: see the module"
    forget_last_match(cast_to_dtype.spec.rule)
    gc.collect()
    assert graph() is None


def test_pattern_op_types_are_the_ops_the_pattern_names() -> None:
    # Cast(EyeLike(x)); drop_input_producer's producer matches any op, so it names none.
    assert pattern_op_types(cast_to_dtype.spec.rule) == {"EyeLike", "Cast"}
    assert pattern_op_types(drop_input_producer.spec.rule) == {"EyeLike"}


def test_version_converter_has_what_the_upgrade_uses() -> None:
    converter = version_converter()
    assert converter.SUPPORTED_MIN_ONNX_OPSET == NATIVE_MIN_OPSET
    assert converter.SUPPORTED_MAX_ONNX_OPSET >= 22
    assert converter.registry.lookup_adapters("", "GroupNormalization", 20, True) is not None
    assert callable(converter.convert_version)


def test_the_installed_onnxscript_is_within_the_cap() -> None:
    import tomllib  # Python 3.11+, as the tests run

    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    onnxscript = next(Requirement(d) for d in dependencies if d.startswith("onnxscript"))
    assert any(spec.operator == "<" for spec in onnxscript.specifier), onnxscript
    assert importlib.metadata.version("onnxscript") in onnxscript.specifier
