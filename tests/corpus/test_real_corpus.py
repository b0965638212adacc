"""The real-export corpus: every manifest entry of sample_models/real/ with an ``eyelike`` key.

Each such entry classifies the export's EyeLike nodes from the library's source, not from
eyefold's output: ``static`` (the exporter wrote every dim the shape needs: it must fold by
default), ``pinnable`` (the shape follows from input dims: it must fold once its ``pins``
are given as ``--input-shape``) or ``dynamic`` (a runtime value: it must never fold). And
nothing eyefold writes may be wrong or run on fewer runtimes than the original: the default
output, the pinned one and the ``--target-runtime tract`` one each run, on onnxruntime,
OpenVINO and tract, wherever the original runs, and match the framework's outputs
(``reference``) within the entry's ``tolerance``.

The advice is held to the source too: a pinnable node left by default says it was lost at
an input its pins name, and a static node's report names, as the inputs whose declared
shape it bakes in, exactly its ``from_inputs``.

Manifest keys read here, besides the citation:
- ``eyelike``: ``{node name: {"class", "why", "pins" (pinnable), "from_inputs" (static,
  optional: the inputs whose declared static dims its shape reads), "known_gap"?}}``;
- ``original_fails``: ``{runtime: one line}``, where the original itself does not run (then
  nothing is asserted of the outputs there; that it fails is);
- ``identities``: how many dynamo ``Range/Equal`` pairs the source makes (the report
  counts the square ones as identities);
- ``known_gap``: where eyefold falls short, one line per check expected to fail. On a node:
  ``{"fold" | "advice" | "from_inputs": line}`` (a plain string is the fold's). On the entry:
  ``{"<variant>/<runtime>": line}``, e.g. ``{"pinned/tract": "..."}``. All are strict
  expected failures, so a fix is noticed.
"""

from __future__ import annotations

import dataclasses
import json
from functools import cache
from pathlib import Path

import numpy as np
import onnx
import pytest

import eyefold
from eyefold.runtime.runners import RunError, missing_reason, runner_for

# Every corpus model on every runtime, growing with the corpus: run before a merge, not in
# the daily loop.
pytestmark = pytest.mark.slow

REAL = Path(__file__).resolve().parents[2] / "sample_models" / "real"
RUNTIMES = ("onnxruntime", "openvino", "tract")
VARIANTS = ("default", "pinned", "tract")
CLASSES = ("static", "pinnable", "dynamic")


def _corpus() -> dict[str, dict]:
    manifest = json.loads((REAL / "manifest.json").read_text())
    return {
        name: entry
        for name, entry in sorted(manifest.items())
        if isinstance(entry, dict) and "eyelike" in entry
    }


CORPUS = _corpus()


def _pins(entry: dict) -> list[str]:
    """The union of the pinnable nodes' pins, each input pinned once."""
    pins: dict[str, str] = {}
    for node in entry["eyelike"].values():
        for pin in node.get("pins", []):
            name = pin.rsplit(":", 1)[0]
            assert pins.setdefault(name, pin) == pin, (
                f"two pins of {name}: {pins[name]}, {pin}"
            )
    return sorted(pins.values())


def _options(entry: dict, variant: str) -> dict[str, object]:
    return {
        "default": {},
        "pinned": {"input_shapes": _pins(entry)},
        "tract": {"target_runtime": "tract"},
    }[variant]


@dataclasses.dataclass(frozen=True)
class _Output:
    path: Path
    report: eyefold.Report


@pytest.fixture(scope="module")
def optimized(tmp_path_factory: pytest.TempPathFactory):
    """``optimized(name, variant)``: eyefold's output file and report, made once per module."""
    folder = tmp_path_factory.mktemp("corpus")

    @cache
    def make(name: str, variant: str) -> _Output:
        result = eyefold.optimize_with_report(
            onnx.load(REAL / f"{name}.onnx"), **_options(CORPUS[name], variant)
        )
        path = folder / f"{name}.{variant}.onnx"
        onnx.save(result.model, path)
        return _Output(path, result.report)

    return make


def _feeds(name: str, model_path: Path) -> dict[str, np.ndarray]:
    """The committed inputs in graph input order (tract and OpenVINO feed by position)."""
    arrays = dict(np.load(REAL / f"{name}.inputs.npz"))
    order = [
        value.name for value in onnx.load(model_path, load_external_data=False).graph.input
    ]
    assert sorted(order) == sorted(arrays), f"{name}: inputs {order}, feeds {sorted(arrays)}"
    return {key: arrays[key] for key in order}


