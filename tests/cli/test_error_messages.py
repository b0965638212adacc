"""Errors and warnings name what the user's model holds, and say what to do.

eyefold hands onnx copies of the model in which Cast or Identity replaces EyeLike (to
dodge onnx's EyeLike crash), values are renamed and large tensors left out. No message may
name such a replacement, a renamed value or a made-up name. The leading case is a real export:
tf2onnx's ``tf.eye(n, batch_shape=[2])``, whose EyeLike is rank 2 while the graph output
is declared with the batch dim.
"""

from __future__ import annotations

import json
import logging
import pathlib
import re
from types import ModuleType

import onnx
import onnx_ir as ir
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import eyefold
from eyefold.cli import main
from eyefold.core.onnx_safety import defuse_eyelike_dtype, replacement_ops, restore_names
from eyefold.errors import EyefoldError, InvalidModelError
from eyefold.passes.upgrade_opset import UpgradeOpsetPass
from eyefold.testing import check_model_safely

# Names only eyefold's throwaway copies hold, and the dims onnx names itself (unk__N).
INTERNAL_MARKERS = (
    "__eyefold",
    "eyefold_slice",
    "eyefold_subgraph_",
    "eyefold_upgrade",
    "pkg.eyefold.hidden",
    "unk__",
)
# How onnx names a node in its messages, and how eyefold repeats its op.
NODE_MENTION = re.compile(
    r"op_type:(\w+)(?:, node name: ([^)]*))?\)|Name: (.*?) OpType: (\w+)| at op (\w+)"
)
FUZZ_MESSAGE_EXAMPLES = 40


