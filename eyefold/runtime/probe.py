"""Measuring which EyeLike combinations the installed onnxruntime runs.

The answer is measured, not guessed: one tiny single-node session per combination
(symbolic input shape, graph optimizations off, one thread), which must load *and* return
the identity matrix bit for bit. The kernel registry onnxruntime exposes
(``get_all_opkernel_def``) is read too, but only to tell native combinations from those
onnxruntime runs by inserting casts of its own (float16 on CPU): it lists the CPU kernel's
types and misses what those casts add, so it cannot replace the probe.
"""

from __future__ import annotations

import ctypes
import logging
import time
from collections.abc import Iterable
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir

from eyefold import kernel
from eyefold.errors import EyefoldError
from eyefold.runtime.table import Combination, EyeLikeSupport, all_combinations

__all__ = ["probe_onnxruntime"]

# The messages keep the logger name of eyefold.runtime.support, which users configure.
logger = logging.getLogger("eyefold.runtime.support")

# The opset each EyeLike version (support_table.EYELIKE_VERSIONS) is probed at.
_PROBE_OPSETS = {9: 21, 22: 22}


def _probe_model(opset: int, input_type: ir.DataType, dtype: ir.DataType | None) -> bytes:
    output_type = input_type if dtype is None else dtype
    attributes = {} if dtype is None else {"dtype": int(dtype)}
    node = onnx.helper.make_node("EyeLike", ["x"], ["y"], k=1, **attributes)
    graph = onnx.helper.make_graph(
        [node],
        "eyefold_probe",
        [onnx.helper.make_tensor_value_info("x", int(input_type), ["rows", "cols"])],
        [onnx.helper.make_tensor_value_info("y", int(output_type), ["rows", "cols"])],
    )
    model = onnx.helper.make_model(
        graph, opset_imports=[onnx.helper.make_opsetid("", opset)], ir_version=10
    )
    return model.SerializeToString()


def _probe_one(ort: Any, options: Any, opset: int, combination: Combination) -> bool:
    input_type, dtype = combination
    output_type = input_type if dtype is None else dtype
    try:
        session = ort.InferenceSession(
            _probe_model(opset, input_type, dtype), options, providers=["CPUExecutionProvider"]
        )
        raw = np.zeros((2, 3), dtype=input_type.numpy())
        if input_type.itemsize == 2:  # float16/bfloat16/(u)int16: hand over raw bits
            raw = raw.view(np.uint16)
        feed = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(raw, int(input_type))
        (result,) = session.run_with_ort_values(["y"], {"x": feed})
        got = ctypes.string_at(result.data_ptr(), result.tensor_size_in_bytes())
    except Exception:  # onnxruntime raises many types; any means "cannot run"
        return False
    return got == kernel.eye(2, 3, k=1, dtype=output_type).tobytes()


def _registered_types(version: int) -> tuple[set[str], set[str]] | None:
    """(T1, T2) type names of the CPU EyeLike kernel registered for ``version``."""
    try:
        from onnxruntime.capi import _pybind_state

        kernel_defs = _pybind_state.get_all_opkernel_def()
    except (ImportError, AttributeError, RuntimeError):
        return None
    for kernel_def in kernel_defs:
        low, high = kernel_def.version_range
        if (
            kernel_def.op_name == "EyeLike"
            and kernel_def.domain in ("", "ai.onnx")
            and kernel_def.provider == "CPUExecutionProvider"
            and low <= version <= high
        ):
            constraints = kernel_def.type_constraints
            return _type_names(constraints["T1"]), _type_names(constraints["T2"])
    return None


def _type_names(type_strings: Iterable[str]) -> set[str]:
    """``tensor(float)`` -> ``float``."""
    return {t.removeprefix("tensor(").removesuffix(")") for t in type_strings}


def _native_subset(
    supported: frozenset[Combination], registered: tuple[set[str], set[str]] | None
) -> frozenset[Combination]:
    if registered is None:
        return supported
    inputs, outputs = registered

    def onnx_name(data_type: ir.DataType) -> str:
        return data_type.name.lower()

    return frozenset(
        (i, o)
        for i, o in supported
        if onnx_name(i) in inputs and onnx_name(i if o is None else o) in outputs
    )


def probe_onnxruntime() -> EyeLikeSupport:
    """Measures the installed onnxruntime (no cache involved).

    Raises:
        EyefoldError: onnxruntime is not installed.
    """
    try:
        import onnxruntime as ort
    except (ImportError, OSError):  # not installed, or its shared library cannot load
        raise EyefoldError("onnxruntime is not installed; cannot probe it") from None
    start = time.perf_counter()
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4  # refusals are the expected outcome, not news
    options.intra_op_num_threads = 1  # a thread pool per session is most of the load time
    options.inter_op_num_threads = 1
    supported: dict[int, frozenset[Combination]] = {}
    native: dict[int, frozenset[Combination]] = {}
    for version, opset in _PROBE_OPSETS.items():
        supported[version] = frozenset(
            c for c in all_combinations(version) if _probe_one(ort, options, opset, c)
        )
        native[version] = _native_subset(supported[version], _registered_types(version))
    logger.info(
        "probed onnxruntime %s EyeLike support in %.2f s: %d of %d combinations run",
        ort.__version__,
        time.perf_counter() - start,
        len(supported[22]),
        len(all_combinations(22)),
    )
    return EyeLikeSupport("onnxruntime", ort.__version__, "probe", supported, native)
