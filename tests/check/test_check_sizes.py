"""``--check`` sizes and options: two sizes per symbolic dim, ``--check-shape``,
``--check-rtol``/``--check-atol`` and ``--check-save``, on the real command line.

Saved files are loaded back and compared with an independent run of onnxruntime or onnx's
reference evaluator on the saved inputs.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from eyefold.check.equivalence import check_equivalence
from eyefold.check.settings import CheckSettings
from eyefold.errors import CheckFailedError, EyefoldError
from tests.helpers.cli import run_eyefold as run

SAMPLES = Path(__file__).resolve().parents[2] / "sample_models"
DYNAMIC = SAMPLES / "dynamic_batch.onnx"  # x: FLOAT[batch, 6]

onnxruntime = pytest.importorskip("onnxruntime")




def _check(tmp_path: Path, source: Path, *args: str) -> tuple[str, dict]:
    """``optimize --check ARGS``: stdout and the report's ``check``."""
    output, report = tmp_path / "o.onnx", tmp_path / "r.json"
    done = run("optimize", str(source), str(output), "--check", "--report", str(report), *args)
    assert done.returncode == 0, done.stderr
    return done.stdout, json.loads(report.read_text())["check"]


def _ort(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds), strict=True))


def _reference(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    from onnx.reference import ReferenceEvaluator

    model = onnx.load(str(path))
    names = [o.name for o in model.graph.output]
    return dict(zip(names, ReferenceEvaluator(model).run(None, feeds), strict=True))


def _npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def _assert_same(saved: dict[str, np.ndarray], ran: dict[str, np.ndarray]) -> None:
    assert list(saved) == list(ran)
    for name in ran:
        assert saved[name].dtype == ran[name].dtype
        assert saved[name].tobytes() == ran[name].tobytes(), name


def test_symbolic_dims_are_checked_at_two_sizes_and_saved(tmp_path: Path) -> None:
    saved = tmp_path / "saved"
    out, check = _check(tmp_path, DYNAMIC, "--check-save", str(saved))
    assert len(check["sizes"]) == 2
    first, second = (sizes["batch"] for sizes in check["sizes"])
    assert first != second
    assert check["shapes"] == [{"x": [first, 6]}, {"x": [second, 6]}]
    assert f"symbolic dims at batch={first} then batch={second}" in out
    assert f"saved in {saved}" in out
    for number, batch in ((1, first), (2, second)):
        feeds = _npz(saved / f"inputs_{number}.npz")
        assert list(feeds) == ["x"] and feeds["x"].shape == (batch, 6)
        _assert_same(_npz(saved / f"original_outputs_{number}.npz"), _ort(DYNAMIC, feeds))
        output_outputs = _npz(saved / f"output_outputs_{number}.npz")
        _assert_same(output_outputs, _ort(tmp_path / "o.onnx", feeds))
    assert len(check["saved"]) == 6
    assert sorted(p.name for p in saved.iterdir()) == sorted(
        Path(p).name for p in check["saved"]
    )


def test_saved_outputs_name_the_backend_that_made_them(tmp_path: Path) -> None:
    """bool_mask: the original runs on the reference evaluator, the output on onnxruntime."""
    source, saved = SAMPLES / "bool_mask.onnx", tmp_path / "saved"
    _, check = _check(
        tmp_path, source, "--target-runtime", "onnxruntime", "--check-save", str(saved)
    )
    assert (check["original_backend"], check["output_backend"]) == (
        "onnx.reference",
        "onnxruntime",
    )
    assert len(check["sizes"]) == 1  # x is static: one check
    feeds = _npz(saved / "inputs_1.npz")
    _assert_same(_npz(saved / "original_outputs_1.npz"), _reference(source, feeds))
    _assert_same(_npz(saved / "output_outputs_1.npz"), _ort(tmp_path / "o.onnx", feeds))


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow
def test_check_shape_chooses_the_check_shapes_and_leaves_the_model(tmp_path: Path) -> None:
    saved = tmp_path / "saved"
    _, check = _check(tmp_path, DYNAMIC, "--check-shape", "x:5,6", "--check-save", str(saved))
    assert check["shapes"] == [{"x": [5, 6]}]  # every symbolic dim given: one check
    assert _npz(saved / "inputs_1.npz")["x"].shape == (5, 6)
    checked = _digest(tmp_path / "o.onnx")
    plain = tmp_path / "plain.onnx"
    assert run("optimize", str(DYNAMIC), str(plain), "-q").returncode == 0
    assert checked == _digest(plain)  # not --input-shape: the model is written as without

    _, check = _check(tmp_path, DYNAMIC, "--check-shape", "x:5,6", "--check-shape", "x:1,6")
    assert check["shapes"] == [{"x": [5, 6]}, {"x": [1, 6]}]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--check-shape", "x:5,7"], "dim 1 is 7, the model declares"),
        (["--check-shape", "nope:5,6"], "no such graph input"),
        (["--check-shape", "x"], "not a check shape"),
        (["--check-shape", "x:a,6"], "not a check shape"),
        (["--check-rtol", "-1"], "not a tolerance"),
        (["--check-atol", "nan"], "not a tolerance"),
        (["--check-inputs", "f.npz", "--check-shape", "x:5,6"], "cannot be combined"),
    ],
)
def test_check_options_that_do_not_fit_are_usage_errors(
    tmp_path: Path, args: list[str], message: str
) -> None:
    output = tmp_path / "o.onnx"
    done = run("optimize", str(DYNAMIC), str(output), "--check", *args)
    assert done.returncode == 2 and message in done.stderr
    assert "Traceback" not in done.stderr and not output.exists()


