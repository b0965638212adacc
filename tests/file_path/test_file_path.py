"""``eyefold optimize IN OUT`` on the file path: protobuf in, the neighbourhood, protobuf out.

The command line parses the file with protobuf and deserializes only the EyeLike
neighbourhood (``eyefold.proto_path``); the result must be the model the onnx-ir path
gives (``load_model``, ``optimize``, ``save_model``), with the same stats in the report.
Models whose tensors live in data files are saved through onnx-ir, which copies the data
the result reads next to OUTPUT.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import eyefold
import eyefold.model_files
from eyefold.cli import main
from eyefold.core.model_stats import model_stats
from eyefold.model_files import load_model, save_model
from eyefold.testing import assert_same_outputs, canonical, random_inputs

ROOT = Path(__file__).resolve().parents[2]


def _big(nodes: int) -> onnx.ModelProto:
    """benchmarks/generate.py's big model: residual blocks and four static EyeLike."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import generate

    return generate.big(nodes)


def _optimize_cli(source: Path, output: Path, report_folder: Path, *extra: str) -> dict:
    report = report_folder / f"{output.stem}.report.json"
    arguments = [str(source), str(output), "-q", "--report", str(report), *extra]
    status = main(["optimize", *arguments])
    assert status == 0
    return json.loads(report.read_text())


def _ir_path(source: Path, output: Path) -> None:
    model = load_model(source)
    eyefold.optimize(model)
    save_model(model, output)


def test_big_model_gives_the_onnx_ir_paths_model(tmp_path: Path) -> None:
    source = tmp_path / "big.onnx"
    onnx.save(_big(2000), source)
    before = source.read_bytes()
    report = _optimize_cli(source, tmp_path / "cli.onnx", tmp_path)
    _ir_path(source, tmp_path / "ir.onnx")
    assert source.read_bytes() == before
    assert report["steps"][1]["name"] == "neighbourhood"
    cli_model = onnx.load(str(tmp_path / "cli.onnx"))
    ir_model = onnx.load(str(tmp_path / "ir.onnx"))
    assert canonical(cli_model) == canonical(ir_model)
    assert_same_outputs(ir_model, cli_model, random_inputs(ir_model, seed=5))
    for key, path in (("before", source), ("after", tmp_path / "cli.onnx")):
        stats = model_stats(ir.load(str(path)), None)
        assert report["ops"][key] == stats.ops
        assert report["initializers"][key] == stats.initializers
        assert report["model_bytes"][key] == path.stat().st_size


def _external_model(folder: Path) -> Path:
    """``y = MatMul(x, w) + EyeLike(w)`` with ``w`` (and an unused ``v``) in ``w.bin``."""
    w = np.arange(16, dtype=np.float32).reshape(4, 4)
    v = np.ones(300, dtype=np.float32)
    model = onnx.parser.parse_model(
        """<ir_version: 10, opset_import: ["" : 22]>
        g (float[2, 4] x) => (float[2, 4] y, float[300] z) {
            m = MatMul (x, w)
            e = EyeLike (w)
            s = ReduceSum <keepdims = 0> (e)
            y = Add (m, s)
            z = Identity (v)
        }"""
    )
    model.graph.initializer.extend(
        [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(v, "v")]
    )
    path = folder / "model.onnx"
    onnx.save(model, path, save_as_external_data=True, location="w.bin", size_threshold=0)
    return path


def _no_whole_model_load(*args: object) -> None:
    raise AssertionError("the whole model went through onnx-ir")


