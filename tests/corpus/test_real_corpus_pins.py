"""Pinning only the input an eye reads, when another input shares its batch symbol.

asteroid's ``condition_scm`` after ``compute_scm`` (``asteroid_condition_scm_dynamo20``)
reads M from ``x`` alone, so ``--input-shape x:...`` folds its eye and leaves ``mask``
alone. But dynamo declares ``x`` ``[B, M, F, T]`` and ``mask`` ``[B, 1, F, T]``, and
``mask * x`` ``[B, M, F, T]``: after the pin, that product is declared ``[2, 3, 5, 7]``
while ``mask`` still says ``B``, and tract refuses the model ("Impossible to unify Val(2)
with Broadcast([Sym(B), Val(2)])"). The pin now rewrites every input's ``B`` with it.
The export itself does not run on tract (its ConstantOfShape), so the corpus test cannot
see it; this model, reduced from it, runs there before the pin.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from eyefold.cli.main import main
from eyefold.runtime.runners import runner_for

pytest.importorskip("tract")


def _shared_batch() -> onnx.ModelProto:
    """``(mask * x) @ EyeLike(M x M)``, x ``[B, M]``, mask ``[B, 1]``, the product declared."""

    def ints(name: str, values: list[int]) -> onnx.NodeProto:
        tensor = helper.make_tensor(name, TensorProto.INT64, [len(values)], values)
        return helper.make_node("Constant", [], [name], value=tensor)

    zero = helper.make_tensor("zero", TensorProto.FLOAT, [1], [0.0])
    nodes = [
        helper.make_node("Mul", ["mask", "x"], ["masked"], name="masked"),
        helper.make_node("Shape", ["x"], ["shape"]),
        ints("one", [1]),
        ints("two", [2]),
        helper.make_node("Slice", ["shape", "one", "two"], ["m"]),
        helper.make_node("Concat", ["m", "m"], ["mm"], axis=0),
        helper.make_node("ConstantOfShape", ["mm"], ["zeros"], value=zero),
        helper.make_node("EyeLike", ["zeros"], ["eye"], name="eye"),
        helper.make_node("MatMul", ["masked", "eye"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "shared_batch",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "M"]),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["B", 1]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "M"])],
        value_info=[helper.make_tensor_value_info("masked", TensorProto.FLOAT, ["B", "M"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def test_pinning_one_input_of_a_shared_batch_still_runs_on_tract(tmp_path) -> None:
    source, output = tmp_path / "shared.onnx", tmp_path / "pinned.onnx"
    onnx.save(_shared_batch(), source)
    rng = np.random.default_rng(0)
    feeds = {
        "x": rng.standard_normal((2, 3)).astype(np.float32),
        "mask": rng.random((2, 1)).astype(np.float32),
    }
    (want,) = runner_for("tract")(str(source), feeds)  # the original runs there
    np.testing.assert_allclose(want, feeds["mask"] * feeds["x"], rtol=1e-6)
    assert main(["optimize", str(source), str(output), "-q", "--input-shape", "x:2,3"]) == 0
    assert not any(n.op_type == "EyeLike" for n in onnx.load(output).graph.node)
    (got,) = runner_for("tract")(str(output), feeds)
    np.testing.assert_array_equal(got, want)
    mask = next(i for i in onnx.load(output).graph.input if i.name == "mask")
    assert [d.dim_value for d in mask.type.tensor_type.shape.dim] == [2, 1]
