"""The jax2onnx exports of sample_models/real/ (``export_corpus_jax.py``): their own cases.

The generic corpus test covers their EyeLike nodes (all static: jax2onnx writes
``jnp.eye(n)`` as an EyeLike only when ``n`` is a Python int at trace time). Here: the
opset-17 export jax2onnx makes invalid, what opset 23 means for eyefold, and the two places
where the dynamic-size export shows eyefold short (strict expected failures, so a fix is
noticed).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

import eyefold
from eyefold.runtime.runners import RunError, missing_reason, runner_for
from tests.helpers.cli import run_eyefold

REAL = Path(__file__).resolve().parents[2] / "sample_models" / "real"
MANIFEST = json.loads((REAL / "manifest.json").read_text())


def _feeds(name: str, model: Path) -> dict[str, np.ndarray]:
    """The committed inputs, in graph input order (OpenVINO and tract feed by position)."""
    arrays = dict(np.load(REAL / f"{name}.inputs.npz"))
    return {v.name: arrays[v.name] for v in onnx.load(model).graph.input}


def _assert_jax_outputs(name: str, model: Path, runtime: str) -> None:
    got = runner_for(runtime)(str(model), _feeds(name, model))
    want = dict(np.load(REAL / f"{name}.jax.npz"))
    names = [v.name for v in onnx.load(model).graph.output]
    assert sorted(names) == sorted(want)
    for output, actual in zip(names, got, strict=True):
        np.testing.assert_allclose(
            np.asarray(actual, np.float64),
            want[output].astype(np.float64),
            rtol=0,
            atol=MANIFEST[name]["tolerance"],
            err_msg=f"{runtime}: {output}",
        )


def _need(runtime: str) -> None:
    reason = missing_reason(runtime)
    if reason is not None:
        pytest.skip(reason)


def test_the_opset17_export_with_an_opset18_op_is_refused_in_one_line(tmp_path: Path) -> None:
    """optax's ntxent at opset 17: jax2onnx writes ``matches ^ 1`` as BitwiseXor (opset 18).
    onnx's checker and onnxruntime refuse the file; eyefold says so, names the op and writes
    nothing. (OpenVINO and tract run it anyway: the manifest records that.)"""
    name = "optax_ntxent_jax17"
    source = REAL / f"{name}.onnx"
    assert "eyelike" not in MANIFEST[name] and "BitwiseXor" in MANIFEST[name]["invalid"]
    with pytest.raises(onnx.checker.ValidationError, match="BitwiseXor"):
        onnx.checker.check_model(onnx.load(source))
    output = tmp_path / "out.onnx"
    done = run_eyefold("optimize", str(source), str(output))
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith("eyefold: error: the model is invalid at opset 17 at op BitwiseXor")
    assert not output.exists()


@pytest.mark.parametrize("runtime", ["openvino", "tract"])
def test_the_invalid_opset17_export_runs_where_the_manifest_says(runtime: str) -> None:
    _need(runtime)
    name = "optax_ntxent_jax17"
    _assert_jax_outputs(name, REAL / f"{name}.onnx", runtime)


def test_an_opset23_export_keeps_its_opset_and_folds() -> None:
    """The default target (22) never lowers an opset: opset 23 stays, and the report says
    why; the EyeLike (EyeLike-22 at opset 23) folds all the same."""
    model = onnx.load(REAL / "distrax_lu_affine_jax23.onnx")
    result = eyefold.optimize_with_report(model)
    assert [o.version for o in result.model.opset_import if o.domain == ""] == [23]
    assert result.report.opset_after == 23
    assert any("keeps opset 23" in note for note in result.report.to_dict()["notes"])
    assert [n.action for n in result.report.nodes] == ["folded"]


@pytest.mark.parametrize("runtime", ["onnxruntime", "openvino", "tract"])
def test_target_opset_23_raises_an_opset17_export_that_still_runs(
    tmp_path: Path, runtime: str
) -> None:
    _need(runtime)
    name = "distrax_lu_affine_jax17"
    output = tmp_path / "out.onnx"
    done = run_eyefold(
        "optimize", str(REAL / f"{name}.onnx"), str(output), "--target-opset", "23"
    )
    assert done.returncode == 0, done.stderr
    assert [o.version for o in onnx.load(output).opset_import if o.domain == ""] == [23]
    _assert_jax_outputs(name, output, runtime)


@pytest.mark.xfail(
    strict=True,
    reason="jax2onnx's identity of dynamic size, Equal(Add(Cast(Expand(Unsqueeze(Range))), 0),"
    " Cast(Expand(Unsqueeze(Range)))), is not recognized as an identity",
)
def test_jax2onnx_identity_of_dynamic_size_is_counted() -> None:
    """ntxent with a symbolic batch: ``jnp.eye(matches.shape[0])`` of the symbolic B has
    no EyeLike; jax2onnx writes jax's iota comparison (source: optax line 103)."""
    model = onnx.load(REAL / "optax_ntxent_dyn_jax23.onnx")
    report = eyefold.optimize_with_report(model).report
    assert report.to_dict().get("identities", {}).get("found") == 1


@pytest.mark.xfail(
    strict=True,
    reason="pinning keeps jax2onnx's wrong [B, B] for the Concat of [B, B] and [B, B] on"
    " axis -1: it becomes [6, 6], not [6, 12], and tract still refuses it",
)
def test_pinning_the_dynamic_export_lets_tract_run_it(tmp_path: Path) -> None:
    """The original declares the Concat of ntxent's line 110 [B, B]: onnxruntime and tract
    refuse it. Pinned (B = 6), inference knows [6, 12]: a declared [6, 6] contradicts it."""
    _need("tract")
    name = "optax_ntxent_dyn_jax23"
    assert set(MANIFEST[name]["original_fails"]) == {"onnxruntime", "tract"}
    output = tmp_path / "pinned.onnx"
    done = run_eyefold(
        "optimize",
        str(REAL / f"{name}.onnx"),
        str(output),
        "--input-shape",
        "embeddings:6,4",
        "--input-shape",
        "labels:6",
    )
    assert done.returncode == 0, done.stderr
    try:
        _assert_jax_outputs(name, output, "tract")
    except RunError as error:
        pytest.fail(str(error))