def _assert_matches_reference(name: str, model_path: Path, got: list[np.ndarray]) -> None:
    entry = CORPUS[name]
    want = dict(np.load(REAL / entry["reference"]))
    names = [
        value.name for value in onnx.load(model_path, load_external_data=False).graph.output
    ]
    assert sorted(names) == sorted(want), f"outputs {names}, reference {sorted(want)}"
    for output, actual in zip(names, got, strict=True):
        expected = want[output]
        actual = np.asarray(actual)
        assert actual.shape == expected.shape, (output, actual.shape, expected.shape)
        if expected.dtype.kind in "biu":
            np.testing.assert_array_equal(actual, expected, err_msg=output)
        else:
            np.testing.assert_allclose(
                actual.astype(np.float64),
                expected.astype(np.float64),
                rtol=0,
                atol=entry["tolerance"],
                equal_nan=True,
                err_msg=output,
            )


@cache
def _run(runtime: str, model_path: Path, name: str) -> list[np.ndarray] | RunError:
    """The runtime's outputs, or the error it failed with (kept: asked again, not rerun)."""
    try:
        return runner_for(runtime)(str(model_path), _feeds(name, model_path))
    except RunError as error:
        return error


def _need(runtime: str) -> None:
    reason = missing_reason(runtime)
    if reason is not None:
        pytest.skip(reason)


def _node_gaps(facts: dict) -> dict[str, str]:
    gaps = facts.get("known_gap", {})
    return {"fold": gaps} if isinstance(gaps, str) else gaps


def _node_cases(check: str, classes: tuple[str, ...], key: str | None = None) -> list:
    """One case per node of ``classes`` (having ``key``, if given), xfailed on its gap."""
    cases = []
    for name, entry in CORPUS.items():
        for node, facts in sorted(entry["eyelike"].items()):
            if facts["class"] not in classes or (key is not None and key not in facts):
                continue
            gap = _node_gaps(facts).get(check)
            marks = [pytest.mark.xfail(strict=True, reason=gap)] if gap else []
            cases.append(pytest.param(name, node, id=f"{name}:{node}", marks=marks))
    return cases


def _outcome(optimized, name: str, variant: str, node: str):
    return next(n for n in optimized(name, variant).report.nodes if n.name == node)


@pytest.mark.parametrize(("name", "node"), _node_cases("fold", ("static", "pinnable")))
def test_known_eyelike_folds(optimized, name: str, node: str) -> None:
    """A static node folds by default; a pinnable one folds with exactly its pins."""
    facts = CORPUS[name]["eyelike"][node]
    variant = "default" if facts["class"] == "static" else "pinned"
    if facts["class"] == "pinnable":
        assert facts["pins"], "a pinnable node names its pins"
    outcome = _outcome(optimized, name, variant, node)
    assert outcome.action == "folded", outcome.reason


@pytest.mark.parametrize(
    ("name", "node"), _node_cases("from_inputs", ("static",), "from_inputs")
)
def test_static_fold_bakes_in_only_the_inputs_its_shape_reads(
    optimized, name: str, node: str
) -> None:
    """The inputs a fold says it rests on ("bakes in the declared shape of input X") are
    those whose declared static dims the source's size reads, and no other."""
    outcome = _outcome(optimized, name, "default", node)
    assert outcome.action == "folded", outcome.reason
    assert sorted(outcome.from_inputs) == sorted(CORPUS[name]["eyelike"][node]["from_inputs"])


@pytest.mark.parametrize(("name", "node"), _node_cases("advice", ("pinnable",)))
def test_unpinned_node_says_which_input_to_pin(optimized, name: str, node: str) -> None:
    """Left by default, a pinnable node was lost at an input its pins name, and the reason
    suggests --input-shape."""
    outcome = _outcome(optimized, name, "default", node)
    assert outcome.action != "folded"
    pinned = {pin.rsplit(":", 1)[0] for pin in CORPUS[name]["eyelike"][node]["pins"]}
    assert outcome.shape_lost is not None, outcome.reason
    assert outcome.shape_lost["value"] in pinned, outcome.reason
    assert "--input-shape" in outcome.reason


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_every_eyelike_is_classified_and_reported(optimized, name: str) -> None:
    """The manifest classifies every EyeLike of the export, eyefold reports each one, and
    none classified dynamic is folded, pinned or not."""
    entry = CORPUS[name]
    model = onnx.load(REAL / f"{name}.onnx")
    in_model = sorted(n.name for n in _all_nodes(model.graph) if n.op_type == "EyeLike")
    assert sorted(entry["eyelike"]) == in_model
    assert all(facts["class"] in CLASSES for facts in entry["eyelike"].values())
    for variant in ("default", "pinned"):
        outcomes = {n.name: n.action for n in optimized(name, variant).report.nodes}
        assert sorted(outcomes) == in_model, variant
        for node, facts in entry["eyelike"].items():
            if facts["class"] == "dynamic":
                assert outcomes[node] != "folded", (variant, node)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_pins_are_the_committed_inputs_shapes(name: str) -> None:
    """A pin fixes a whole input: it must be the shape of the feeds the outputs are run on."""
    feeds = _feeds(name, REAL / f"{name}.onnx")
    for pin in _pins(CORPUS[name]):
        input_name, dims = pin.rsplit(":", 1)
        assert [int(d) for d in dims.split(",")] == list(feeds[input_name].shape), pin


