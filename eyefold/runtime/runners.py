"""Running a model on a real runtime and fetching its outputs bit for bit.

The tests and ``benchmarks/runtime_reach.py`` check what eyefold writes on the runtimes
people deploy to, never on imitations. Each runner takes a model file and numpy inputs and
returns numpy outputs of the model's own element types (bfloat16 as ``ml_dtypes``), or
raises :class:`RunError` naming the stage that failed (load, compile, run, fetch).

Where a runtime's API cannot feed or fetch bfloat16 (tract's Python bindings),
:data:`FEEDS_BFLOAT16` says so and :func:`wrap_bfloat16` puts a Cast from or to float
around the model, as a user of that API would; the Casts must then run there too.

Every runtime is imported on first use only, with one thread where it has a setting.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
from collections.abc import Callable, Mapping
from typing import Any

import ml_dtypes
import numpy as np
import onnx
from onnx import helper

__all__ = [
    "FEEDS_BFLOAT16",
    "IMPORT_NAMES",
    "RUNNERS",
    "RunError",
    "missing_reason",
    "runner_for",
    "wrap_bfloat16",
]

# The module each runner imports ("reference" is onnx's own evaluator).
IMPORT_NAMES = {
    "reference": "onnx.reference",
    "onnxruntime": "onnxruntime",
    "openvino": "openvino",
    "tract": "tract",
    "tvm": "tvm",
}
RUNNERS = tuple(IMPORT_NAMES)
# Whether the runtime's API takes and returns bfloat16 tensors.
FEEDS_BFLOAT16 = dict.fromkeys(RUNNERS, True) | {"tract": False}

Feeds = Mapping[str, np.ndarray]
Runner = Callable[[str, Feeds], list[np.ndarray]]


class RunError(Exception):
    """A runtime refused or failed a model; the message starts with the stage."""

    def __init__(self, stage: str, error: BaseException) -> None:
        super().__init__(f"{stage}: {type(error).__name__}: {_first_line(error)}")
        self.stage = stage


def _first_line(error: BaseException) -> str:
    """The line of a runtime's message that names the error (TVM puts a traceback first)."""
    text = str(error).split("Stack backtrace:")[0]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    if lines[0].startswith("Traceback"):
        return lines[-1]
    if "Caused by:" in lines:  # tract: context, then the chain of causes
        return f"{lines[0]} (caused by: {lines[-1].split(':', 1)[-1].strip()})"
    return lines[0]


def missing_reason(runtime: str) -> str | None:
    """Why ``runtime`` cannot run here (not installed), None when it can be imported."""
    name = IMPORT_NAMES[runtime]
    try:
        found = importlib.util.find_spec(name) is not None
    except ImportError:  # a parent package missing
        found = False
    return None if found else f"{runtime} is not installed (no module {name!r})"


def _bits(array: np.ndarray) -> np.ndarray:
    """2-byte types as raw uint16 bits (how runtime APIs take float16/bfloat16)."""
    return array.view(np.uint16) if array.dtype == ml_dtypes.bfloat16 else array


def _run_reference(path: str, feeds: Feeds) -> list[np.ndarray]:
    from onnx.reference import ReferenceEvaluator

    try:
        session = ReferenceEvaluator(path)
    except Exception as error:
        raise RunError("load", error) from error
    try:
        return list(session.run(None, dict(feeds)))
    except Exception as error:
        raise RunError("run", error) from error