def _tf2onnx_batch_eye(opset: int) -> onnx.ModelProto:
    """``tf.eye(n, batch_shape=[2])``, n dynamic, as tf2onnx 1.17 exports it from TF 2.21.

    As ``rewrite_eye`` in tf2onnx/rewriter/eye_rewriter.py emits it: the matched
    MatrixDiag becomes ``ConstantOfShape(Cast(Concat(rows, cols), to=INT64))`` ->
    ``EyeLike(dtype=...)`` named after the MatrixDiag (``eye/diag``), writing its output
    and keeping its TF shape, batch dim included. ``n`` is ``tf.shape(x)[0]`` (Shape ->
    Cast to int32 -> Slice; tf2onnx's optimizer cancels the Squeeze/Unsqueeze pair), and
    tf2onnx's Identity removal lets the EyeLike write the graph output ``Identity:0``.
    """
    nodes = [
        helper.make_node("Shape", ["x:0"], ["eye/Shape:0"], name="eye/Shape"),
        helper.make_node("Cast", ["eye/Shape:0"], ["eye/Cast:0"], name="eye/Cast", to=6),
    ]
    initializers = []
    if opset >= 10:  # Slice takes starts/ends/axes as inputs from opset 10
        initializers = [
            helper.make_tensor(name, TensorProto.INT64, [1], [value])
            for name, value in (("begin:0", 0), ("end:0", 1), ("axes:0", 0))
        ]
        slice_inputs, slice_attrs = ["eye/Cast:0", "begin:0", "end:0", "axes:0"], {}
    else:
        slice_inputs, slice_attrs = ["eye/Cast:0"], {"starts": [0], "ends": [1], "axes": [0]}
    nodes += [
        helper.make_node(
            "Slice", slice_inputs, ["eye/n:0"], name="eye/strided_slice", **slice_attrs
        ),
        helper.make_node(
            "Concat", ["eye/n:0", "eye/n:0"], ["eye/shape:0"], name="eye/concat", axis=0
        ),
        helper.make_node(
            "Cast", ["eye/shape:0"], ["eye/shape64:0"], name="eye/cast64", to=TensorProto.INT64
        ),
        helper.make_node(
            "ConstantOfShape", ["eye/shape64:0"], ["eye/zeros:0"], name="eye/ones"
        ),
        helper.make_node(
            "EyeLike",
            ["eye/zeros:0"],
            ["Identity:0"],
            name="eye/diag",
            dtype=TensorProto.FLOAT,
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "tf2onnx",
        [helper.make_tensor_value_info("x:0", TensorProto.FLOAT, ["n", 3])],
        [helper.make_tensor_value_info("Identity:0", TensorProto.FLOAT, [2, "n", "n"])],
        initializers,
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=7
    )


def _all_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    found: list[onnx.NodeProto] = []

    def visit(nodes) -> None:
        for node in nodes:
            found.append(node)
            for attr in node.attribute:
                for graph in [attr.g] if attr.HasField("g") else attr.graphs:
                    visit(graph.node)

    visit(model.graph.node)
    for function in model.functions:
        visit(function.node)
    return found


def assert_truthful(text: str, model: onnx.ModelProto | None) -> None:
    """``text`` names no internal name, and every op it names the model really holds."""
    for marker in INTERNAL_MARKERS:
        assert marker not in text, f"{marker!r} in {text!r}"
    if model is None:
        return
    real = {(node.op_type, node.name) for node in _all_nodes(model)}
    for op, name, name2, op2, at_op in NODE_MENTION.findall(text):
        if at_op:
            assert at_op in {o for o, _ in real}, f"no {at_op} node: {text!r}"
        else:
            assert (op or op2, name or name2) in real, f"no such node: {text!r}"


def _write(folder: pathlib.Path, model: onnx.ModelProto) -> pathlib.Path:
    path = folder / "model.onnx"
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("options", [[], ["--no-upgrade"]], ids=["upgrade", "no-upgrade"])
@pytest.mark.parametrize(
    ("opset", "produced", "declare"),
    [(13, "float[n,n]", "float[n,n]"), (9, "float[?,?]", "rank 2")],
    ids=["opset13", "opset9"],
)
def test_tf2onnx_batch_eye_is_refused_naming_the_eyelike(
    tmp_path: pathlib.Path, capsys, opset: int, produced: str, declare: str, options
):
    """At opset 9 onnx cannot propagate n through Slice and Concat: the dims stay unknown."""
    path = _write(tmp_path, _tf2onnx_batch_eye(opset))
    output = tmp_path / "out.onnx"
    code = main(["optimize", str(path), str(output), "-q", *options])
    assert code == 1
    assert capsys.readouterr().err == (
        "eyefold: error: graph output 'Identity:0' is declared float[2,n,n] (rank 3), but"
        f" EyeLike 'eye/diag' in main produces rank 2 ({produced}); fix the output shape the"
        f" exporter declares to {declare} (EyeLike keeps its input's shape), then export"
        " again\n"
    )
    assert not output.exists()


def test_upgrade_pass_alone_names_the_eyelike():
    """Used in a PassManager, the upgrade's checker step gives the same refusal."""
    model = ir.serde.deserialize_model(_tf2onnx_batch_eye(13))
    with pytest.raises(InvalidModelError, match=r"EyeLike 'eye/diag' in main produces rank 2"):
        UpgradeOpsetPass(22)(model)


def _static_eye(input_dims: list[int], output_dims: list[int]) -> onnx.ModelProto:
    return helper.make_model(
        helper.make_graph(
            [helper.make_node("EyeLike", ["x"], ["y"], name="eye")],
            "dims",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, input_dims)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, output_dims)],
        ),
        opset_imports=[helper.make_opsetid("", 22)],
        ir_version=10,
    )


def test_dims_that_contradict_are_refused_before_folding(tmp_path: pathlib.Path, capsys):
    """A fold would replace the value and silently drop the wrong declaration: no guess.

    ``--input-shape`` pins only symbolic or unknown dims, so it cannot settle two static
    declarations; the message does not offer it.
    """
    path = _write(tmp_path, _static_eye([4, 4], [3, 3]))
    output = tmp_path / "out.onnx"
    assert main(["optimize", str(path), str(output), "-q"]) == 1
    assert capsys.readouterr().err == (
        "eyefold: error: graph output 'y' is declared float[3,3], but EyeLike 'eye' in main"
        " produces float[4,4], its input's shape (dim 0 differs); fix the output shape the"
        " exporter declares to float[4,4], or the input shape it comes from if that is the"
        " wrong one, then export again\n"
    )
    assert not output.exists()
    fixed = _write(tmp_path, _static_eye([4, 4], [4, 4]))
    assert main(["optimize", str(fixed), str(output), "-q"]) == 0


def test_checker_messages_about_a_defused_copy_name_the_eyelike():
    """check_model_safely runs on defused Cast(EyeLike(x)) and says EyeLike."""
    model = _tf2onnx_batch_eye(13)
    with pytest.raises(onnx.checker.ValidationError) as caught:
        check_model_safely(model)
    assert "op_type:EyeLike, node name: eye/diag)" in str(caught.value)
    assert_truthful(str(caught.value), model)
    model.graph.node[-1].ClearField("name")
    with pytest.raises(onnx.checker.ValidationError) as caught:
        check_model_safely(model)
    assert "(op_type:EyeLike)" in str(caught.value)
    assert_truthful(str(caught.value), model)