@pytest.mark.parametrize(
    "option", [["--check-shape", "x:5,6"], ["--check-save", "d"], ["--check-rtol", "1"]]
)
def test_check_options_are_for_one_model(tmp_path: Path, option: list[str]) -> None:
    done = run("optimize", str(DYNAMIC), "--output-dir", str(tmp_path), "--check", *option)
    assert done.returncode == 2 and "it takes INPUT OUTPUT" in done.stderr


@pytest.mark.slow
def test_check_options_without_check_warn(tmp_path: Path) -> None:
    done = run("optimize", str(DYNAMIC), str(tmp_path / "o.onnx"), "--check-save", "d")
    assert done.returncode == 0
    assert "--check-save has no effect without --check" in done.stderr
    assert not (tmp_path / "d").exists()


@pytest.mark.slow
def test_check_tolerances_replace_the_defaults(tmp_path: Path) -> None:
    _, check = _check(tmp_path, DYNAMIC, "--check-rtol", "0", "--check-atol", "0")
    assert check["tolerances"] == {"FLOAT": {"rtol": 0.0, "atol": 0.0}}
    _, check = _check(tmp_path, DYNAMIC, "--check-rtol", "0.5")
    assert check["tolerances"] == {"FLOAT": {"rtol": 0.5, "atol": 1e-6}}


