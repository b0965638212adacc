"""Models for the opset-upgrade tests, written in each source opset's own form.

The corpus models use the form their opset expects (axes as attributes before 13, Clip
bounds as attributes before 11, Softmax flattening before 13...) and mix it with EyeLike,
an If subgraph and a model-local function. They live apart from the tests so that the
upgrade tests and the command-line tests build the very same models; tests reach them
through the ``upgrade_models`` fixture of ``conftest.py``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FUNCTION_DOMAIN = "pkg.corpus"


@dataclasses.dataclass
class Builder:
    """Collects nodes written in the form ``opset`` expects."""

    opset: int
    nodes: list[onnx.NodeProto] = dataclasses.field(default_factory=list)
    initializers: list[onnx.TensorProto] = dataclasses.field(default_factory=list)

    def add(self, op: str, inputs: list[str], outputs: list[str], **attrs: object) -> None:
        self.nodes.append(helper.make_node(op, inputs, outputs, **attrs))

    def const(self, name: str, array: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def axes_op(self, op: str, x: str, out: str, axes: list[int], **attrs: object) -> None:
        """Unsqueeze/Squeeze/ReduceSum: axes attribute before 13, input from 13."""
        if self.opset < 13:
            self.add(op, [x], [out], axes=axes, **attrs)
        else:
            axes_name = self.const(f"{out}_axes", np.array(axes, dtype=np.int64))
            self.add(op, [x, axes_name], [out], **attrs)

    def clip(self, x: str, out: str, low: float, high: float) -> None:
        if self.opset < 11:
            self.add("Clip", [x], [out], min=low, max=high)
        else:
            low_name = self.const(f"{out}_min", np.array(low, dtype=np.float32))
            high_name = self.const(f"{out}_max", np.array(high, dtype=np.float32))
            self.add("Clip", [x, low_name, high_name], [out])

    def split(self, x: str, outs: list[str], axis: int, sizes: list[int]) -> None:
        if self.opset < 13:
            self.add("Split", [x], outs, axis=axis, split=sizes)
        else:
            sizes_name = self.const(f"{outs[0]}_split", np.array(sizes, dtype=np.int64))
            self.add("Split", [x, sizes_name], outs, axis=axis)

    def pad(self, x: str, out: str, pads: list[int], value: float) -> None:
        if self.opset < 11:
            self.add("Pad", [x], [out], pads=pads, value=value, mode="constant")
        else:
            pads_name = self.const(f"{out}_pads", np.array(pads, dtype=np.int64))
            value_name = self.const(f"{out}_value", np.array(value, dtype=np.float32))
            self.add("Pad", [x, pads_name, value_name], [out], mode="constant")

    def resize(self, x: str, out: str, scales: list[float], mode: str) -> None:
        scales_name = self.const(f"{out}_scales", np.array(scales, dtype=np.float32))
        if self.opset < 10:
            self.add("Upsample", [x, scales_name], [out], mode=mode)
        elif self.opset == 10:
            self.add("Resize", [x, scales_name], [out], mode=mode)
        else:
            roi = self.const(f"{out}_roi", np.array([], dtype=np.float32))
            self.add("Resize", [x, roi, scales_name], [out], mode=mode)

    def dropout(self, x: str, out: str) -> None:
        if self.opset < 12:
            self.add("Dropout", [x], [out], ratio=0.25)
        else:
            self.add("Dropout", [x], [out])


def float_info(name: str, shape: list[int | str] | None) -> onnx.ValueInfoProto:
    """A float tensor's value info, for graph inputs and outputs alike."""
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _function(opset: int) -> onnx.FunctionProto:
    """pkg.corpus::EyeSum(a) = ReduceSum(Unsqueeze(EyeLike(a, k=1)), axes=[1]) * a."""
    body = Builder(opset)
    body.add("EyeLike", ["a"], ["fn_eye"], k=1)
    body.axes_op("Unsqueeze", "fn_eye", "eye3", [0])
    body.axes_op("ReduceSum", "eye3", "rows", [1], keepdims=0)
    body.add("Mul", ["rows", "a"], ["out"])
    # Function bodies cannot hold initializers: turn the builder's into Constant nodes.
    constants = [
        helper.make_node("Constant", [], [tensor.name], value=tensor)
        for tensor in body.initializers
    ]
    return helper.make_function(
        FUNCTION_DOMAIN,
        "EyeSum",
        ["a"],
        ["out"],
        constants + body.nodes,
        [helper.make_opsetid("", opset)],
    )


