"""Fixes around onnx's version converter where its adapters would change a model's results.

Each step was found by running onnx's backend test models
(``tests/corpus/test_backend_corpus.py``) and small models built in
``tests/upgrade/test_upgrade_opset.py`` against onnxruntime and onnx's reference evaluator,
and by reading the adapters registered in onnx's ``onnx/version_converter/convert.h``:

* opset 6 -> 7 is done here, not by onnx: its adapters for Add/Sub/Mul/Div/Pow
  (``BroadcastForwardCompatibility``) and Gemm (``Gemm_6_7``) need every input shape to be
  known and static (a symbolic batch dim is refused), and put a ``broadcast=1, axis=a``
  operand at axis 0 instead of ``a`` (a per-channel ``[C]`` bias on ``[N, C, H, W]`` then
  gives other numbers when ``N == C``); ``PRelu`` is registered as compatible although its
  ``[C]`` slope is per channel at 6 and broadcast against the last axis from 7; the
  comparison, logical and recurrent ops have no 6 -> 7 adapter; and a BatchNormalization-6
  without ``is_test`` (training mode) silently becomes a test-mode one;
* Scan-8 -> 9 (``Scan_8_9``) drops the batch axis from the declared types only, so the
  converted Scan iterates over the batch: refused;
* Resize-10 and Upsample -> Resize-11 (``Resize_10_11``, ``Upsample_9_10``) leave
  ``coordinate_transformation_mode`` at its ``"half_pixel"`` default: set explicitly.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import onnx

from eyefold.core.domains import DEFAULT_DOMAINS
from eyefold.core.proto_subgraphs import BodyColumns
from eyefold.errors import UpgradeError
from eyefold.upgrade.proto_graphs import iter_proto_graphs

__all__ = [
    "LEGACY_MIN_OPSET",
    "convert_opset_6_to_7",
    "keep_resize_10_coordinates",
    "refuse_lossy_adapters",
    "upsample_inputs",
]

# The oldest default-domain opset eyefold upgrades: onnx has no adapter for Cast and Tile
# from 5 to 6 (convert.h), and no runtime at hand runs opset 1..5 models to compare with.
LEGACY_MIN_OPSET = 6

# Ops whose version 1 or 6 broadcast B onto A with ``broadcast`` and ``axis`` attributes.
_LEGACY_BROADCAST_OPS = frozenset(
    {"Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less"}
)
_RECURRENT_OPS = frozenset({"GRU", "LSTM", "RNN"})


def _refusal(where: str, node: onnx.NodeProto, source: int, why: str) -> UpgradeError:
    label = repr(node.name) if node.name else f"(unnamed {node.op_type})"
    return UpgradeError(
        f"{where}: node {label} ({node.op_type}) at opset {source}: {why};"
        f" run with upgrade=False to keep opset {source}"
    )


def _attribute(node: onnx.NodeProto, name: str) -> onnx.AttributeProto | None:
    return next((a for a in node.attribute if a.name == name), None)


def _remove_attributes(node: onnx.NodeProto, *names: str) -> None:
    kept = [a for a in node.attribute if a.name not in names]
    del node.attribute[:]
    node.attribute.extend(kept)


def _ranks(model: onnx.ModelProto) -> dict[str, int]:
    """Value name -> rank, where onnx's shape inference (or a declaration) knows it."""
    try:
        typed = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # onnx raises several types; unknown ranks are refused below
        typed = model
    ranks: dict[str, int] = {}
    for graph in iter_proto_graphs(typed.graph):
        for info in itertools.chain(graph.input, graph.value_info, graph.output):
            tensor_type = info.type.tensor_type
            if info.type.HasField("tensor_type") and tensor_type.HasField("shape"):
                ranks[info.name] = len(tensor_type.shape.dim)
        ranks.update((t.name, len(t.dims)) for t in graph.initializer)
    return ranks