@pytest.mark.parametrize("same_path", [False, True], ids=["elsewhere", "in-place"])
def test_external_data_is_copied_beside_the_output(
    tmp_path: Path, same_path: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The proto is saved with its data file: onnx-ir never loads the whole model.
    monkeypatch.setattr(eyefold.model_files, "model_from_proto", _no_whole_model_load)
    inputs = tmp_path / "in"
    inputs.mkdir()
    source = _external_model(inputs)
    reference = onnx.load(str(source))  # data loaded: what the model computes
    out_folder = inputs if same_path else tmp_path / "out"
    out_folder.mkdir(exist_ok=True)
    output = source if same_path else out_folder / "model.onnx"
    report = _optimize_cli(source, output, tmp_path)
    assert report["steps"][1]["name"] == "neighbourhood"
    assert report["output"]["data_path"] == str(out_folder / "model.onnx.data")
    result = onnx.load(str(output))  # reads the data OUTPUT names, relative to it
    assert not any(n.op_type == "EyeLike" for n in result.graph.node)
    assert_same_outputs(reference, result, random_inputs(reference, seed=1))
    expected = ["model.onnx", "model.onnx.data", *(["w.bin"] if same_path else [])]
    assert sorted(os.listdir(out_folder)) == expected
    assert (inputs / "w.bin").exists()  # a data file not named after OUTPUT is never removed


def test_whole_model_path_with_external_data(tmp_path: Path) -> None:
    # An EyeLike in a subgraph takes the whole-model path; its data still goes along.
    w = np.arange(4, dtype=np.float32).reshape(2, 2)
    model = onnx.parser.parse_model(
        """<ir_version: 10, opset_import: ["" : 22]>
        g (bool c) => (float[2, 2] y) {
            y = If (c) <then_branch = t () => (float[2, 2] o) { e = EyeLike (w)
                                                              o = Add (e, w) },
                        else_branch = f () => (float[2, 2] o) { o = Identity (w) }>
        }"""
    )
    model.graph.initializer.append(onnx.numpy_helper.from_array(w, "w"))
    source = tmp_path / "model.onnx"
    onnx.save(model, source, save_as_external_data=True, location="w.bin", size_threshold=0)
    report = _optimize_cli(source, tmp_path / "out.onnx", tmp_path)
    assert report["steps"][1]["name"].startswith("whole-model: an EyeLike sits in a subgraph")
    result = onnx.load(str(tmp_path / "out.onnx"))
    reference = onnx.load(str(source))
    for flag in (True, False):
        feeds = {"c": np.array(flag)}
        assert_same_outputs(reference, result, feeds)


def test_a_hostile_location_in_the_neighbourhood_is_refused(
    tmp_path: Path, external_data_model, capsys: pytest.CaptureFixture[str]
) -> None:
    source = external_data_model(tmp_path, "../outside.bin")
    before = source.read_bytes()
    status = main(["optimize", str(source), str(tmp_path / "out.onnx"), "-q"])
    assert status == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "outside the model's folder" in error[0], error
    assert not (tmp_path / "out.onnx").exists() and source.read_bytes() == before


def test_a_large_fold_is_written_from_its_array(tmp_path: Path) -> None:
    # 4200 x 4200 float32 = 70.6 MB, over SPLICED_TENSOR_LIMIT_BYTES: not serialized into
    # the proto, but folded on the whole-model path and streamed into the file.
    rows = 4200
    source = tmp_path / "model.onnx"
    onnx.save(
        onnx.parser.parse_model(
            f"""<ir_version: 10, opset_import: ["" : 22]>
            g (float[{rows}, {rows}] x) => (float[{rows}, {rows}] y) {{
                e = EyeLike <k = 1> (x)
                y = Add (x, e)
            }}"""
        ),
        source,
    )
    report = _optimize_cli(source, tmp_path / "out.onnx", tmp_path, "--size-limit", "100M")
    assert report["steps"][1]["name"].startswith("whole-model: 70560000 bytes of new tensors")
    assert report["eyelike"]["folded"] == 1
    (tensor,) = onnx.load(str(tmp_path / "out.onnx")).graph.initializer
    eye = onnx.numpy_helper.to_array(tensor)
    assert np.array_equal(eye, np.eye(rows, k=1, dtype=np.float32))


def test_an_external_tensor_attribute_is_saved_through_onnx_ir(tmp_path: Path) -> None:
    # A Constant's tensor in a data file: the proto save copies only initializers, so
    # onnx-ir saves this model, its attribute tensor read into the model.
    value = np.arange(400, dtype=np.float32)
    model = onnx.parser.parse_model(
        """<ir_version: 10, opset_import: ["" : 22]>
        g (float[3, 3] x) => (float[3, 3] y, float[400] z) {
            y = EyeLike (x)
            z = Identity (c)
        }"""
    )
    (tmp_path / "c.bin").write_bytes(value.tobytes())
    tensor = onnx.TensorProto(
        name="c", data_type=onnx.TensorProto.FLOAT, dims=[400], data_location=1
    )
    for key, entry in {"location": "c.bin", "offset": "0", "length": "1600"}.items():
        tensor.external_data.add(key=key, value=entry)
    model.graph.node.insert(0, onnx.helper.make_node("Constant", [], ["c"], value=tensor))
    source = tmp_path / "model.onnx"
    onnx.save(model, source)
    report = _optimize_cli(source, tmp_path / "out.onnx", tmp_path)
    assert report["steps"][1]["name"] == "neighbourhood"
    written = onnx.load(str(tmp_path / "out.onnx"), load_external_data=False)
    (attribute,) = next(n for n in written.graph.node if n.op_type == "Constant").attribute
    assert attribute.t.data_location == onnx.TensorProto.DEFAULT  # read into the model
    result = onnx.load(str(tmp_path / "out.onnx"))
    assert_same_outputs(onnx.load(str(source)), result, random_inputs(result, seed=2))
