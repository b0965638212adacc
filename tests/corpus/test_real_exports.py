"""Real exports from real libraries' source (sample_models/real/), against torch's outputs.

Each model was exported by ``sample_models/real/export_real.py`` from the source its
manifest cites; ``<name>.inputs.npz`` holds the feeds and ``<name>.torch.npz`` torch's
outputs for them. The tests optimize each the way a user would and run the result on
onnxruntime and OpenVINO against torch: one test per "done when" line of the issue that
brought these models in, and the controls that already worked.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest

import eyefold
from eyefold.cli import main

REAL = Path(__file__).resolve().parents[2] / "sample_models" / "real"
# float32 exports: a few ulps of the largest output; fp16 conversions: fp16's rounding
# of every intermediate (onnxruntime's own fp16 converter output, before eyefold, is off
# by up to 1.5e-4 on CCNet and 3.6e-5 on MossFormer).
FLOAT32_TOLERANCE = 1e-5
FLOAT16_TOLERANCE = 2e-3


def _feeds(name: str) -> dict[str, np.ndarray]:
    return dict(np.load(REAL / f"{name}.inputs.npz"))


def _torch(name: str) -> dict[str, np.ndarray]:
    return dict(np.load(REAL / f"{name}.torch.npz"))


def _run_ort(model: onnx.ModelProto | Path, feeds: dict[str, np.ndarray]) -> dict:
    source = str(model) if isinstance(model, Path) else model.SerializeToString()
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4
    session = onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds), strict=True))


def _run_openvino(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict:
    openvino = pytest.importorskip("openvino")
    core = openvino.Core()
    compiled = core.compile_model(
        core.read_model(model.SerializeToString(), b""),
        "CPU",
        {"INFERENCE_PRECISION_HINT": "f32"},
    )
    results = compiled(feeds)
    graph_outputs = {o.name for o in model.graph.output}
    # A tensor has several names in OpenVINO (its producer's too): take the graph's.
    return {
        next(iter(graph_outputs & o.get_names())): results[o] for o in compiled.outputs
    }


def _assert_close(got: dict, want: dict, tolerance: float) -> None:
    assert sorted(got) == sorted(want)
    for name, expected in want.items():
        actual = np.asarray(got[name], dtype=np.float64)
        assert actual.shape == expected.shape, name
        assert np.max(np.abs(actual - expected)) <= tolerance, name


def _optimized(name: str, **options: object) -> tuple[onnx.ModelProto, eyefold.Report]:
    result = eyefold.optimize_with_report(onnx.load(REAL / f"{name}.onnx"), **options)
    return result.model, result.report


def _pins(name: str) -> list[str]:
    """``--input-shape`` pins of every graph input, from the committed feeds."""
    return [f"{k}:{','.join(map(str, v.shape))}" for k, v in _feeds(name).items()]


def _against_torch(name: str, model: onnx.ModelProto, tolerance: float) -> None:
    feeds = _feeds(name)
    _assert_close(_run_ort(model, feeds), _torch(name), tolerance)
    _assert_close(_run_openvino(model, feeds), _torch(name), tolerance)


def test_hippynns_reshape_chain_eyelike_folds_by_default() -> None:
    model, report = _optimized("hippynn_quad_dynamo")
    (node,) = report.nodes
    assert node.action == "folded" and node.shape == [3, 3]
    assert not any(n.op_type == "EyeLike" for n in model.graph.node)
    _against_torch("hippynn_quad_dynamo", model, FLOAT32_TOLERANCE)


def test_mossformers_eyelike_folds_once_every_input_is_pinned() -> None:
    name = "mossformer_op13"
    model, report = _optimized(name, input_shapes=_pins(name))
    (node,) = report.nodes
    assert node.action == "folded" and node.shape == [6, 6] and node.dtype == "BOOL"
    # Folded, the BOOL EyeLike onnxruntime cannot load is gone: it runs as it is.
    _against_torch(name, model, FLOAT32_TOLERANCE)


def test_mossformer_unpinned_stays_and_says_where_its_shape_was_lost() -> None:
    _, report = _optimized("mossformer_op13")
    (node,) = report.nodes
    assert node.action == "inferred"
    assert node.shape_lost == {
        "value": "x",
        "node": None,
        "op": None,
        "why": "dim 0 ('B'), dim 1 ('T'), dim 2 ('Q') are dynamic; --input-shape pins them",
    }
    assert "lost at graph input 'x'" in node.reason


@pytest.mark.slow
def test_mossformer_target_onnxruntime_check_exits_0_and_says_how(tmp_path, capsys) -> None:
    output = tmp_path / "mossformer.onnx"
    source = REAL / "mossformer_op13.onnx"
    args = ["optimize", str(source), str(output), "--target-runtime", "onnxruntime"]
    assert main([*args, "--check"]) == 0
    shown = capsys.readouterr().out
    check = next(line for line in shown.splitlines() if line.startswith("check:"))
    assert "under onnxruntime" in check
    assert "the original ran with its EyeLike node onnxruntime cannot run" in check
    assert "lowered into Range/Equal/Cast" in check
    assert "the result ran as written (onnxruntime loads it)" in check
    assert "onnx.reference: index can't contain negative values" in check
    assert output.exists()
    _assert_close(_run_ort(output, _feeds("mossformer_op13")), _torch("mossformer_op13"), 1e-5)
    # The summary tells the truth after legalization: the row says it runs now.
    row = next(line for line in shown.splitlines() if "/inner/EyeLike" in line)
    assert " no " not in row and "legalized as" in row and " yes " in row


def test_hippynn_check_with_real_inputs_exits_0(tmp_path, capsys) -> None:
    source = REAL / "hippynn_quad_dynamo.onnx"
    feeds = REAL / "hippynn_quad_dynamo.inputs.npz"
    output = tmp_path / "hippynn.onnx"
    args = ["optimize", str(source), str(output), "--check", "--check-inputs", str(feeds)]
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    check = next(line for line in lines if line.startswith("check:"))
    assert "both models ran as they are" in check and f"inputs from {feeds}" in check
    # Random int64 indices go out of range: one whole line that names the way out.
    assert main(["optimize", str(source), str(tmp_path / "random.onnx"), "--check"]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "invalid index" in error and "--check-inputs" in error
    assert not (tmp_path / "random.onnx").exists()


UNSORTED = [f"{base}_ortf16" for base in ("ccnet_mmcv_dynamo", "kornia_dilation_op13")]
UNSORTED.append("mossformer_op13_ortf16")


@pytest.mark.parametrize("name", UNSORTED)
def test_onnxruntimes_unsorted_fp16_output_is_sorted_and_runs(name: str) -> None:
    original = onnx.load(REAL / f"{name}.onnx")
    with pytest.raises(onnx.checker.ValidationError, match="topologically sorted"):
        onnx.checker.check_model(original)
    model, report = _optimized(name, target_runtime="onnxruntime")
    assert report.extra["sorted"] == ["main"]
    onnx.checker.check_model(model, full_check=True)
    options = {"input_shapes": _pins(name)} if name.startswith("mossformer") else {}
    if options:  # unpinned it stays an EyeLike, legalized; pinned it folds
        pinned, _ = _optimized(name, target_runtime="onnxruntime", **options)
        _assert_close(_run_ort(pinned, _feeds(name)), _torch(name), FLOAT16_TOLERANCE)
    _assert_close(_run_ort(model, _feeds(name)), _torch(name), FLOAT16_TOLERANCE)


def test_unsorted_fp16_ccnet_cli_says_it_sorted(tmp_path, capsys) -> None:
    source = REAL / "ccnet_mmcv_dynamo_ortf16.onnx"
    output = tmp_path / "ccnet.onnx"
    assert main(["optimize", str(source), str(output), "--target-runtime", "onnxruntime"]) == 0
    assert "note: graph main was not in topological order" in capsys.readouterr().out
    name = "ccnet_mmcv_dynamo_ortf16"
    _assert_close(_run_ort(output, _feeds(name)), _torch(name), FLOAT16_TOLERANCE)


@pytest.mark.parametrize("name", ["diag_matmul_op13", "diag_matmul_op13_dyn"])
def test_torchscripts_float_diagonal_is_rewritten_with_relaxed(name: str) -> None:
    model, report = _optimized(name, relaxed=True)
    assert report.extra["rules"]["diagonal_float"] == 1
    assert report.nodes[0].action == "removed"
    ops = [n.op_type for n in model.graph.node]
    assert "EyeLike" not in ops and "ReduceSum" not in ops
    _against_torch(name, model, FLOAT32_TOLERANCE)


def test_shapes_inferred_for_a_rule_stay_out_of_the_saved_model() -> None:
    model, report = _optimized("diag_matmul_op13")  # folds; diagonal_float not selected
    assert report.nodes[0].action == "folded"
    assert "/MatMul_output_0" not in {v.name for v in model.graph.value_info}


def test_the_report_names_which_rule_declined_and_why(capsys) -> None:
    name = "diag_matmul_op13_dyn"
    _, report = _optimized(name, relaxed=True, upgrade=False)
    (declined,) = report.nodes[0].rules_declined
    assert declined == {
        "rule": "diagonal_float",
        "reason": "opset 13 is below 14 (Reshape allowzero)",
    }
    args = ["inspect", str(REAL / f"{name}.onnx"), "--relaxed", "--no-upgrade"]
    assert main(args) == 0
    assert "rule diagonal_float declined: opset 13 is below 14" in capsys.readouterr().out
    assert main([*args, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["nodes"][0]["rules_declined"] == [declined]


def _ort_load_error(path: Path) -> str | None:
    try:
        _run_ort(path, _feeds(path.stem))
    except Exception as error:  # onnxruntime's own types
        return str(error)
    return None


# The invalid exports: what eyefold's line quotes of onnx's checker, and what onnxruntime
# says of the same file. onnxconverter-common's fp16 MossFormer and kornia declare Cast
# outputs FLOAT16 that are FLOAT; jax2onnx writes BitwiseXor (opset 18) at opset 17.
INVALID = {
    "kornia_dilation_op13_occf16": (
        "Inferred elem type differs from existing elem type: (1) vs (10)",
        "Type Error",
    ),
    "mossformer_op13_occf16": (
        "Inferred elem type differs from existing elem type: (1) vs (10)",
        "Type Error",
    ),
    "optax_ntxent_jax17": (
        "No Op registered for BitwiseXor with domain_version of 17",
        "INVALID_GRAPH",
    ),
}


@pytest.mark.slow
def test_invalid_is_said_only_of_models_that_are(capsys) -> None:
    # onnxruntime's own fp16 output is unsorted, not invalid: it is sorted and taken. A
    # valid model onnxruntime cannot run is recorded in the manifest (original_fails).
    manifest = json.loads((REAL / "manifest.json").read_text())
    said_invalid = []
    for path in sorted(REAL.glob("*.onnx")):
        code = main(["inspect", str(path)])
        error = capsys.readouterr().err
        ort_error = _ort_load_error(path)
        if code == 1:
            checker, refusal = INVALID[path.stem]
            assert "is invalid at opset" in error, path.name
            assert checker in error, path.name
            assert ort_error is not None and refusal in ort_error, path.name
            said_invalid.append(path.stem)
        elif "onnxruntime" not in manifest[path.stem].get("original_fails", {}):
            assert ort_error is None or "NOT_IMPLEMENTED" in ort_error, (path.name, ort_error)
    assert said_invalid == sorted(INVALID)


_OPTIONS = [
    [],
    ["--target-runtime", "onnxruntime"],
    ["--target-runtime", "tensorrt"],
    ["--relaxed"],
    ["--check"],
    ["--target-runtime", "onnxruntime", "--check"],
]


@pytest.mark.slow
@pytest.mark.parametrize("options", _OPTIONS, ids=lambda o: "_".join(o) or "default")
def test_every_exit_1_message_is_one_whole_line(tmp_path, capsys, options) -> None:
    failed = []
    for path in sorted(REAL.glob("*.onnx")):
        output = tmp_path / path.name
        code = main(["optimize", str(path), str(output), "-q", *options])
        error = capsys.readouterr().err
        if code == 0:
            continue
        failed.append(path.stem)
        assert code == 1 and not output.exists(), path.name
        assert error.count("\n") == 1 and error.startswith("eyefold: error: "), error
        assert not error.rstrip().endswith(":"), error
    # The invalid exports always. With --check, the models random inputs cannot run:
    # hippynn's pair indices, and kornia's symmetric_transfer_error_ts11, whose H of
    # [B, M, M] gets a random M that its closed-form 3x3 inverse gathers past.
    invalid = set(INVALID)
    unrunnable = {"hippynn_quad_dynamo", "kornia_symmetric_transfer_error_ts11"}
    assert sorted(failed) == sorted(invalid | (unrunnable if "--check" in options else set()))


def test_controls_still_work() -> None:
    # kornia's dilation: torch.eye(h * w) of a fixed kernel folds.
    model, report = _optimized("kornia_dilation_op13")
    assert report.counts()["folded"] == 1
    _against_torch("kornia_dilation_op13", model, FLOAT32_TOLERANCE)
    # CCNet with CCNet#115's bool torch.eye: legalized for onnxruntime, lowered for
    # TensorRT (its H is dynamic, so it cannot fold), correct on both runtimes.
    name = "ccnet_mmcv_eye_op13"
    legalized, report = _optimized(name, target_runtime="onnxruntime")
    assert report.nodes[0].legalized and report.nodes[0].shape == ["H", "H"]
    _against_torch(name, legalized, FLOAT32_TOLERANCE)
    lowered, report = _optimized(name, target_runtime="tensorrt")
    assert report.nodes[0].lowered
    assert not any(n.op_type == "EyeLike" for n in lowered.graph.node)
    _against_torch(name, lowered, FLOAT32_TOLERANCE)