def test_replacements_sharing_a_real_node_name_are_left_as_onnx_said():
    """A real Cast with the replacement's name: the message may be about it, so no rewrite."""
    nodes = [
        helper.make_node("Cast", ["a"], ["b"], name="same", to=1),
        helper.make_node("Cast", ["b"], ["c"], name="same", to=1),  # the replacement
        helper.make_node("Identity", ["c"], ["d"], name="eye"),  # another replacement
    ]
    ops = replacement_ops(nodes, {("c",), ("d",)})
    assert ops == {("Identity", "eye"): "EyeLike"}
    text = "(op_type:Identity, node name: eye): x (op_type:Cast, node name: same): y"
    assert restore_names(text, ops, {}) == (
        "(op_type:EyeLike, node name: eye): x (op_type:Cast, node name: same): y"
    )
    unnamed = replacement_ops([helper.make_node("Cast", ["a"], ["b"], to=1)], {("b",)})
    assert restore_names("(op_type:Cast): z", unnamed, {}) == "(op_type:EyeLike): z"


def test_defused_names_map_back_longest_first():
    """Ten defused EyeLikes: ``..._10`` is not read as ``..._1`` followed by ``0``."""
    nodes = [
        helper.make_node("EyeLike", ["x"], [f"e{i}"], name=f"eye{i}", dtype=1)
        for i in range(10)
    ]
    outputs = [
        helper.make_tensor_value_info(f"e{i}", TensorProto.FLOAT, None) for i in range(10)
    ]
    model = helper.make_model(
        helper.make_graph(
            nodes,
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
            outputs,
        )
    )
    defused = defuse_eyelike_dtype(model)
    assert len(defused) == 10
    inner = [n.output[0] for n in model.graph.node if n.op_type == "EyeLike"]
    assert defused.restore(" ".join(inner)) == " ".join(f"e{i}" for i in range(10))


def _run_cli(argv: list[str], capsys) -> str:
    capsys.readouterr()
    main(argv)
    captured = capsys.readouterr()
    return captured.err + captured.out


def _load_or_none(path: pathlib.Path) -> onnx.ModelProto | None:
    try:
        return onnx.load(path, load_external_data=False)
    except Exception:  # the hostile corpus holds files that are no model at all
        return None


@pytest.mark.slow
def test_hostile_corpus_messages_name_no_internal_names(
    tmp_path: pathlib.Path, capsys, hostile_files: ModuleType, external_data_model
):
    """Every message of every hostile case (optimize and inspect) passes the scan."""
    scanned = 0
    for case in hostile_files.CASES:
        model_path, out_folder = hostile_files._layout(
            tmp_path / case.id, case, external_data_model
        )
        target = str(out_folder / "out.onnx")
        for argv in (
            ["optimize", str(model_path), target, "-q", *case.options],
            ["inspect", str(model_path), *case.options],
        ):
            text = _run_cli(argv, capsys)
            assert text.startswith("eyefold: error: "), (case.id, text)
            assert_truthful(text, _load_or_none(model_path))
            scanned += 1
    assert scanned == 2 * len(hostile_files.CASES)