class _Opset7Rewriter:
    """Rewrites the nodes of one weightless opset-6 model into their opset-7 form."""

    def __init__(self, model: onnx.ModelProto, where: str) -> None:
        self.where = where
        self.ranks = _ranks(model)
        self.names = {name for g in iter_proto_graphs(model.graph) for name in _value_names(g)}

    def trailing_unsqueeze(self, name: str, rank: int, wanted: int) -> onnx.NodeProto:
        """Unsqueeze-1 (axes attribute, the opset-7 form) giving ``name`` rank ``wanted``."""
        output = next(
            f"{name}_eyefold_rank{wanted}_{i}"
            for i in itertools.count()
            if f"{name}_eyefold_rank{wanted}_{i}" not in self.names
        )
        self.names.add(output)
        self.ranks[output] = wanted
        return onnx.helper.make_node(
            "Unsqueeze", [name], [output], axes=list(range(rank, wanted))
        )

    def rewrite(self, node: onnx.NodeProto) -> list[onnx.NodeProto]:
        """The nodes replacing ``node`` (new ones first); ``node`` is changed in place."""
        if node.domain not in DEFAULT_DOMAINS:
            return [node]
        if node.op_type in _LEGACY_BROADCAST_OPS:
            return [*self._broadcast(node), node]
        if node.op_type == "PRelu":
            return [*self._prelu(node), node]
        if node.op_type == "Gemm":
            # Gemm-6 broadcast=1 is unidirectional numpy broadcasting of C; broadcast=0
            # needs C of shape [M, N]. Gemm-7 broadcasts C either way (Gemm_6_7 only checks).
            _remove_attributes(node, "broadcast")
        elif node.op_type in ("BatchNormalization", "Dropout"):
            self._is_test(node)
        elif node.op_type == "Upsample":
            self._upsample(node)
        elif node.op_type in _RECURRENT_OPS:
            # Version 1 (GRU 3) made the Y output optional with output_sequence=0; Y holds
            # the same values either way, and version 7 just makes it optional.
            _remove_attributes(node, "output_sequence")
        return [node]

    def _broadcast(self, node: onnx.NodeProto) -> list[onnx.NodeProto]:
        """Legacy ``broadcast=1, axis=a`` -> numpy broadcasting (B gets trailing 1 dims).

        onnx's ``BroadcastForwardCompatibility`` appends rank(A) - rank(B) dims instead of
        rank(A) - a - rank(B), which aligns B at axis 0.
        """
        broadcast = _attribute(node, "broadcast")
        axis = _attribute(node, "axis")
        _remove_attributes(node, "broadcast", "axis")
        if broadcast is None or broadcast.i == 0 or axis is None or len(node.input) < 2:
            return []  # same shapes, or B aligned with A's last axes: numpy's rule
        rank_a = self.ranks.get(node.input[0])
        rank_b = self.ranks.get(node.input[1])
        if rank_a is None or rank_b is None:
            why = "broadcasting its second input from an axis needs both input ranks"
            raise _refusal(self.where, node, 6, f"{why}, which are unknown")
        start = axis.i + rank_a if axis.i < 0 else axis.i
        if start + rank_b >= rank_a:
            return []
        unsqueeze = self.trailing_unsqueeze(node.input[1], rank_b, rank_a - start)
        node.input[1] = unsqueeze.output[0]
        return [unsqueeze]

    def _prelu(self, node: onnx.NodeProto) -> list[onnx.NodeProto]:
        """PRelu-6's 1-D slope is per channel (axis 1); from 7 it broadcasts numpy-style.

        onnx registers ``CompatibleAdapter("PRelu", 6, 7)``, which keeps the slope as is.
        """
        rank_x = self.ranks.get(node.input[0])
        rank_slope = self.ranks.get(node.input[1])
        if rank_slope is not None and rank_slope != 1:
            return []  # a scalar, or a slope already shaped like [C, 1, 1]
        if rank_x is not None and rank_x <= 2:
            return []  # [N, C] input: the channel axis is the last one
        if rank_x is None or rank_slope is None:
            raise _refusal(
                self.where, node, 6, "its slope is per channel and the input's or the"
                " slope's rank is unknown, so it cannot be aligned with axis 1"
            )  # fmt: skip
        unsqueeze = self.trailing_unsqueeze(node.input[1], 1, rank_x - 1)
        node.input[1] = unsqueeze.output[0]
        return [unsqueeze]

    def _is_test(self, node: onnx.NodeProto) -> None:
        """Test mode becomes the only mode (Dropout) or the one-output form (BatchNorm)."""
        is_test = _attribute(node, "is_test")
        _remove_attributes(node, "is_test")
        outputs = [name for name in node.output if name]
        training_outputs = 5 if node.op_type == "BatchNormalization" else None
        if is_test is not None and is_test.i != 0:
            if len(outputs) == 1 or node.op_type == "Dropout":
                return
            why = "it lists training outputs in test mode, which opset 7 reads as training"
        elif len(outputs) == training_outputs:
            return  # training mode with every training output, as in BatchNormalization-7
        else:
            why = "without is_test=1 it runs in training mode, which opset 7 cannot express"
        raise _refusal(self.where, node, 6, why)

    def _upsample(self, node: onnx.NodeProto) -> None:
        """Upsample-1 (height_scale, width_scale) -> Upsample-7 (scales), nearest only.

        Upsample-1's ``bilinear`` has no runtime at hand to compare with; refused.
        """
        mode = _attribute(node, "mode")
        height, width = _attribute(node, "height_scale"), _attribute(node, "width_scale")
        if mode is not None and mode.s != b"nearest":
            raise _refusal(self.where, node, 6, f"mode {mode.s.decode()!r} is not converted")
        if height is None or width is None:
            return  # already in the version-7 form
        scales = [1.0, 1.0, height.f, width.f]
        _remove_attributes(node, "height_scale", "width_scale")
        node.attribute.append(onnx.helper.make_attribute("scales", scales))


