"""The torch.onnx flow the README shows: eyefold on an ``ONNXProgram`` before its
``optimize()``, and on a TorchScript export. Skipped without torch, which CI does not
install (``pip install torch`` to run it, see the README's "torch.onnx" section)."""

from __future__ import annotations

import collections
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import eyefold

torch = pytest.importorskip("torch")


class Diagonal(torch.nn.Module):
    """``torch.diagonal``: the dynamo exporter writes an EyeLike mask, Mul and ReduceSum."""

    def forward(self, x):
        return torch.diagonal(x, 0, -2, -1)


class TimesEye(torch.nn.Module):
    """``x @ torch.eye(n)`` with ``n`` read from the input's shape."""

    def forward(self, x):
        return x @ torch.eye(x.shape[1], dtype=x.dtype)


X = np.random.default_rng(0).standard_normal((2, 4, 4)).astype(np.float32)


def _export():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.onnx.export(Diagonal().eval(), (torch.from_numpy(X),), dynamo=True)


def _ops(program) -> collections.Counter:
    return collections.Counter(node.op_type for node in program.model.graph)


def _run(program) -> np.ndarray:
    model = program.model_proto.SerializeToString()
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    (name,) = [i.name for i in session.get_inputs()]
    return session.run(None, {name: X})[0]


def test_eyefold_before_onnx_program_optimize() -> None:
    program = _export()
    exported_opset = program.model.opset_imports[""]
    assert _ops(program)["EyeLike"] == 1
    returned = eyefold.optimize(program.model, relaxed=True)
    assert returned is program.model  # an onnx_ir.Model is changed in place
    program.optimize()
    assert "EyeLike" not in _ops(program)
    assert exported_opset < 22 == program.model.opset_imports[""]
    expected = torch.diagonal(torch.from_numpy(X), 0, -2, -1).numpy()
    np.testing.assert_array_equal(_run(program), expected)


def test_the_order_matters() -> None:
    """eyefold's rewrite writes shape arithmetic that ``optimize()`` folds afterwards;
    run after it, nothing folds that arithmetic any more."""
    first = _export()
    eyefold.optimize(first.model, relaxed=True)
    first.optimize()
    last = _export()
    last.optimize()
    eyefold.optimize(last.model, relaxed=True)
    assert sum(_ops(first).values()) < sum(_ops(last).values())
    assert _ops(last)["Constant"] > 0 == _ops(first)["Constant"]
    np.testing.assert_array_equal(_run(first), _run(last))


def test_upgrade_false_keeps_the_programs_opset() -> None:
    program = _export()
    exported_opset = program.model.opset_imports[""]
    eyefold.optimize(program.model, upgrade=False)
    assert program.model.opset_imports[""] == exported_opset


def test_a_torchscript_export_folds_on_the_command_line(tmp_path: Path) -> None:
    from eyefold.cli import main

    source, output = tmp_path / "m.onnx", tmp_path / "m.opt.onnx"
    x = torch.randn(8, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(TimesEye().eval(), (x,), str(source), dynamo=False)
    assert any(n.op_type == "EyeLike" for n in onnx.load(str(source)).graph.node)
    assert main(["optimize", str(source), str(output), "-q"]) == 0
    assert not any(n.op_type == "EyeLike" for n in onnx.load(str(output)).graph.node)
    session = ort.InferenceSession(str(output), providers=["CPUExecutionProvider"])
    (name,) = [i.name for i in session.get_inputs()]
    np.testing.assert_array_equal(session.run(None, {name: x.numpy()})[0], x.numpy())