def _add_constant(value: float) -> onnx.ModelProto:
    """y = x + c: the same model with another constant is an optimization that drifted."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])
    c = helper.make_tensor("c", TensorProto.FLOAT, [1], [value])
    graph = helper.make_graph([helper.make_node("Add", ["x", "c"], ["y"])], "g", [x], [y], [c])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_tolerance_options_decide_the_comparison() -> None:
    original, drifted = _add_constant(1000.0), _add_constant(1000.0 * (1 + 1e-3))
    with pytest.raises(CheckFailedError, match="rtol=1e-05"):
        check_equivalence(original, drifted)
    loose = check_equivalence(original, drifted, settings=CheckSettings(rtol=1e-2))
    assert loose.tolerances == {"FLOAT": {"rtol": 1e-2, "atol": 1e-6}}
    with pytest.raises(CheckFailedError, match="atol=0"):
        check_equivalence(original, drifted, settings=CheckSettings(rtol=0, atol=0))


def _eye_k2(*, broken: bool) -> onnx.ModelProto:
    """EyeLike(x, k=2) of x: FLOAT[n, m]; ``broken``: zeros of x's shape instead.

    At 2x2 the diagonal k=2 lies outside the matrix, so both give zeros: one size
    cannot tell them apart.
    """
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "m"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "m"])
    if broken:
        nodes = [
            helper.make_node("Shape", ["x"], ["s"]),
            helper.make_node("ConstantOfShape", ["s"], ["y"],
                             value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0])),
        ]  # fmt: skip
    else:
        nodes = [helper.make_node("EyeLike", ["x"], ["y"], k=2)]
    graph = helper.make_graph(nodes, "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_the_second_size_catches_what_one_size_cannot(tmp_path: Path) -> None:
    original, broken = _eye_k2(broken=False), _eye_k2(broken=True)
    one = check_equivalence(original, broken, settings=CheckSettings(shapes={"x": [[2, 2]]}))
    assert one.shapes == [{"x": [2, 2]}]  # passes: the blind spot
    saved = tmp_path / "saved"
    with pytest.raises(CheckFailedError, match="'y' differs"):
        check_equivalence(original, broken, settings=CheckSettings(save_dir=str(saved)))
    # The failed check's inputs and outputs are kept, to replay.
    second = _npz(saved / "inputs_2.npz")["x"]
    assert second.shape[0] != second.shape[1]  # non-square
    expected = np.eye(*second.shape, k=2, dtype=np.float32)
    assert _npz(saved / "original_outputs_2.npz")["y"].tobytes() == expected.tobytes()
    assert not _npz(saved / "output_outputs_2.npz")["y"].any()


def test_dims_the_model_needs_equal_get_a_square_second_size() -> None:
    """x[n] + y[m] runs only with n == m: the second check falls back to equal sizes."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["m"])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node("Add", ["x", "y"], ["z"])], "g", [x, y], [z])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    result = check_equivalence(model, model)
    assert len(result.sizes) == 2
    assert result.sizes[0]["n"] == result.sizes[0]["m"]
    assert result.sizes[1]["n"] == result.sizes[1]["m"] != result.sizes[0]["n"]


def test_help_names_the_check_options() -> None:
    done = run("optimize", "--help")
    text = " ".join(done.stdout.split())
    for option in ("--check-shape", "--check-rtol", "--check-atol", "--check-save"):
        assert option in text
    assert "inputs_N.npz, original_outputs_N.npz, output_outputs_N.npz" in text


def test_a_model_that_runs_at_one_size_only_is_checked_there_and_says_so() -> None:
    """x[n] + c[2] runs only at n = 2 (or 1): the second size is left out, not failed."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    c = helper.make_tensor("c", TensorProto.FLOAT, [2], [1.0, 2.0])
    graph = helper.make_graph([helper.make_node("Add", ["x", "c"], ["y"])], "g", [x], [y], [c])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    result = check_equivalence(model, model)
    assert result.sizes == [{"n": 2}]
    assert result.unchecked_size is not None
    assert result.unchecked_size.startswith("the original does not run at n=")
    assert "; no second size: the original does not run at n=" in result.describe()
    # A size the user chose is not left out: it fails.
    with pytest.raises(EyefoldError, match="cannot run the original"):
        check_equivalence(model, model, settings=CheckSettings(shapes={"x": [[2], [5]]}))


@pytest.mark.slow
def test_inputs_named_like_numpys_own_parameters_are_checked_and_saved(tmp_path: Path):
    """A graph input named ``file`` (np.savez's own parameter) runs on OpenVINO in the
    check's child process and is saved under its name."""
    pytest.importorskip("openvino")
    nodes = [
        helper.make_node("EyeLike", ["file"], ["e"], name="eye"),
        helper.make_node("Add", ["file", "e"], ["allow_pickle"], name="add"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("file", TensorProto.FLOAT, ["n", "n"])],
        [helper.make_tensor_value_info("allow_pickle", TensorProto.FLOAT, ["n", "n"])],
    )
    source = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)]), source)
    saved = tmp_path / "saved"
    done = run(
        "optimize", str(source), str(tmp_path / "o.onnx"), "--check",
        "--target-runtime", "openvino", "--check-save", str(saved),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with np.load(saved / "inputs_1.npz") as inputs, np.load(
        saved / "output_outputs_1.npz"
    ) as outputs:
        assert inputs.files == ["file"] and outputs.files == ["allow_pickle"]
        feed = inputs["file"]
        expected = feed + np.eye(len(feed), dtype=feed.dtype)
        assert np.array_equal(outputs["allow_pickle"], expected)