def _run_onnxruntime(path: str, feeds: Feeds) -> list[np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    except Exception as error:
        raise RunError("load", error) from error
    try:
        binding = session.io_binding()
        for name, array in feeds.items():
            element = helper.np_dtype_to_tensor_dtype(array.dtype)
            value = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(_bits(array), element)
            binding.bind_ortvalue_input(name, value)
        for output in session.get_outputs():
            binding.bind_output(output.name)
        session.run_with_iobinding(binding)
        return [_ort_array(value) for value in binding.get_outputs()]
    except Exception as error:
        raise RunError("run", error) from error


def _ort_array(value: Any) -> np.ndarray:
    if value.data_type() != "tensor(bfloat16)":
        return value.numpy()
    raw = ctypes.string_at(value.data_ptr(), value.tensor_size_in_bytes())
    return np.frombuffer(raw, np.uint16).view(ml_dtypes.bfloat16).reshape(value.shape())


def _run_openvino(path: str, feeds: Feeds) -> list[np.ndarray]:
    import openvino as ov

    core = ov.Core()
    core.set_property("CPU", {"INFERENCE_NUM_THREADS": 1})
    stage = "load"
    try:
        model = core.read_model(path)
        stage = "compile"
        compiled = core.compile_model(model, "CPU")
        stage = "run"
        request = compiled.create_infer_request()
        for index, array in enumerate(feeds.values()):
            if array.dtype == ml_dtypes.bfloat16:
                tensor = ov.Tensor(ov.Type.bf16, list(array.shape))
                tensor.data.view(np.uint16)[...] = _bits(array)
            else:
                # Not np.ascontiguousarray: it makes a 0-d input [1], which OpenVINO refuses.
                tensor = ov.Tensor(np.require(array, requirements="C"))
            request.set_input_tensor(index, tensor)
        request.infer()
        outputs = []
        for index in range(len(compiled.outputs)):
            tensor = request.get_output_tensor(index)
            data = np.array(tensor.data)
            if tensor.element_type == ov.Type.bf16:
                data = data.view(np.uint16).view(ml_dtypes.bfloat16)
            outputs.append(data)
        return outputs
    except Exception as error:
        raise RunError(stage, error) from error


def _run_tract(path: str, feeds: Feeds) -> list[np.ndarray]:
    import tract

    stage = "load"
    try:
        model = tract.onnx().load(path)
        stage = "compile"
        runnable = model.into_model().into_runnable()
        stage = "run"
        results = runnable.run(list(feeds.values()))
        stage = "fetch"
        return [results[i].to_numpy() for i in range(len(results))]
    except Exception as error:
        raise RunError(stage, error) from error


def _run_tvm(path: str, feeds: Feeds) -> list[np.ndarray]:
    os.environ.setdefault("TVM_NUM_THREADS", "1")
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    stage = "convert"
    try:
        module = from_onnx(onnx.load(path))
        stage = "compile"
        executable = tvm.compile(module, target="llvm")
        stage = "run"
        machine = relax.VirtualMachine(executable, tvm.cpu())
        result = machine["main"](*(tvm.runtime.tensor(a) for a in feeds.values()))
        stage = "fetch"
        if type(result).__name__ in ("Array", "Tuple") or isinstance(result, list | tuple):
            return [item.numpy() for item in result]
        return [result.numpy()]
    except Exception as error:
        raise RunError(stage, error) from error


_RUNNERS: dict[str, Runner] = {
    "reference": _run_reference,
    "onnxruntime": _run_onnxruntime,
    "openvino": _run_openvino,
    "tract": _run_tract,
    "tvm": _run_tvm,
}


def runner_for(runtime: str) -> Runner:
    """The function that runs a model file on ``runtime``: ``run(path, feeds) -> outputs``.

    Raises:
        KeyError: a runtime without a runner.
    """
    return _RUNNERS[runtime]


def wrap_bfloat16(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy whose bfloat16 graph inputs and outputs are float, with Casts inside.

    For runtimes whose API has no bfloat16 tensor: 0 and 1 cast exactly, so comparing the
    float output with the expected matrix is the same bit-exactness test.
    """
    wrapped = onnx.ModelProto()
    wrapped.CopyFrom(model)
    graph = wrapped.graph
    head, tail = [], []
    for value in graph.input:
        if value.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16:
            inner, value.name = value.name, value.name + "__float"
            value.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
            head.append(helper.make_node("Cast", [value.name], [inner], to=16))
    for value in graph.output:
        if value.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16:
            inner, value.name = value.name, value.name + "__float"
            value.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
            tail.append(helper.make_node("Cast", [inner], [value.name], to=1))
    nodes = [*head, *graph.node, *tail]
    del graph.node[:]
    graph.node.extend(nodes)
    return wrapped