def _if_branches(opset: int) -> tuple[onnx.GraphProto, onnx.GraphProto]:
    """then: Squeeze(Unsqueeze(EyeLike(m, k=-1))); else: Softmax(m) (axis semantics)."""
    then = Builder(opset)
    then.add("EyeLike", ["m"], ["then_eye"], k=-1)
    then.axes_op("Unsqueeze", "then_eye", "then_3d", [0])
    then.axes_op("Squeeze", "then_3d", "then_out", [0])
    other = Builder(opset)
    other.add("Softmax", ["m"], ["else_out"], axis=0)
    graphs = []
    for name, builder, out in ((("then", then, "then_out")), ("else", other, "else_out")):
        # Branch constants as Constant nodes (they are local to the branch).
        constants = [
            helper.make_node("Constant", [], [t.name], value=t) for t in builder.initializers
        ]
        graphs.append(
            helper.make_graph(constants + builder.nodes, name, [], [float_info(out, [4, 4])])
        )
    return graphs[0], graphs[1]


def corpus_model(opset: int) -> onnx.ModelProto:
    """EyeLike mixed with every op whose form changed between ``opset`` and 22."""
    b = Builder(opset)
    b.add("EyeLike", ["m"], ["eye"])  # no dtype: takes the input's type
    b.add("EyeLike", ["m"], ["eye_int"], k=2, dtype=TensorProto.INT64)
    b.axes_op("Unsqueeze", "eye", "eye_3d", [0])
    b.axes_op("Squeeze", "eye_3d", "eye_2d", [0])
    b.axes_op("ReduceSum", "x", "x_sum", [1], keepdims=1)
    b.clip("x", "x_clip", -0.5, 0.5)
    b.split("x", ["x_a", "x_b"], 1, [1, 2])
    b.pad("x_a", "x_pad", [0, 0, 1, 1, 0, 0, 1, 1], 0.5)
    b.add("Softmax", ["x"], ["x_soft"], axis=1)  # flattens C*H*W before 13, C only after
    b.resize("x", "x_big", [1.0, 1.0, 2.0, 2.0], "nearest")
    scale, bias, mean, var = (
        b.const(n, np.linspace(0.5, 1.5, 3, dtype=np.float32) + i)
        for i, n in enumerate(["bn_scale", "bn_bias", "bn_mean", "bn_var"])
    )
    b.add("BatchNormalization", ["x", scale, bias, mean, var], ["x_bn"], epsilon=1e-3)
    b.dropout("x_bn", "x_drop")
    then_branch, else_branch = _if_branches(opset)
    b.add("If", ["cond"], ["branch"], then_branch=then_branch, else_branch=else_branch)
    b.nodes.append(helper.make_node("EyeSum", ["m"], ["fn_out"], domain=FUNCTION_DOMAIN))
    outputs = [
        float_info("eye_2d", [4, 4]),
        helper.make_tensor_value_info("eye_int", TensorProto.INT64, [4, 4]),
        float_info("x_sum", [2, 1, 4, 4]),
        float_info("x_clip", [2, 3, 4, 4]),
        float_info("x_b", [2, 2, 4, 4]),
        float_info("x_pad", [2, 1, 6, 6]),
        float_info("x_soft", [2, 3, 4, 4]),
        float_info("x_big", [2, 3, 8, 8]),
        float_info("x_drop", [2, 3, 4, 4]),
        float_info("branch", [4, 4]),
        float_info("fn_out", [4, 4]),
    ]
    graph = helper.make_graph(
        b.nodes,
        f"corpus_{opset}",
        [
            float_info("x", [2, 3, 4, 4]),
            float_info("m", [4, 4]),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
        ],
        outputs,
        b.initializers,
    )
    return helper.make_model(
        graph,
        opset_imports=[
            helper.make_opsetid("", opset),
            helper.make_opsetid(FUNCTION_DOMAIN, 1),
        ],
        ir_version=onnx.helper.find_min_ir_version_for([helper.make_opsetid("", opset)]),
        functions=[_function(opset)],
    )