def _value_names(graph: onnx.GraphProto) -> set[str]:
    names = {v.name for v in itertools.chain(graph.input, graph.output, graph.value_info)}
    names.update(t.name for t in graph.initializer)
    names.update(name for node in graph.node for name in node.output)
    return names


def convert_opset_6_to_7(model: onnx.ModelProto, where: str) -> onnx.ModelProto:
    """A copy of the opset-6 ``model`` in the form of opset 7, importing opset 7.

    Raises:
        UpgradeError: a node cannot be written in the opset-7 form with the same results.
    """
    converted = onnx.ModelProto()
    converted.CopyFrom(model)
    rewriter = _Opset7Rewriter(converted, where)
    # Lazily walked: each graph's subgraphs are found in the nodes it holds after its rewrite.
    for graph in iter_proto_graphs(converted.graph):
        nodes = [new for node in graph.node for new in rewriter.rewrite(node)]
        del graph.node[:]
        graph.node.extend(nodes)
    for opset in converted.opset_import:
        if opset.domain in DEFAULT_DOMAINS:
            opset.version = 7
    return converted


def refuse_lossy_adapters(graph: onnx.GraphProto, source: int, where: str) -> None:
    """Refuses the ops whose onnx adapter between ``source`` and 9 changes their results.

    Raises:
        UpgradeError: names the first such node.
    """
    if source > 8:
        return
    for subgraph in iter_proto_graphs(graph):
        for node in subgraph.node:
            if node.op_type == "Scan" and node.domain in DEFAULT_DOMAINS:
                raise _refusal(
                    where, node, source, "Scan-8 has a batch axis that Scan-9 lacks, and"
                    " onnx's Scan_8_9 adapter drops it from the types, not from the data"
                )  # fmt: skip


def upsample_inputs(bodies: Iterable[BodyColumns]) -> set[tuple[str, str]]:
    """(data, scales) input names of every Upsample in ``bodies`` (a body and its subgraphs).

    Upsample only enlarges (scales >= 1).
    """
    return {
        (node.input[0], node.input[1])
        for body in bodies
        for node in body.with_op("Upsample")
        if node.domain in DEFAULT_DOMAINS and len(node.input) > 1
    }


def _constant_scales(graph: onnx.GraphProto, name: str) -> list[float] | None:
    for initializer in graph.initializer:
        if initializer.name == name:
            return [float(s) for s in onnx.numpy_helper.to_array(initializer).ravel()]
    for node in graph.node:
        if node.op_type == "Constant" and list(node.output) == [name]:
            value = next((a for a in node.attribute if a.name == "value"), None)
            if value is not None:
                return [float(s) for s in onnx.numpy_helper.to_array(value.t).ravel()]
    return None


def keep_resize_10_coordinates(
    body: BodyColumns, source: int, where: str, upsamples: set[tuple[str, str]]
) -> None:
    """Keeps the coordinate mapping of Resize-10 and Upsample in the Resize-11+ they become.

    Resize-10 and Upsample map output index ``y`` to input coordinate ``y / scale``
    (onnxruntime rounds nearest per axis down when enlarging, up when shrinking). Resize-11
    made that mapping an attribute whose default is ``"half_pixel"``, and onnx's adapter
    leaves it unset, which changes linear results; so the mapping is set explicitly.
    """
    if source >= 11:
        return
    graph = body.graph
    for node in body.with_op("Resize"):
        if any(a.name == "coordinate_transformation_mode" for a in node.attribute):
            continue
        mode = next((a.s.decode() for a in node.attribute if a.name == "mode"), "nearest")
        node.attribute.append(
            onnx.helper.make_attribute("coordinate_transformation_mode", "asymmetric")
        )
        if mode != "nearest":
            continue
        scales_name = node.input[2] if len(node.input) > 2 else ""
        scales = _constant_scales(graph, scales_name)
        if (node.input[0], scales_name) in upsamples or (scales and min(scales) >= 1):
            rounding = "floor"
        elif scales and max(scales) <= 1:
            rounding = "ceil"
        else:
            raise UpgradeError(
                f"{where}: nearest Resize of {node.input[0]!r} at opset {source} rounds down"
                " on enlarged axes and up on shrunk ones; with scales that are not constant,"
                " or that enlarge some axes and shrink others, no Resize-11+ node matches it;"
                f" run with upgrade=False to keep opset {source}"
            )
        node.attribute.append(onnx.helper.make_attribute("nearest_mode", rounding))