class _Records(logging.Handler):
    """Keeps the text of every warning logged while a model is optimized."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(record.getMessage())


def _messages(model: onnx.ModelProto, **options: object) -> list[str]:
    """Every message optimizing ``model`` gives: the error, warnings, reasons, logs."""
    records = _Records()
    logging.getLogger().addHandler(records)
    try:
        report = eyefold.optimize_with_report(model, **options).report
    except EyefoldError as error:
        return [str(error), *records.texts]
    finally:
        logging.getLogger().removeHandler(records)
    texts = [*report.warnings, *records.texts]
    for node in report.to_dict()["nodes"]:
        texts += [str(node.get(key)) for key in ("name", "reason", "shape", "runtime_note")]
    return texts


def _declare_first_output_batched(model: onnx.ModelProto) -> onnx.ModelProto:
    """The tf2onnx mistake on a fuzz model: the first output gets a leading dim 2."""
    broken = onnx.ModelProto()
    broken.CopyFrom(model)
    shape = broken.graph.output[0].type.tensor_type.shape
    dims = list(shape.dim)
    del shape.dim[:]
    shape.dim.add().dim_value = 2
    shape.dim.extend(dims)
    return broken


@pytest.mark.slow
@settings(
    max_examples=FUZZ_MESSAGE_EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_fuzz_model_messages_name_no_internal_names(fuzz_graphs: ModuleType, data):
    """Fuzz models, as generated and with a batched output declaration, pass the scan.

    An output written by an EyeLike of the main graph is refused naming that EyeLike.
    """
    model = data.draw(fuzz_graphs.models())
    for text in _messages(model):
        assert_truthful(text, model)
    broken = _declare_first_output_batched(model)
    texts = _messages(broken)
    for text in texts:
        assert_truthful(text, broken)
    writer = next(
        (n for n in broken.graph.node if broken.graph.output[0].name in n.output), None
    )
    if writer is not None and writer.op_type == "EyeLike":
        assert "EyeLike" in texts[0] and "declared" in texts[0], texts[0]


def test_an_empty_model_proto_is_refused_by_the_library():
    """``ModelProto()`` has no graph and no opset: an error, not an empty "result"."""
    with pytest.raises(InvalidModelError, match=r"not an ONNX model.*no graph"):
        eyefold.optimize(onnx.ModelProto())


def test_an_unknown_element_type_is_an_eyefold_error_from_the_library():
    """onnx-ir's SerdeError does not escape: the caller catches EyefoldError."""
    x = helper.make_tensor_value_info("x", 999, [4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])
    graph = helper.make_graph([helper.make_node("EyeLike", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    with pytest.raises(EyefoldError, match="999 is not a valid DataType"):
        eyefold.optimize(model)


def test_an_input_shape_dim_past_int64_is_a_usage_error(tmp_path: pathlib.Path, capsys):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "m"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "m"])
    graph = helper.make_graph([helper.make_node("EyeLike", ["x"], ["y"])], "g", [x], [y])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)]), path)
    output = tmp_path / "o.onnx"
    argv = ["optimize", str(path), str(output), "--input-shape", "x:99999999999999999999,2"]
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert "dim 99999999999999999999 is larger than an ONNX dim can be" in error
    assert not output.exists()


def _bitwise_xor_at_opset(opset: int) -> onnx.ModelProto:
    """jax2onnx's export of ``jnp.eye(...)`` after a ``^``: BitwiseXor, which is opset 18,
    written at opset 17."""
    ints = [helper.make_tensor_value_info(n, TensorProto.INT32, [4, 4]) for n in "aby"]
    nodes = [
        helper.make_node("BitwiseXor", ["a", "b"], ["c"], name="xor"),
        helper.make_node("EyeLike", ["c"], ["y"], name="eye"),
    ]
    graph = helper.make_graph(nodes, "jax", ints[:2], ints[2:])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_an_invalid_export_is_named_invalid_not_blamed_on_the_converter(
    tmp_path: pathlib.Path, capsys
):
    model = _bitwise_xor_at_opset(17)
    with pytest.raises(onnx.checker.ValidationError, match="No Op registered for BitwiseXor"):
        onnx.checker.check_model(model)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    output = tmp_path / "o.onnx"
    assert main(["optimize", str(path), str(output), "-q"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("eyefold: error: the model is invalid at opset 17 at op BitwiseXor")
    assert "No Op registered for BitwiseXor with domain_version of 17" in line
    assert "converter" not in line
    assert not output.exists()
    with pytest.raises(InvalidModelError, match="invalid at opset 17 at op BitwiseXor"):
        eyefold.optimize(model)


@pytest.mark.parametrize(("opset", "warned"), [(17, True), (18, False)])
def test_no_upgrade_warns_of_an_input_the_checker_refuses(
    tmp_path: pathlib.Path, capsys, opset: int, warned: bool
):
    """Never a silent success: the report and the summary say the input is invalid."""
    path = tmp_path / "m.onnx"
    onnx.save(_bitwise_xor_at_opset(opset), path)
    report = tmp_path / "r.json"
    argv = ["optimize", str(path), str(tmp_path / "o.onnx"), "--no-upgrade"]
    assert main([*argv, "--report", str(report)]) == 0
    summary = capsys.readouterr().out
    warnings = json.loads(report.read_text(encoding="utf-8"))["warnings"]
    invalid = [w for w in warnings if "No Op registered for BitwiseXor" in w]
    assert bool(invalid) == warned, warnings
    assert ("warning: the model is invalid at opset 17 at op BitwiseXor" in summary) == warned
