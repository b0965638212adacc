"""Every model of onnx's backend test corpus, optimized with default options, still gives the
outputs stored beside it.

The onnx wheel ships 149 models under ``onnx/backend/test/data``: ``pytorch-converted/`` and
``pytorch-operator/`` (opset 6..9), ``simple/`` (9..12), each a folder with ``model.onnx``
and ``test_data_set_N/{input,output}_K.pb``; and ``light/`` (model-zoo networks at opset 9
with ConstantOfShape weights), stored as ``light_NAME.onnx`` and ``light_NAME_output_0.pb``
whose input is the one onnx's runner generates. The result runs under onnxruntime when it
runs the original, else under onnx's reference evaluator, and is compared with the stored
outputs at onnx's runner tolerances (rtol 1e-3, atol 1e-7). When only the reference
evaluator runs the original, onnxruntime must also run the result right wherever it loads
it: the reference evaluator broadcasts a PRelu slope that numpy cannot onto whichever axis
fits, so only onnxruntime shows a slope aligned with the wrong axis.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import functools
import multiprocessing
import pathlib
import site
import traceback
from collections.abc import Iterator
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

import eyefold

# The whole corpus, about 2 minutes: run before a merge, not in the daily loop.
pytestmark = pytest.mark.slow

DATA = pathlib.Path(onnx.__file__).parent / "backend" / "test" / "data"
RTOL, ATOL = 1e-3, 1e-7  # onnx.backend.test.loader's defaults, also in every data.json


@dataclasses.dataclass(frozen=True)
class Case:
    """One corpus model: its file and (feeds, stored outputs) pairs, loaded lazily."""

    name: str
    model_path: pathlib.Path
    data_dirs: tuple[pathlib.Path, ...]


def _cases() -> list[Case]:
    cases = [
        Case(folder.name, folder / "model.onnx", tuple(sorted(folder.glob("test_data_set_*"))))
        for kind in ("pytorch-converted", "pytorch-operator", "simple")
        for folder in sorted((DATA / kind).iterdir())
    ]
    cases += [
        Case(path.stem, path, ()) for path in sorted((DATA / "light").glob("light_*.onnx"))
    ]
    return cases


def _load(path: pathlib.Path, type_proto: onnx.TypeProto) -> Any:
    """A stored tensor, sequence or optional, read as its declared type says."""
    data = path.read_bytes()
    if type_proto.HasField("sequence_type"):
        return numpy_helper.to_list(onnx.SequenceProto.FromString(data))
    if type_proto.HasField("optional_type"):
        return numpy_helper.to_optional(onnx.OptionalProto.FromString(data))
    return numpy_helper.to_array(onnx.TensorProto.FromString(data))


def _light_feeds(inputs: list[onnx.ValueInfoProto]) -> dict[str, np.ndarray]:
    """The input onnx's runner feeds light models: arange(n) / n in the declared shape."""
    feeds = {}
    for value in inputs:
        dims = value.type.tensor_type.shape.dim
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in dims)
        count = int(np.prod(shape))
        feeds[value.name] = (np.arange(count).reshape(shape) / count).astype(np.float32)
    return feeds


def _data_sets(case: Case, model: onnx.ModelProto) -> list[tuple[dict[str, Any], list[Any]]]:
    """(feeds, stored outputs) per test data set; inputs follow the non-initializer inputs."""
    initializers = {t.name for t in model.graph.initializer}
    inputs = [value for value in model.graph.input if value.name not in initializers]
    outputs = list(model.graph.output)
    if not case.data_dirs:
        stored = case.model_path.with_name(f"{case.model_path.stem}_output_0.pb")
        return [(_light_feeds(inputs), [_load(stored, outputs[0].type)])]
    sets = []
    for folder in case.data_dirs:
        count = len(list(folder.glob("input_*.pb")))
        feeds = {
            inputs[i].name: _load(folder / f"input_{i}.pb", inputs[i].type)
            for i in range(count)
        }
        expected = [
            _load(folder / f"output_{i}.pb", outputs[i].type)
            for i in range(len(list(folder.glob("output_*.pb"))))
        ]
        sets.append((feeds, expected))
    return sets


