"""``--check --target-runtime R`` runs the output on R, where it will be deployed.

Each runtime is the real one; a test for a runtime not installed skips and says so.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from eyefold.check.equivalence import check_equivalence
from eyefold.check.settings import CheckSettings
from eyefold.errors import CheckFailedError
from eyefold.runtime.runners import missing_reason
from tests.helpers.cli import run_eyefold as run

SAMPLES = Path(__file__).resolve().parents[2] / "sample_models"




def _check_run(tmp_path: Path, source: Path, *args: str) -> tuple[str, dict]:
    """``optimize --check``: the check line and the report's ``check``."""
    output, report = tmp_path / "o.onnx", tmp_path / "r.json"
    done = run("optimize", str(source), str(output), "--check", "--report", str(report), *args)
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("check: "))
    return line, json.loads(report.read_text())["check"]


def _needs(runtime: str) -> None:
    reason = missing_reason(runtime)
    if reason:
        pytest.skip(reason)


@pytest.mark.slow
def test_bool_mask_output_runs_on_onnxruntime(tmp_path: Path) -> None:
    """onnxruntime cannot load the original (BOOL EyeLike): only the output runs there."""
    _needs("onnxruntime")
    import onnxruntime

    source = SAMPLES / "bool_mask.onnx"
    with pytest.raises(Exception, match="EyeLike"):
        onnxruntime.InferenceSession(str(source), providers=["CPUExecutionProvider"])
    line, check = _check_run(tmp_path, source, "--target-runtime", "onnxruntime")
    assert check["original_backend"] == "onnx.reference"
    assert check["output_backend"] == "onnxruntime"
    assert check["backend_version"] == onnxruntime.__version__
    assert "the original ran on onnx.reference" in line
    assert f"the result on onnxruntime {onnxruntime.__version__} (the target runtime)" in line

    # Without a target, both models run on the reference evaluator, as before.
    _, check = _check_run(tmp_path, source)
    assert check["original_backend"] == check["output_backend"] == "onnx.reference"


@pytest.mark.slow
@pytest.mark.parametrize("runtime", ["openvino", "tract"])
def test_output_runs_on_the_target_runtime(tmp_path: Path, runtime: str) -> None:
    _needs(runtime)
    line, check = _check_run(
        tmp_path, SAMPLES / "dynamic_batch.onnx", "--target-runtime", runtime
    )
    assert (check["original_backend"], check["output_backend"]) == ("onnxruntime", runtime)
    assert f"the result on {runtime} " in line and "(the target runtime)" in line
    # The stated float32 tolerance for OpenVINO and tract (README), not onnxruntime's.
    assert check["tolerances"] == {"FLOAT": {"rtol": 1e-4, "atol": 1e-5}}


@pytest.mark.parametrize("runtime", ["openvino", "tract"])
def test_a_scalar_input_reaches_the_target_runtime_as_a_scalar(
    tmp_path: Path, runtime: str
) -> None:
    """tfp's ``newton_qr`` (jax2onnx) takes two 0-d inputs: fed as shape ``[1]``, OpenVINO
    refused the original and the output alike, and the check said it could not run them."""
    _needs(runtime)
    source = SAMPLES / "real" / "tfp_newton_qr_jax17.onnx"
    inputs = SAMPLES / "real" / "tfp_newton_qr_jax17.inputs.npz"
    assert [np.load(inputs)[name].shape for name in ("coefficient", "step")] == [(), ()]
    line, check = _check_run(
        tmp_path, source, "--target-runtime", runtime, "--check-inputs", str(inputs)
    )
    assert (check["original_backend"], check["output_backend"]) == ("onnxruntime", runtime)
    assert f"the result on {runtime} " in line and "cannot run" not in line


@pytest.mark.slow
def test_a_target_that_is_not_installed_is_named(tmp_path: Path) -> None:
    if missing_reason("tvm") is None:
        pytest.skip("tvm is installed here")
    line, check = _check_run(
        tmp_path, SAMPLES / "dynamic_batch.onnx", "--target-runtime", "tvm"
    )
    assert check["output_backend"] == "onnxruntime"
    assert "tvm is not installed" in check["target_note"]
    assert "not on the target runtime: tvm is not installed" in line