def _range_pairs(name: str) -> list[tuple[onnx.NodeProto, onnx.NodeProto]]:
    """The two ``Range`` nodes of each ``Equal`` that compares two (one unsqueezed): how
    dynamo writes ``torch.eye(n, m)``."""
    graph = onnx.load(REAL / f"{name}.onnx").graph
    producers = {out: node for node in _all_nodes(graph) for out in node.output}

    def range_of(value: str) -> onnx.NodeProto | None:
        node = producers.get(value)
        while node is not None and node.op_type in ("Unsqueeze", "Reshape", "Cast"):
            node = producers.get(node.input[0])
        return node if node is not None and node.op_type == "Range" else None

    pairs = []
    for node in _all_nodes(graph):
        if node.op_type == "Equal":
            first, second = (range_of(value) for value in node.input)
            if first is not None and second is not None:
                pairs.append((first, second))
    return pairs


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_identities_count_the_range_equal_pairs(name: str) -> None:
    """``identities``: the ``Equal`` nodes that compare two ``Range``."""
    assert len(_range_pairs(name)) == CORPUS[name].get("identities", 0)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_report_counts_the_square_identities(optimized, name: str) -> None:
    """The report counts dynamo's Range/Equal identities apart from the EyeLike nodes: the
    square ones, whose two Ranges count to the same n (a ``torch.eye(n, n + 1)`` is none)."""
    square = sum(list(a.input) == list(b.input) for a, b in _range_pairs(name))
    found = optimized(name, "default").report.extra.get("identities", {}).get("found", 0)
    assert found == square


def _all_nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    nodes = []
    for node in graph.node:
        nodes.append(node)
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                nodes.extend(_all_nodes(attribute.g))
            for sub in attribute.graphs:
                nodes.extend(_all_nodes(sub))
    return nodes


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_original_runs_where_the_manifest_says(name: str, runtime: str) -> None:
    """The original matches its reference, or fails where ``original_fails`` records it."""
    _need(runtime)
    path = REAL / f"{name}.onnx"
    result = _run(runtime, path, name)
    expected_failure = CORPUS[name].get("original_fails", {}).get(runtime)
    if expected_failure is not None:
        assert isinstance(result, RunError), f"the original runs on {runtime} now"
        return
    assert not isinstance(result, RunError), f"{runtime}: {result}"
    _assert_matches_reference(name, path, result)


def _run_cases() -> list:
    cases = []
    for name, entry in CORPUS.items():
        gaps = entry.get("known_gap", {})
        assert isinstance(gaps, dict), (
            f"{name}: an entry's known_gap is {{'variant/runtime': line}}"
        )
        for variant in VARIANTS:
            if variant == "pinned" and not _pins(entry):
                continue
            for runtime in RUNTIMES:
                key = f"{variant}/{runtime}"
                marks = (
                    [pytest.mark.xfail(strict=True, reason=gaps[key])] if key in gaps else []
                )
                cases.append(
                    pytest.param(name, variant, runtime, id=f"{name}-{key}", marks=marks)
                )
    return cases


@pytest.mark.parametrize(("name", "variant", "runtime"), _run_cases())
def test_output_runs_wherever_the_original_runs(
    optimized, name: str, variant: str, runtime: str
) -> None:
    """Each output runs where the original runs, with the framework's outputs."""
    _need(runtime)
    if runtime in CORPUS[name].get("original_fails", {}):
        pytest.skip(f"the original does not run on {runtime}")
    path = optimized(name, variant).path
    result = _run(runtime, path, name)
    assert not isinstance(result, RunError), f"{runtime}: {result}"
    _assert_matches_reference(name, path, result)