def resize_model(
    opset: int, scales: list[float], mode: str, shapes: tuple[list[int], list[int]]
) -> onnx.ModelProto:
    """One Upsample (opset 9) or Resize of x (shape ``shapes[0]``) to y (``shapes[1]``)."""
    b = Builder(opset)
    b.resize("x", "y", scales, mode)
    graph = helper.make_graph(
        b.nodes,
        "resize",
        [float_info("x", shapes[0])],
        [float_info("y", shapes[1])],
        b.initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def spell_default_domain(model: onnx.ModelProto, spelling: str) -> onnx.ModelProto:
    """A copy whose model opset import names the default domain ``spelling``.

    Nodes keep domain "" and functions the short spelling: onnx's checker accepts only ""
    on nodes, and at ir_version 10 only "" in a function's imports.
    """
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for opset in copy.opset_import:
        if opset.domain in ("", "ai.onnx"):
            opset.domain = spelling
    return copy


def large_constant_model() -> onnx.ModelProto:
    """Weights as Constant nodes (over the inline limit) in the main graph and a function."""
    weight = np.linspace(-1, 1, 64 * 64, dtype=np.float32).reshape(64, 64)
    main = Builder(11)
    main.add("Constant", [], ["w"], value=numpy_helper.from_array(weight, "w"))
    main.add("MatMul", ["x", "w"], ["xw"])
    main.axes_op("ReduceSum", "xw", "rows", [1], keepdims=1)
    main.nodes.append(helper.make_node("Bias", ["rows"], ["y"], domain=FUNCTION_DOMAIN))
    body = Builder(11)
    body.add("Constant", [], ["b"], value=numpy_helper.from_array(weight.T.copy(), "b"))
    body.axes_op("Unsqueeze", "b", "b3", [0])
    body.axes_op("Squeeze", "b3", "b2", [0])
    body.add("Add", ["a", "b2"], ["out"])
    function = helper.make_function(
        FUNCTION_DOMAIN, "Bias", ["a"], ["out"], body.nodes, [helper.make_opsetid("", 11)]
    )
    graph = helper.make_graph(
        main.nodes, "constants", [float_info("x", [64, 64])], [float_info("y", [64, 64])]
    )
    opsets = [helper.make_opsetid("", 11), helper.make_opsetid(FUNCTION_DOMAIN, 1)]
    return helper.make_model(graph, opset_imports=opsets, functions=[function])


def loop_model() -> onnx.ModelProto:
    """Opset 9: a Loop whose body adds EyeLike(k=1) to its accumulator through
    Unsqueeze/ReduceSum with axes attributes (the body must be upgraded too)."""
    body = Builder(9)
    body.axes_op("Unsqueeze", "acc", "acc_3d", [0])
    body.axes_op("ReduceSum", "acc_3d", "acc_2d", [0], keepdims=0)
    body.add("EyeLike", ["acc_2d"], ["eye"], k=1)
    body.add("Add", ["acc_2d", "eye"], ["acc_out"])
    body.add("Identity", ["cond"], ["cond_out"])
    bool_scalar = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
    loop_body = helper.make_graph(
        body.nodes,
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), bool_scalar,
         float_info("acc", [3, 3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         float_info("acc_out", [3, 3])],
    )  # fmt: skip
    loop = helper.make_node("Loop", ["trips", "go", "x"], ["y"], body=loop_body)
    go = numpy_helper.from_array(np.array(True), "go")
    trips = numpy_helper.from_array(np.array(3, dtype=np.int64), "trips")
    graph = helper.make_graph(
        [
            helper.make_node("Constant", [], ["go"], value=go),
            helper.make_node("Constant", [], ["trips"], value=trips),
            loop,
        ],
        "loop",
        [float_info("x", [3, 3])],
        [float_info("y", [3, 3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])


def bfloat16_eyelike_model(opset: int) -> onnx.ModelProto:
    nodes = [helper.make_node("EyeLike", ["m"], ["y"], k=1, dtype=TensorProto.BFLOAT16)]
    y = helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [3, 5])
    graph = helper.make_graph(nodes, "bf16", [float_info("m", [3, 5])], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def torch_eye_chain(opset: int) -> onnx.ModelProto:
    """torch.onnx's eye(n) chain, n = x.size(1), in the form of ``opset``."""
    b = Builder(opset)
    b.add("Shape", ["x"], ["shape"])
    index = b.const("gather_index", np.array(1, dtype=np.int64))
    b.add("Gather", ["shape", index], ["n"], axis=0)
    b.axes_op("Unsqueeze", "n", "dim", [0])
    b.add("Concat", ["dim", "dim"], ["eye_shape"], axis=0)
    zero = numpy_helper.from_array(np.array([0.0], dtype=np.float32), "zero")
    b.add("ConstantOfShape", ["eye_shape"], ["zeros"], value=zero)
    b.add("EyeLike", ["zeros"], ["eye"])
    b.add("MatMul", ["x", "eye"], ["y"])
    graph = helper.make_graph(
        b.nodes,
        "chain",
        [float_info("x", [8, 16])],
        [float_info("y", [8, 16])],
        b.initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def unsqueeze_with_axes_attribute_at_13() -> onnx.ModelProto:
    """Invalid already at 13 (axes is an input there); the upgrade cannot make it valid."""
    nodes = [helper.make_node("Unsqueeze", ["x"], ["y"], axes=[0])]
    graph = helper.make_graph(nodes, "bad", [float_info("x", [2])], [float_info("y", [1, 2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _grid_sample_nodes(x: str, out: str) -> list[onnx.NodeProto]:
    """GridSample-19 (mode "bilinear", renamed "linear" at 20) of a [3, 4] ``x``."""
    tensors = {
        "shape4": np.array([1, 1, 3, 4], dtype=np.int64),
        "shape2": np.array([3, 4], dtype=np.int64),
        "grid": np.linspace(-0.8, 0.8, 24, dtype=np.float32).reshape(1, 3, 4, 2),
    }
    constants = [
        helper.make_node("Constant", [], [name], value=numpy_helper.from_array(array, name))
        for name, array in tensors.items()
    ]
    return [
        *constants,
        helper.make_node("Reshape", [x, "shape4"], ["x4"]),
        helper.make_node("GridSample", ["x4", "grid"], ["sampled"], mode="bilinear"),
        helper.make_node("Reshape", ["sampled", "shape2"], [out]),
    ]


def attribute_reference(name: str, attr_type: int) -> onnx.AttributeProto:
    """An attribute taking the value of the function attribute of the same name."""
    reference = onnx.AttributeProto(name=name, ref_attr_name=name)
    reference.type = attr_type
    return reference


def single_input_function(
    name: str, nodes: list[onnx.NodeProto], opset: int, attributes: list[str]
) -> onnx.FunctionProto:
    """pkg.corpus::name(a) -> out, importing the default domain at ``opset``."""
    return helper.make_function(
        FUNCTION_DOMAIN,
        name,
        ["a"],
        ["out"],
        nodes,
        [helper.make_opsetid("", opset)],
        attributes,
    )


def function_with_reference(
    op: str, attr: str, opset: int, *, grid_sample: bool = False
) -> onnx.ModelProto:
    """A function whose ``op`` takes ``attr`` from the function's own attribute.

    ``grid_sample`` puts a GridSample-19 first, for which onnxscript's converter has an
    adapter (so that converter handles the body).
    """
    prefix = _grid_sample_nodes("a", "a_sampled") if grid_sample else []
    node = helper.make_node(op, ["a_sampled" if grid_sample else "a"], ["out"])
    attr_type = onnx.AttributeProto.FLOAT if op == "Shrink" else onnx.AttributeProto.INT
    node.attribute.append(attribute_reference(attr, attr_type))
    function = single_input_function("Ref", [*prefix, node], opset, [attr])
    call = helper.make_node("Ref", ["x"], ["y"], domain=FUNCTION_DOMAIN)
    value = {"Shrink": 0.5, "Cast": TensorProto.FLOAT}.get(op, 0)
    call.attribute.append(helper.make_attribute(attr, value))
    graph = helper.make_graph(
        [call], "ref", [float_info("x", [3, 4])], [float_info("y", [3, 4])]
    )
    return helper.make_model(
        graph,
        opset_imports=[
            helper.make_opsetid("", opset),
            helper.make_opsetid(FUNCTION_DOMAIN, 1),
        ],
        functions=[function],
    )


def group_normalization_model() -> onnx.ModelProto:
    """GroupNormalization-18: scale and bias per group (21 made them per channel).

    Its input is an intermediate value with no declared shape (onnxscript's adapter needs
    the channel count).
    """
    scale = numpy_helper.from_array(np.array([1.0, 2.0], dtype=np.float32), "scale")
    bias = numpy_helper.from_array(np.array([0.5, -0.5], dtype=np.float32), "bias")
    nodes = [
        helper.make_node("Relu", ["x"], ["x_relu"]),
        helper.make_node(
            "GroupNormalization", ["x_relu", "scale", "bias"], ["y"], num_groups=2
        ),
    ]
    graph = helper.make_graph(
        nodes, "gn", [float_info("x", [2, 4, 3])], [float_info("y", [2, 4, 3])], [scale, bias]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