def _doubling(as_function: bool) -> onnx.ModelProto:
    """y = x + x; as a call of a model-local function when ``as_function``.

    onnxruntime inlines local functions; tract cannot translate the call.
    """
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    opset = [helper.make_opsetid("", 17)]
    if not as_function:
        graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "g", [x], [y])
        return helper.make_model(graph, opset_imports=opset, ir_version=8)
    body = helper.make_node("Add", ["a", "a"], ["b"])
    function = helper.make_function("local", "twice", ["a"], ["b"], [body], opset)
    call = helper.make_node("twice", ["x"], ["y"], domain="local")
    graph = helper.make_graph([call], "g", [x], [y])
    return helper.make_model(
        graph,
        opset_imports=[*opset, helper.make_opsetid("local", 1)],
        functions=[function],
        ir_version=8,
    )


def test_an_output_the_target_refuses_fails_where_the_original_runs() -> None:
    """The check runs the output on the target: a form only onnxruntime takes fails."""
    _needs("tract")
    _needs("onnxruntime")
    original, optimized = _doubling(False), _doubling(True)
    # Without a target both run on onnxruntime, which takes the function.
    assert check_equivalence(original, optimized).output_backend == "onnxruntime"
    with pytest.raises(CheckFailedError, match="tract runs the original model but not"):
        check_equivalence(original, optimized, settings=CheckSettings(target_runtime="tract"))


@pytest.mark.slow
def test_an_output_the_target_refuses_like_the_original_falls_back_and_says_so() -> None:
    """The target refusing both models is not the optimization's doing: said, not failed."""
    _needs("tract")
    _needs("onnxruntime")
    model = _doubling(True)
    result = check_equivalence(model, model, settings=CheckSettings(target_runtime="tract"))
    assert result.output_backend == "onnxruntime"
    assert result.target_note is not None
    assert result.target_note.startswith("tract cannot run the output (")
    assert result.target_note.endswith("nor the original")


@pytest.mark.slow
def test_a_runtime_whose_own_floats_differ_is_compared_with_itself(tmp_path: Path) -> None:
    """kornia with float16 inside: OpenVINO's floats are not onnxruntime's, for either model.

    The result is then compared with the original on OpenVINO, where eyefold's change is
    what differs, not the runtime.
    """
    _needs("openvino")
    _needs("onnxruntime")
    from eyefold.runtime.runners import runner_for

    source = SAMPLES / "real" / "kornia_dilation_op13_ortf16.onnx"
    feeds = dict(np.load(source.with_suffix(".inputs.npz")))
    on_ort = runner_for("onnxruntime")(str(source), feeds)[0]
    on_openvino = runner_for("openvino")(str(source), feeds)[0]
    assert not np.allclose(on_openvino, on_ort, rtol=1e-4, atol=1e-5)  # the premise
    _, check = _check_run(
        tmp_path, source, "--target-runtime", "openvino", "--check-inputs",
        str(source.with_suffix(".inputs.npz")),
    )  # fmt: skip
    assert check["original_backend"] == check["output_backend"] == "openvino"
    assert "so the original ran on openvino too" in check["backend_reason"]
    assert check["tolerances"] == {"FLOAT": {"rtol": 1e-5, "atol": 1e-6}}


@pytest.mark.slow
def test_a_runtime_that_aborts_is_one_error_line(tmp_path: Path) -> None:
    """tract aborts the process on a GatherND index out of range (random indices)."""
    _needs("tract")
    output = tmp_path / "o.onnx"
    source = SAMPLES / "real" / "hippynn_quad_dynamo.onnx"
    done = run("optimize", str(source), str(output), "--check", "--target-runtime", "tract")
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("eyefold: error: ")
    assert "--check-inputs" in done.stderr and not output.exists()
