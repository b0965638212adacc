"""Each kind of way out of the file path, on a real model: the kind, the reason, the result.

The file path hands a model to the whole-model path for one of a few kinds of reason
(:class:`eyefold.errors.FallbackKind`); the report names the reason in words, never the
kind. Each case runs ``eyefold.proto_path.optimize_proto`` on a model that leaves for that
kind, reads the kind off the hand-over as the run makes it, and
:func:`tests.helpers.both_paths.compare_paths` checks that the result (model, report,
outputs, or error) is the one the whole-model path gives.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import inspect
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import eyefold.proto_path
from eyefold.errors import EyefoldError, FallbackKind
from eyefold.model_files.load import model_from_memory
from eyefold.options import PipelineOptions
from eyefold.pipeline import pipeline_steps, run_steps
from eyefold.proto_path import WHOLE_MODEL_STEP, optimize_proto
from eyefold.proto_path.scan import GraphIndex
from eyefold.testing import assert_same_outputs, canonical, random_inputs
from tests.helpers.both_paths import compare_paths

ROOT = Path(__file__).resolve().parents[2]
_parse = onnx.parser.parse_model


def _sample(name: str) -> Callable[[], onnx.ModelProto]:
    return lambda: onnx.load(str(ROOT / "sample_models" / f"{name}.onnx"))


def _identity_constant_in_branch() -> onnx.ModelProto:
    return _parse(
        """<ir_version: 10, opset_import: ["" : 22]>
        g (int64[2, 2] x, bool c) => (int64[2, 2] y) {
            y = If (c) <then_branch = t () => (int64[2, 2] o) {
                            k = Constant <value = int64[2, 2] {1, 0, 0, 1}> ()
                            o = MatMul (x, k) },
                        else_branch = f () => (int64[2, 2] o) { o = Identity (x) }>
        }"""
    )


# The EyeLike reads an If output no inference makes static (z keeps the If alive
# whatever is folded): its whole backward slice, the If among it, joins the
# neighbourhood. With the Mul, the core (the EyeLike and its mask reader) shows a mask,
# but the slice brings the If, which is named first.
_IF_FEEDS_EYELIKE = """<ir_version: 10, opset_import: ["" : 22]>
g (float[N, N] x, bool c) => (float[N, N] y, float[N, N] z) {
    a = If (c) <then_branch = t () => (float[N, N] o) { o = Identity (x) },
                else_branch = f () => (float[N, N] o) { o = Neg (x) }>
    e = EyeLike (a)
    y = %s
    z = Neg (a)
}"""

# The EyeLike's input (a Relu output) is declared nowhere: the inference of undeclared
# inputs would look at it, but the Mul reading the EyeLike is a mask whatever it finds.
_MASK_OF_UNDECLARED = """<ir_version: 10, opset_import: ["" : 22]>
g (float[N, N] x) => (float[N] y) {
    a = Relu (x)
    e = EyeLike (a)
    m = Mul (x, e)
    y = ReduceSum <keepdims = 0> (m, axes)
}"""


def _mask_of_undeclared() -> onnx.ModelProto:
    model = _parse(_MASK_OF_UNDECLARED)
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.array([1]), "axes"))
    return model


def _initializer_listed_as_input() -> onnx.ModelProto:
    model = _parse(
        """<ir_version: 3, opset_import: ["" : 22]>
        g (float[2, 2] x, float[2, 2] w) => (float[2, 2] y) {
            e = EyeLike (w)
            y = Add (x, e)
        }"""
    )
    w = np.arange(4, dtype=np.float32).reshape(2, 2)
    model.graph.initializer.append(onnx.numpy_helper.from_array(w, "w"))
    return model


def _sparse_initializer(opset: int) -> onnx.ModelProto:
    model = _parse(
        f"""<ir_version: 10, opset_import: ["" : {opset}]>
        g (float[2, 2] x) => (float[2, 2] y, float[2, 2] z) {{
            e = EyeLike (x)
            y = Add (x, e)
            z = Identity (s)
        }}"""
    )
    values = onnx.numpy_helper.from_array(np.array([1.0], np.float32), "s")
    indices = onnx.numpy_helper.from_array(np.array([3], np.int64), "s_indices")
    model.graph.sparse_initializer.append(
        onnx.helper.make_sparse_tensor(values, indices, [2, 2])
    )
    return model


def _read_before_defined() -> onnx.ModelProto:
    return _parse(
        """<ir_version: 10, opset_import: ["" : 22]>
        g (float[2, 2] x) => (float[2, 2] y) {
            e = EyeLike (x)
            y = Add (q, e)
        }"""
    )


def _eyelike_at_opset_8() -> onnx.ModelProto:
    return _parse(
        """<ir_version: 4, opset_import: ["" : 8]>
        g (float[3, 3] x) => (float[3, 3] y) { y = EyeLike (x) }"""
    )


def _made_up_name_taken() -> onnx.ModelProto:
    # Legalization names its Cast output y__eyefold_float, which the Identity outside owns.
    return _parse(
        """<ir_version: 10, opset_import: ["" : 22]>
        g (bool[2, 3] x) => (bool[2, 3] y, bool[2, 3] y__eyefold_float) {
            y = EyeLike (x)
            y__eyefold_float = Identity (x)
        }"""
    )


_HOLDER = "a node holding subgraphs is in an EyeLike's neighbourhood"
_MASK = "an EyeLike is used as a mask (Mul), which the diagonal rules look around"


@dataclasses.dataclass(frozen=True)
class Case:
    """A model that leaves the file path, and what for."""

    build: Callable[[], onnx.ModelProto]
    kind: FallbackKind
    reason: str
    options: PipelineOptions = dataclasses.field(default_factory=PipelineOptions)
    runs: bool = True  # random inputs of the model as given run on the result
    refused: bool = False  # the whole-model path refuses the model (its precise error)


CASES = {
    "eyelike-in-subgraph": Case(
        _sample("if_branch"), FallbackKind.OUT_OF_REACH, "an EyeLike sits in a subgraph"
    ),
    "identity-constant-in-subgraph": Case(
        _identity_constant_in_branch,
        FallbackKind.OUT_OF_REACH,
        "an identity-shaped constant sits in a subgraph",
    ),
    "eyelike-in-function": Case(
        _sample("function_eye"),
        FallbackKind.OUT_OF_REACH,
        "an EyeLike sits in a model-local function",
    ),
    "holder-in-neighbourhood": Case(
        lambda: _parse(_IF_FEEDS_EYELIKE % "Identity (e)"), FallbackKind.OUT_OF_REACH, _HOLDER
    ),
    "holder-before-mask": Case(
        lambda: _parse(_IF_FEEDS_EYELIKE % "Mul (x, e)"), FallbackKind.OUT_OF_REACH, _HOLDER
    ),
    "mask": Case(_sample("dynamo_diagonal"), FallbackKind.OUT_OF_REACH, _MASK),
    "mask-of-undeclared-input": Case(_mask_of_undeclared, FallbackKind.OUT_OF_REACH, _MASK),
    "initializer-listed-as-input": Case(
        _initializer_listed_as_input,
        FallbackKind.INDIVISIBLE_GRAPH,
        "an initializer is also a graph input",
    ),
    "sparse-initializer": Case(
        lambda: _sparse_initializer(22),
        FallbackKind.INDIVISIBLE_GRAPH,
        "the graph holds sparse initializers",
    ),
    "read-before-defined": Case(
        _read_before_defined,
        FallbackKind.INDIVISIBLE_GRAPH,
        "'q' is read before it is defined",
        runs=False,
    ),
    "pinned-input-shapes": Case(
        _sample("dynamic_batch"),
        FallbackKind.WHOLE_MODEL_OPTION,
        "input shapes are pinned on the whole model",
        PipelineOptions(input_shapes={"x": [2, 6]}),
        runs=False,  # the random batch is not the pinned one
    ),
    # The same cause as "sparse-initializer", met by the upgrade first: the same kind.
    "upgrade-of-sparse-initializer": Case(
        lambda: _sparse_initializer(13),
        FallbackKind.INDIVISIBLE_GRAPH,
        "the opset 13 -> 22 upgrade: the graph holds sparse initializers",
    ),
    "upgrade-of-eyelike-before-opset-9": Case(
        _eyelike_at_opset_8,
        FallbackKind.UPGRADE,
        "the opset 8 -> 22 upgrade: an EyeLike sits in a scope older than opset 9",
        refused=True,
    ),
    "made-up-name-taken": Case(
        _made_up_name_taken,
        FallbackKind.WRITE_BACK,
        "the result cannot be spliced back (the name 'y__eyefold_float' is taken outside "
        "the neighbourhood)",
        PipelineOptions(target_runtime="onnxruntime", fold=False),
    ),
}


def _loaded_and_optimized(model: onnx.ModelProto, options: PipelineOptions) -> onnx.ModelProto:
    """The onnx-ir route on ``model`` read as eyefold reads one (sparse tensors made dense)."""
    working = model_from_memory(copy.deepcopy(model))
    run_steps(working, pipeline_steps(options))
    return ir.serde.serialize_model(working)


def _hand_overs(
    monkeypatch: pytest.MonkeyPatch, looking: Callable[[], None] = lambda: None
) -> list[tuple[FallbackKind, str]]:
    """The kind and reason of each hand-over to the whole-model path, as runs make them.

    ``looking`` runs at each hand-over, before the whole-model path does anything.
    """
    handed: list[tuple[FallbackKind, str]] = []
    whole_model = eyefold.proto_path._whole_model
    signature = inspect.signature(whole_model)

    def seeing(*args: Any, **kwargs: Any) -> Any:
        given = signature.bind(*args, **kwargs).arguments
        handed.append((given["kind"], given["reason"]))
        looking()
        return whole_model(*args, **kwargs)

    monkeypatch.setattr(eyefold.proto_path, "_whole_model", seeing)
    return handed


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_way_out_has_its_kind_and_the_whole_model_result(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = CASES[name]
    model = case.build()
    with monkeypatch.context() as patch:
        handed = _hand_overs(patch)
        if case.refused:  # the whole-model path's precise error, compared below
            with pytest.raises(EyefoldError):
                optimize_proto(copy.deepcopy(model), case.options)
        else:
            run = optimize_proto(copy.deepcopy(model), case.options)
            assert run.record.route == {"whole_model": case.reason}
            assert f"{WHOLE_MODEL_STEP}: {case.reason}" in [s.name for s in run.record.steps]
    assert handed == [(case.kind, case.reason)]
    if model.graph.sparse_initializer:
        # compare_paths deserializes plainly, which drops sparse initializers.
        expected = _loaded_and_optimized(model, case.options)
        assert canonical(run.model) == canonical(expected)
        assert_same_outputs(expected, run.model, random_inputs(model, seed=3))
    else:
        compare_paths(model, case.options, run=case.runs)


def test_the_kinds_are_all_reached() -> None:
    assert {case.kind for case in CASES.values()} == set(FallbackKind)


def test_the_neighbourhood_path_hands_nothing_over(monkeypatch: pytest.MonkeyPatch) -> None:
    handed = _hand_overs(monkeypatch)
    run = optimize_proto(_sample("static_matmul")(), PipelineOptions())
    assert not handed and "neighbourhood" in run.record.route


def _count_inferences(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = eyefold.proto_path.infer_undeclared_inputs

    def counted(*args: object, **kwargs: object):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(eyefold.proto_path, "infer_undeclared_inputs", counted)
    return calls


@pytest.mark.parametrize(
    ("case", "reason", "inferred"),
    [("mask-of-undeclared-input", _MASK, False), ("holder-before-mask", _HOLDER, True)],
)
def test_a_mask_no_inference_can_change_is_found_before_the_inference(
    case: str, reason: str, inferred: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A mask the core of the neighbourhood reads is read whatever the inference of
    # undeclared inputs finds, unless a slice it may add brings a node holding subgraphs
    # (named first): only then does the inference run before the whole-model path.
    calls = _count_inferences(monkeypatch)
    handed = _hand_overs(monkeypatch)
    run = optimize_proto(CASES[case].build(), PipelineOptions())
    assert handed == [(FallbackKind.OUT_OF_REACH, reason)]
    assert run.record.route["whole_model"] == reason
    assert bool(calls) == inferred


@pytest.mark.parametrize("case", ["eyelike-in-subgraph", "mask", "made-up-name-taken"])
def test_the_scan_is_freed_before_the_whole_model_is_read(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the file path built (its index of every node) is in no reference cycle: it
    # goes when the hand-over is caught, before the whole model takes its place in memory.
    # Collections are off, and the look comes before the one a write-back's hand-over
    # makes (gc.collect collects even then): each case sees reference counting alone.
    scans: list[weakref.ref[GraphIndex]] = []
    alive: list[bool] = []
    scan = eyefold.proto_path.scan_model

    def kept_scan(*args: Any) -> GraphIndex:
        index = scan(*args)
        scans.append(weakref.ref(index))
        return index

    monkeypatch.setattr(eyefold.proto_path, "scan_model", kept_scan)
    handed = _hand_overs(monkeypatch, lambda: alive.extend(f() is not None for f in scans))
    gc.disable()
    try:
        optimize_proto(CASES[case].build(), CASES[case].options)
    finally:
        gc.enable()
    assert [kind for kind, _ in handed] == [CASES[case].kind]
    assert alive == [False] * len(scans) and scans