def _assert_close(actual: Any, expected: Any, where: str) -> None:
    """onnx's runner comparison: same shape and dtype, allclose (strings equal)."""
    if isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), where
        for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
            _assert_close(got, want, f"{where}[{index}]")
        return
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{where}: shape {actual.shape} != {expected.shape}"
    if expected.dtype == object:
        np.testing.assert_array_equal(actual, expected, err_msg=where)
        return
    assert actual.dtype == expected.dtype, f"{where}: dtype {actual.dtype} != {expected.dtype}"
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL, err_msg=where)


class _Runtime:
    """Runs one model under onnxruntime or onnx's reference evaluator."""

    def __init__(self, name: str, model: onnx.ModelProto) -> None:
        self.name = name
        if name == "onnxruntime":
            session = ort.InferenceSession(
                model.SerializeToString(), providers=["CPUExecutionProvider"]
            )
            self._run = lambda feeds: session.run(None, feeds)
        else:
            evaluator = ReferenceEvaluator(model)
            self._run = lambda feeds: evaluator.run(None, feeds)

    def run(self, feeds: dict[str, Any]) -> list[Any]:
        return list(self._run(feeds))


def _first_runtime(
    model: onnx.ModelProto, feeds: dict[str, Any]
) -> tuple[str | None, list[str]]:
    """The first runtime that loads and runs ``model`` (None), and why the others did not."""
    reasons = []
    for name in ("onnxruntime", "reference"):
        try:
            _Runtime(name, model).run(feeds)
        except Exception as error:  # each runtime raises its own types
            text = str(error).strip().splitlines()
            reasons.append(f"{name}: {text[0] if text else type(error).__name__}")
            continue
        return name, reasons
    return None, reasons


def _check(case: Case) -> str | None:
    """Optimizes ``case`` and compares; returns why it is skipped, None when it matched.

    Raises:
        AssertionError: the optimized model's outputs differ from the stored ones.
    """
    original = onnx.load(case.model_path)
    data_sets = _data_sets(case, original)
    runtime, reasons = _first_runtime(original, data_sets[0][0])
    if runtime is None:
        return f"neither runtime runs the original: {'; '.join(reasons)}"
    optimized = eyefold.optimize_with_report(original).model
    runs = [_Runtime(runtime, optimized)]
    if runtime == "reference":
        # onnxruntime may not load it (e.g. a training op): the reference result stands.
        with contextlib.suppress(Exception):
            runs.append(_Runtime("onnxruntime", optimized))
    for run in runs:
        for index, (feeds, expected) in enumerate(data_sets):
            actual = run.run(feeds)
            assert len(actual) == len(expected), f"{run.name}: output count"
            for position, (got, want) in enumerate(zip(actual, expected, strict=True)):
                _assert_close(got, want, f"{run.name} data set {index} output {position}")
    return None


def _check_in_worker(case: Case) -> tuple[str, str | None]:
    """``_check`` with its outcome as data: ("ok"|"skip"|"fail", reason or traceback)."""
    try:
        reason = _check(case)
    except Exception:  # the failure is reported by the test in the parent process
        return "fail", traceback.format_exc()
    return ("ok", None) if reason is None else ("skip", reason)


@pytest.fixture(scope="module")
def worker() -> Iterator[concurrent.futures.ProcessPoolExecutor]:
    """One spawned process runs the models.

    The light zoo models materialize up to 0.5 GB of weights at run time, and a process
    keeps its peak RSS across fork and exec: run here, they would inflate the peak every
    later test measures in a child process (tests/model_files/test_model_io.py).
    """
    context = multiprocessing.get_context("spawn")
    # The worker imports this module by the name pytest gave it, from the repository root.
    root = functools.partial(site.addsitedir, str(pathlib.Path(__file__).parents[2]))
    with concurrent.futures.ProcessPoolExecutor(
        1, mp_context=context, initializer=root
    ) as executor:
        yield executor


@pytest.mark.parametrize("case", _cases(), ids=lambda case: case.name)
def test_optimized_model_gives_the_stored_outputs(
    case: Case, worker: concurrent.futures.ProcessPoolExecutor
) -> None:
    outcome, detail = worker.submit(_check_in_worker, case).result()
    if outcome == "skip":
        pytest.skip(detail)
    assert outcome == "ok", detail
