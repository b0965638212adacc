"""Hostile files through the command line: one clear error, nothing written, nothing changed.

Every file in the corpus is broken on purpose (garbage bytes, bad structure, bad EyeLike
nodes, unsafe or broken external data). For each, ``eyefold optimize`` and ``eyefold
inspect`` must exit 1 with exactly one stderr line ``eyefold: error: ...`` naming the
problem (and the node or tensor), print no traceback, create no output file, leave the
input files byte-identical and finish in bounded time.

The whole corpus runs in-process through ``eyefold.cli.main`` (process startup would
dominate); a representative subset, and every case that could crash the interpreter, also
runs as a real ``python -m eyefold`` subprocess. A corruption fuzzer flips and truncates
the sample models (fixed seed, bounded count) and runs them in one worker subprocess, so
a crash would be caught and attributed to its file instead of killing the test run.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import hashlib
import io
import json
import os
import pathlib
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import eyefold
from eyefold.cli import main
from eyefold.core.onnx_safety import defuse_eyelike_dtype
from eyefold.testing import check_model_safely

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "sample_models"
SAMPLE_FILES = sorted(SAMPLES.glob("*.onnx"))
SUBPROCESS_TIMEOUT_S = 120
CORRUPTED_FILES = 150

# The conftest ``external_data_model`` fixture: write(folder, location, **fields) -> path.
Writer = Callable[..., pathlib.Path]


def _model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto] | None = None,
    outputs: list[onnx.ValueInfoProto] | None = None,
    initializers: list[onnx.TensorProto] | None = None,
    *,
    opset: int = 22,
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "hostile",
        [_info("x", [4, 4])] if inputs is None else inputs,
        [_info("y", None)] if outputs is None else outputs,
        initializers or [],
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10
    )


def _info(name: str, dims: list[int] | None, elem: int = TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, dims)


def _eye(inputs: list[str] | None = None, outputs: list[str] | None = None, **attrs):
    return helper.make_node(
        "EyeLike", ["x"] if inputs is None else inputs, outputs or ["y"], name="eye", **attrs
    )


def _write(folder: pathlib.Path, model: onnx.ModelProto | bytes) -> pathlib.Path:
    path = folder / "model.onnx"
    path.write_bytes(model if isinstance(model, bytes) else model.SerializeToString())
    return path


def _deep_if_bytes(depth: int) -> bytes:
    """A model with ``depth`` nested If nodes, encoded by hand.

    The protobuf runtime refuses to build (or parse) messages nested this deep, so the
    wire format is written directly: a GraphProto inside an AttributeProto inside a
    NodeProto, ``depth`` times.
    """

    def field(number: int, payload: bytes) -> bytes:
        return _varint(number << 3 | 2) + _varint(len(payload)) + payload

    inner = helper.make_graph(
        [_eye(["x"], ["b0"])], "leaf", [], [_info("b0", [4, 4])]
    ).SerializeToString()
    for level in range(depth):
        out = f"b{level + 1}".encode()
        else_branch = helper.make_graph(
            [helper.make_node("Identity", ["x"], [f"e{level}"])],
            f"else{level}",
            [],
            [_info(f"e{level}", [4, 4])],
        ).SerializeToString()
        node = field(1, b"c") + field(2, out) + field(3, f"if{level}".encode())
        node += field(4, b"If")
        for name, graph in ((b"then_branch", inner), (b"else_branch", else_branch)):
            node += field(5, field(1, name) + field(6, graph) + _varint(20 << 3) + _varint(5))
        inner = field(1, node) + field(2, f"level{level}".encode())
        inner += field(12, _info(out.decode(), [4, 4]).SerializeToString())
    model = _model([], [_info("x", [4, 4]), _info("c", [], TensorProto.BOOL)], [])
    return model.SerializeToString() + field(7, inner)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


@dataclasses.dataclass(frozen=True)
class Case:
    """One hostile file: how to write it and what the error line must mention."""

    id: str
    write: Callable[[pathlib.Path, Writer], pathlib.Path]
    mentions: tuple[str, ...]
    options: tuple[str, ...] = ()
    subprocess: bool = False


def _link_outside(folder: pathlib.Path, ext: Writer) -> pathlib.Path:
    secret = folder.parent / f"{folder.name}_secret.bin"
    secret.write_bytes(bytes(64))
    (folder / "link.bin").symlink_to(secret)
    return ext(folder, "link.bin")


def _hard_link(folder: pathlib.Path, ext: Writer) -> pathlib.Path:
    secret = folder.parent / f"{folder.name}_hard.bin"
    secret.write_bytes(bytes(64))
    os.link(secret, folder / "hard.bin")
    return ext(folder, "hard.bin")


def _data_file(folder: pathlib.Path, size: int) -> None:
    (folder / "w.bin").write_bytes(bytes(size))


def _with_data(size: int, **fields: int) -> Callable[[pathlib.Path, Writer], pathlib.Path]:
    def write(folder: pathlib.Path, ext: Writer) -> pathlib.Path:
        _data_file(folder, size)
        return ext(folder, "w.bin", **fields)

    return write


def _outside_file(folder: pathlib.Path, ext: Writer) -> pathlib.Path:
    (folder.parent / "outside.bin").write_bytes(bytes(64))
    return ext(folder, "../outside.bin")


def _absolute(folder: pathlib.Path, ext: Writer) -> pathlib.Path:
    target = folder.parent / f"{folder.name}_abs.bin"
    target.write_bytes(bytes(64))
    return ext(folder, str(target))


def _outside_tensor(name: str) -> onnx.TensorProto:
    """A float[4, 4] tensor whose data is in ``../outside.bin``."""
    tensor = TensorProto(
        name=name, data_type=TensorProto.FLOAT, dims=[4, 4], data_location=TensorProto.EXTERNAL
    )
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", "../outside.bin"
    return tensor


def _outside_elsewhere(where: str) -> Callable[[pathlib.Path, Writer], pathlib.Path]:
    """A tensor ``w`` reading ``../outside.bin``: a Constant's attribute feeding the
    EyeLike (``constant-read``), one no EyeLike reads (``constant-apart``), or an
    initializer no EyeLike reads (``initializer-apart``)."""

    def write(folder: pathlib.Path, _: Writer) -> pathlib.Path:
        (folder.parent / "outside.bin").write_bytes(bytes(64))
        if where == "constant-read":
            const = helper.make_node(
                "Constant", [], ["w"], name="const", value=_outside_tensor("w")
            )
            return _write(folder, _model([const, _eye(["w"])], []))
        nodes = [helper.make_node("Relu", ["w"], ["r"], name="relu"), _eye()]
        outputs = [_info("y", None), _info("r", [4, 4])]
        if where == "initializer-apart":
            return _write(
                folder, _model(nodes, outputs=outputs, initializers=[_outside_tensor("w")])
            )
        const = helper.make_node(
            "Constant", [], ["w"], name="const", value=_outside_tensor("w")
        )
        return _write(folder, _model([const, *nodes], outputs=outputs))

    return write


def _branch_holding(eye: onnx.NodeProto, dims: list[int] | None = None) -> onnx.ModelProto:
    """``y = If(c, then: eye, else: Identity(x))``, ``eye`` writing ``b`` from ``x``."""
    then_branch = helper.make_graph([eye], "then", [], [_info("b", None)])
    else_branch = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["e"])], "else", [], [_info("e", None)]
    )
    node = helper.make_node(
        "If", ["c"], ["y"], name="branchy", then_branch=then_branch, else_branch=else_branch
    )
    inputs = [_info("x", dims or [4, 4]), _info("c", [], TensorProto.BOOL)]
    return _model([node], inputs)


def _branch_rank3(folder: pathlib.Path, _: Writer) -> pathlib.Path:
    return _write(folder, _branch_holding(_eye(["x"], ["b"]), [2, 3, 4]))


def _sample_prefix(folder: pathlib.Path, _: Writer) -> pathlib.Path:
    data = (SAMPLES / "static_matmul.onnx").read_bytes()
    return _write(folder, data[: len(data) // 2])


def _non_utf8_name() -> bytes:
    """A node name with a byte that is not UTF-8 (protobuf reads it back as bytes)."""
    data = _model(
        [_eye(), helper.make_node("Relu", ["y"], ["r"], name="reluX")]
    ).SerializeToString()
    return data.replace(b"reluX", b"relu\xff")


def _untyped_initializer() -> onnx.ModelProto:
    tensor = TensorProto(name="w", dims=[4, 4], raw_data=bytes(64))  # data_type left 0
    return _model([_eye(["w"])], [], initializers=[tensor])


def _untyped_attribute() -> onnx.ModelProto:
    node = _eye()
    node.attribute.append(onnx.AttributeProto(name="k", i=1))  # type left UNDEFINED
    return _model([node])


def _sample_flipped(folder: pathlib.Path, _: Writer) -> pathlib.Path:
    """The first tag byte of a sample with its top bit flipped: no longer protobuf."""
    data = bytearray((SAMPLES / "static_matmul.onnx").read_bytes())
    data[0] ^= 0x80
    return _write(folder, bytes(data))


def _k_twice(output: str = "y") -> onnx.NodeProto:
    node = _eye(["x"], [output], k=1)
    node.attribute.append(helper.make_attribute("k", 2))
    return node


def _k_int_with_float() -> onnx.NodeProto:
    node = _eye(k=1)
    node.attribute[0].f = 2.5
    return node


def _negative_initializer() -> onnx.ModelProto:
    weight = helper.make_tensor("w", TensorProto.FLOAT, [4, 4], [0.0] * 16)
    weight.dims[0] = -4
    return _model([_eye(["w"])], [], initializers=[weight])


def _node_cycle() -> onnx.ModelProto:
    return _model(
        [
            helper.make_node("Relu", ["b"], ["a"], name="first"),
            helper.make_node("Relu", ["a"], ["b"], name="second"),
            _eye(["a"]),
        ]
    )


def _redeclared() -> onnx.ModelProto:
    return _model(
        [
            helper.make_node("Relu", ["x"], ["a"], name="first"),
            helper.make_node("Relu", ["x"], ["a"], name="second"),
            _eye(["a"]),
        ]
    )


CASES = [
    Case("empty-file", lambda d, _: _write(d, b""), ("not an ONNX model",), subprocess=True),
    Case(
        "random-bytes",
        lambda d, _: _write(d, np.random.default_rng(7).bytes(4096)),
        ("not an ONNX model",),
        subprocess=True,
    ),
    Case("truncated", _sample_prefix, ("not an ONNX model",)),
    Case("bit-flipped", _sample_flipped, ("not an ONNX model", "invalid wire type")),
    Case(
        "directory",
        lambda d, _: (d / "model.onnx").mkdir() or d / "model.onnx",
        ("not a regular file",),
    ),
    Case("missing", lambda d, _: d / "model.onnx", ("no such file",)),
    Case(
        "deeply-nested-ifs",
        lambda d, _: _write(d, _deep_if_bytes(400)),
        ("not an ONNX model",),
        subprocess=True,
    ),
    Case("cycle", lambda d, _: _write(d, _node_cycle()), ("cycle", "Relu"), subprocess=True),
    Case(
        "dangling-reference",
        lambda d, _: _write(d, _model([_eye(["ghost"])])),
        ("'ghost'", "'eye'", "dangling"),
    ),
    Case("duplicate-value-names", lambda d, _: _write(d, _redeclared()), ("'a'", "'second'")),
    Case(
        "output-never-produced",
        lambda d, _: _write(d, _model([_eye(["x"], ["z"])])),
        ("'y'", "not produced"),
    ),
    Case(
        "name-not-utf8", lambda d, _: _write(d, _non_utf8_name()), ("not valid UTF-8", "name")
    ),
    Case(
        "tensor-without-data-type",
        lambda d, _: _write(d, _untyped_initializer()),
        ("'w'", "no data type"),
    ),
    Case(
        "attribute-without-type",
        lambda d, _: _write(d, _untyped_attribute()),
        ("'k'", "'eye'", "no type"),
    ),
    Case(
        "names-with-line-breaks",
        lambda d, _: _write(
            d, _model([helper.make_node("Re\nlu\x0b", ["ghost"], ["y"], name="two\nlines")])
        ),
        ("'ghost'", "Re lu", "two\\nlines"),
    ),
    Case(
        "eyelike-0-inputs", lambda d, _: _write(d, _model([_eye([])])), ("'eye'", "0 inputs")
    ),
    Case(
        "eyelike-2-inputs",
        lambda d, _: _write(d, _model([_eye(["x", "x"])])),
        ("'eye'", "2 inputs"),
        subprocess=True,
    ),
    Case(
        "eyelike-2-outputs",
        lambda d, _: _write(d, _model([_eye(["x"], ["y", "z"])], outputs=[_info("y", None)])),
        ("'eye'", "2 outputs"),
    ),
    *(
        Case(
            f"dtype-{label}",
            lambda d, _, c=code: _write(d, _model([_eye(dtype=c)])),
            ("'eye'", label),
        )
        for code, label in [
            (999, "999"),
            (0, "UNDEFINED"),
            (-3, "-3"),
            (TensorProto.STRING, "STRING"),
            (TensorProto.COMPLEX64, "COMPLEX64"),
            (TensorProto.FLOAT8E4M3FN, "FLOAT8E4M3FN"),
            (TensorProto.INT4, "INT4"),
        ]
    ),
    Case(
        "eyelike-unknown-attribute",
        lambda d, _: _write(d, _model([_eye(i=1)])),
        ("'eye'", "'i'"),
    ),
    Case("k-not-an-int", lambda d, _: _write(d, _model([_eye(k=1.5)])), ("'eye'", "k")),
    *(
        Case(
            f"k-given-twice-opset-{opset}",
            lambda d, _, o=opset: _write(d, _model([_k_twice()], opset=o)),
            ("'eye'", "'k' appears 2 times"),
        )
        for opset in (22, 17)
    ),
    Case(
        "k-given-twice-in-if-branch",
        lambda d, _: _write(d, _branch_holding(_k_twice("b"))),
        ("'eye'", "branchy.then_branch", "'k' appears 2 times"),
    ),
    Case(
        "k-int-with-its-float-field-set",
        lambda d, _: _write(d, _model([_k_int_with_float()])),
        ("'eye'", "'k'", "typed INT", "f field", "disagree"),
        subprocess=True,
    ),
    Case(
        "eyelike-empty-output-name",
        lambda d, _: _write(
            d, _model([_eye(["x"], [""]), helper.make_node("Identity", ["x"], ["y"])])
        ),
        ("'eye'", "empty output name"),
    ),
    Case(
        "dtype-not-an-int",
        lambda d, _: _write(d, _model([_eye(dtype=1.5)])),
        ("'eye'", "dtype"),
    ),
    Case(
        "bfloat16-below-opset-22",
        lambda d, _: _write(d, _model([_eye(dtype=TensorProto.BFLOAT16)], opset=21)),
        ("'eye'", "BFLOAT16", "22"),
        options=("--no-upgrade",),
    ),
    Case(
        "opset-8",
        lambda d, _: _write(d, _model([_eye()], opset=8)),
        ("'eye'", "opset 8"),
        options=("--no-upgrade",),
    ),
    *(
        Case(
            f"rank-{len(dims)}",
            lambda d, _, s=dims: _write(d, _model([_eye()], [_info("x", s)])),
            ("'eye'", f"rank {len(dims)}"),
        )
        for dims in ([], [4], [2, 3, 4])
    ),
    Case("rank-3-in-if-branch", _branch_rank3, ("'eye'", "rank 3", "then_branch")),
    Case("external-dotdot", _outside_file, ("'w'", "outside"), subprocess=True),
    Case("external-absolute-path", _absolute, ("'w'", "outside")),
    *(
        Case(f"external-dotdot-{where}", _outside_elsewhere(where), ("'w'", "outside"))
        for where in ("constant-read", "constant-apart", "initializer-apart")
    ),
    Case("external-symlink-out", _link_outside, ("'w'", "outside"), subprocess=True),
    Case(
        "external-missing-file",
        lambda d, ext: ext(d, "nowhere.bin"),
        ("'w'", "does not exist"),
    ),
    Case("external-file-too-short", _with_data(32), ("'w'", "32 bytes")),
    Case("external-offset-past-end", _with_data(64, offset=16), ("'w'", "64 bytes")),
    Case("external-length-wrong", _with_data(64, length=8), ("'w'", "length")),
    *(
        Case(
            f"external-{field}-{text}",
            _with_data(64, **{field: text}),
            ("'w'", f"{field} {text!r}", "not a byte count"),
        )
        for field, text in [
            ("offset", "-8"),
            ("offset", "abc"),
            ("offset", "0x10"),
            ("length", "-8"),
            ("length", "abc"),
        ]
    ),
    Case(
        "external-location-with-nul",
        lambda d, ext: _data_file(d, 64) or ext(d, "w\x00.bin"),
        ("'w'", "NUL byte"),
        subprocess=True,
    ),
    Case(
        "negative-input-dim",
        lambda d, _: _write(d, _model([_eye()], [_info("x", [-3, 4])])),
        ("'eye'", "'x'", "negative dim -3"),
    ),
    Case(
        "negative-initializer-dim",
        lambda d, _: _write(d, _negative_initializer()),
        ("'eye'", "'w'", "negative dim -4"),
    ),
    Case(
        "element-type-999",
        lambda d, _: _write(d, _model([_eye()], [_info("x", [4, 4], 999)])),
        ("999 is not a valid DataType",),
    ),
]


@pytest.mark.parametrize(
    ("node", "says"),
    [
        (_k_twice(), "Attribute 'k' appeared multiple times"),
        (_k_int_with_float(), "type field and data field mismatch in attribute k"),
    ],
    ids=["k-twice", "k-int-with-float"],
)
def test_onnx_checker_refuses_the_eyelike_attribute_cases_too(node, says: str):
    """The EyeLike nodes eyefold refuses above are those onnx's checker refuses."""
    with pytest.raises(onnx.checker.ValidationError, match=says):
        onnx.checker.check_model(_model([node], outputs=[_info("y", [4, 4])]))


def _digests(folder: pathlib.Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` and next to it (symlink targets, outside data)."""
    found = {}
    for path in sorted(folder.parent.rglob("*")):
        if path.is_file() and not path.is_symlink():
            found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _assert_one_error_line(code: int, stderr: str, mentions: tuple[str, ...]) -> None:
    lines = stderr.splitlines()
    assert code == 1, f"exit {code}, stderr {stderr!r}"
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1, f"expected one line, got {lines}"
    assert lines[0].startswith("eyefold: error: "), lines[0]
    assert "internal error" not in lines[0], lines[0]
    for text in mentions:
        assert text in lines[0], f"{text!r} not in {lines[0]!r}"


def _layout(
    tmp_path: pathlib.Path, case: Case, ext: Writer
) -> tuple[pathlib.Path, pathlib.Path]:
    folder = tmp_path / "in"
    folder.mkdir(parents=True)
    out_folder = tmp_path / "out"
    out_folder.mkdir()
    return case.write(folder, ext), out_folder


def _run_in_process(argv: list[str], capsys) -> tuple[int, str]:
    capsys.readouterr()
    code = main(argv)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_file_is_refused_in_process(
    case: Case, tmp_path: pathlib.Path, capsys, external_data_model
):
    model_path, out_folder = _layout(tmp_path, case, external_data_model)
    before = _digests(model_path.parent)
    output = out_folder / "out.onnx"
    started = time.monotonic()
    lines = []
    for argv in (
        ["optimize", str(model_path), str(output), "-q", *case.options],
        ["inspect", str(model_path), *case.options],
    ):
        code, stderr = _run_in_process(argv, capsys)
        _assert_one_error_line(code, stderr, case.mentions)
        lines.append(stderr)
    optimize_line, inspect_line = lines
    assert inspect_line == optimize_line  # inspect refuses what optimize refuses, alike
    assert time.monotonic() - started < 60
    assert list(out_folder.iterdir()) == []
    assert _digests(model_path.parent) == before


def _run_subprocess(argv: list[str], cwd: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "eyefold", *argv],
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT_S,
        cwd=cwd,
        check=False,
    )


SUBPROCESS_CASES = [c for c in CASES if c.subprocess]


@pytest.mark.slow
@pytest.mark.parametrize("command", ["optimize", "inspect"])
def test_hostile_files_are_refused_by_the_real_command(
    tmp_path: pathlib.Path, external_data_model, command: str
):
    """The same contract through ``python -m eyefold``, several processes at a time."""
    jobs = []
    for case in SUBPROCESS_CASES:
        model_path, out_folder = _layout(tmp_path / case.id, case, external_data_model)
        jobs.append((case, model_path, out_folder, _digests(model_path.parent)))

    def run(job) -> subprocess.CompletedProcess:
        case, model_path, out_folder, _ = job
        target = [str(out_folder / "out.onnx"), "-q"] if command == "optimize" else []
        return _run_subprocess([command, str(model_path), *target, *case.options], out_folder)

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(run, jobs))
    for (case, model_path, out_folder, before), result in zip(jobs, results, strict=True):
        assert result.returncode >= 0, f"{case.id}: killed by signal {-result.returncode}"
        _assert_one_error_line(result.returncode, result.stderr, case.mentions)
        assert list(out_folder.iterdir()) == [], case.id
        assert _digests(model_path.parent) == before, case.id


@pytest.mark.slow
def test_hostile_external_data_given_as_relative_path(
    tmp_path: pathlib.Path, external_data_model
):
    """A bare file name (cwd = the model's folder) gets the same containment check."""
    folder = tmp_path / "in"
    folder.mkdir()
    _outside_file(folder, external_data_model)
    result = _run_subprocess(["inspect", "model.onnx"], folder)
    _assert_one_error_line(result.returncode, result.stderr, ("'w'", "outside"))


def test_valid_external_data_is_accepted(tmp_path: pathlib.Path, capsys, external_data_model):
    """The positive twin of the external-data cases: inside the folder, right size."""
    folder = tmp_path / "in"
    folder.mkdir()
    model_path = _with_data(64)(folder, external_data_model)
    output = tmp_path / "out.onnx"
    code, stderr = _run_in_process(["optimize", str(model_path), str(output), "-q"], capsys)
    assert (code, stderr) == (0, "")
    check_model_safely(onnx.load(output))


def _sparse_model(indices: list[int] | list[list[int]]) -> onnx.ModelProto:
    """``y = EyeLike(x) + sv``, ``sv`` a sparse float[4, 4] initializer holding 2 and 3."""
    index_dims = [2] if isinstance(indices[0], int) else [2, 2]
    flat = np.array(indices).reshape(-1).tolist()
    sparse = helper.make_sparse_tensor(
        helper.make_tensor("sv", TensorProto.FLOAT, [2], [2.0, 3.0]),
        helper.make_tensor("sv_indices", TensorProto.INT64, index_dims, flat),
        [4, 4],
    )
    model = _model(
        [_eye(["x"], ["e"]), helper.make_node("Add", ["e", "sv"], ["y"], name="add")],
        outputs=[_info("y", [4, 4])],
    )
    model.graph.sparse_initializer.append(sparse)
    return model


@pytest.mark.parametrize(
    "indices", [[1, 14], [[0, 1], [3, 2]]], ids=["linear-indices", "coordinates"]
)
def test_valid_sparse_initializer_is_accepted(tmp_path: pathlib.Path, capsys, indices: list):
    """onnxruntime runs the model: eyefold optimizes it, and the result computes the same."""
    import onnxruntime as ort

    path = _write(tmp_path, _sparse_model(indices))
    output = tmp_path / "out.onnx"
    code, stderr = _run_in_process(["optimize", str(path), str(output), "-q"], capsys)
    assert (code, stderr) == (0, "")
    check_model_safely(onnx.load(output))
    x = np.random.default_rng(3).random((4, 4), dtype=np.float32)
    expected = np.eye(4, dtype=np.float32)
    expected.reshape(-1)[[1, 14]] += [2.0, 3.0]
    for model in (path, output):
        (y,) = ort.InferenceSession(str(model)).run(None, {"x": x})
        np.testing.assert_array_equal(y, expected)
    result = eyefold.optimize(_sparse_model(indices))  # the library takes it too
    (y,) = ort.InferenceSession(result.SerializeToString()).run(None, {"x": x})
    np.testing.assert_array_equal(y, expected)


HUGE = 2**40


def _huge_input(opset: int) -> onnx.ModelProto:
    return _model(
        [_eye()], [_info("x", [HUGE, HUGE])], [_info("y", [HUGE, HUGE])], opset=opset
    )


def _huge_chain(opset: int) -> onnx.ModelProto:
    """Constant [2^40, 2^40] -> ConstantOfShape -> EyeLike: the size only inference knows."""
    shape = helper.make_tensor("s", TensorProto.INT64, [2], [HUGE, HUGE])
    zero = helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0])
    nodes = [
        helper.make_node("Constant", [], ["s"], name="shape", value=shape),
        helper.make_node("ConstantOfShape", ["s"], ["z"], name="zeros", value=zero),
        _eye(["z"]),
    ]
    return _model(nodes, [], [_info("y", None)], opset=opset)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("build", "opset", "kept"),
    [
        (_huge_input, 22, ["EyeLike"]),
        # At opset 9 the size is known only after the upgrade and data propagation.
        (_huge_chain, 9, ["Constant", "ConstantOfShape", "EyeLike"]),
    ],
    ids=["declared-input", "constant-of-shape-chain-opset9"],
)
def test_huge_declared_shape_is_reported_never_allocated(
    tmp_path: pathlib.Path, build, kept: list[str], opset: int
):
    """inspect reports the 2^40 x 2^40 EyeLike's size and optimize keeps it, both quickly."""
    path = _write(tmp_path, build(opset))
    output = tmp_path / "out.onnx"
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        inspect, optimize = pool.map(
            lambda argv: _run_subprocess(argv, tmp_path),
            [["inspect", str(path), "--json"], ["optimize", str(path), str(output), "-q"]],
        )
    assert time.monotonic() - started < 60
    assert (inspect.returncode, optimize.returncode) == (0, 0), (
        inspect.stderr + optimize.stderr
    )
    (node,) = json.loads(inspect.stdout)["nodes"]
    assert node["bytes"] == HUGE * HUGE * 4
    assert node["shape"] == [HUGE, HUGE]
    assert node["action"] != "folded"
    assert output.stat().st_size < 10_000
    assert [n.op_type for n in onnx.load(output).graph.node] == kept


def test_small_declared_shape_is_folded(tmp_path: pathlib.Path, capsys):
    """The twin of the huge case: the same model at 4 x 4 folds."""
    path = _write(tmp_path, _model([_eye()], [_info("x", [4, 4])], [_info("y", [4, 4])]))
    code = main(["inspect", str(path), "--json"])
    (node,) = json.loads(capsys.readouterr().out)["nodes"]
    assert (code, node["bytes"], node["action"]) == (0, 64, "folded")


def test_ops_onnx_dropped_are_not_refused(tmp_path: pathlib.Path, capsys):
    """Old exporters wrote experimental ops (ImageScaler) that onnx removed; still served.

    Without the upgrade: onnx's version converter knows no schema to convert them with.
    """
    nodes = [
        helper.make_node("ImageScaler", ["x"], ["s"], name="scaler", scale=2.0),
        _eye(["x"], ["e"]),
        helper.make_node("Add", ["s", "e"], ["y"], name="add"),
    ]
    path = _write(tmp_path, _model(nodes, outputs=[_info("y", [4, 4])], opset=9))
    output = tmp_path / "out.onnx"
    argv = ["optimize", str(path), str(output), "-q", "--no-upgrade"]
    code, stderr = _run_in_process(argv, capsys)
    assert (code, stderr) == (0, "")
    assert [n.op_type for n in onnx.load(output).graph.node] == ["ImageScaler", "Add"]


@pytest.mark.slow
def test_eyelike_dtype_after_custom_op_does_not_crash(tmp_path: pathlib.Path):
    """onnx's shape inference segfaults on this model; eyefold must not hand it over."""
    model = _model(
        [
            helper.make_node("Mystery", ["x"], ["u"], domain="custom.ops", name="mystery"),
            _eye(["u"], dtype=TensorProto.FLOAT),
        ]
    )
    model.opset_import.append(helper.make_opsetid("custom.ops", 1))
    path = _write(tmp_path, model)
    output = tmp_path / "out.onnx"
    result = _run_subprocess(["optimize", str(path), str(output), "-q"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    eye = [n for n in onnx.load(output).graph.node if n.op_type == "EyeLike"]
    assert len(eye) == 1


def test_nesting_below_the_protobuf_limit_is_optimized(tmp_path: pathlib.Path, capsys):
    """The twin of the deeply nested case: 20 levels load, and the EyeLike inside folds."""
    path = _write(tmp_path, _deep_if_bytes(20))
    output = tmp_path / "out.onnx"
    code, stderr = _run_in_process(["optimize", str(path), str(output), "-q"], capsys)
    assert (code, stderr) == (0, "")
    assert not any(n.op_type == "EyeLike" for n in _all_nodes(onnx.load(output).graph))


def _all_nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    nodes = []
    for node in graph.node:
        nodes.append(node)
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                nodes.extend(_all_nodes(attr.g))
    return nodes


# -- huge files that are no model ----------------------------------------------------

HUGE_FILE_BYTES = 3 << 30
HUGE_FILE_MAX_RSS_BYTES = 400 << 20
HUGE_FILE_SECONDS = 30


def _max_rss_of(argv: list[str], cwd: pathlib.Path) -> tuple[int, str, int]:
    """(exit code, stderr, peak resident bytes) of ``python -m eyefold ARGV`` run alone.

    A wrapper process runs it, so the children counted are this command's only.
    """
    wrapper = (
        "import resource, subprocess, sys, json\n"
        "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024\n"
        "print(json.dumps([r.returncode, r.stderr, peak]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", wrapper, sys.executable, "-m", "eyefold", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=SUBPROCESS_TIMEOUT_S,
        check=True,
    )
    code, stderr, peak = json.loads(result.stdout)
    return code, stderr, peak


@pytest.mark.slow
@pytest.mark.parametrize(
    ("head", "says"),
    [
        (b"", "invalid field key 0 at byte 0"),
        # ir_version 8, then zeros: one valid field, then no protobuf.
        (b"\x08\x08", "invalid field key 0 at byte 2"),
        # a graph field claiming more bytes than the file holds.
        (b"\x08\x08\x3a\xff\xff\xff\xff\x7f", "runs past the end of the file"),
    ],
    ids=["zeros", "one-field-then-zeros", "graph-longer-than-the-file"],
)
def test_huge_file_that_is_no_model_is_refused_from_its_first_bytes(
    tmp_path: pathlib.Path, head: bytes, says: str
):
    """A sparse 3 GiB file: refused in bounded memory and time, before protobuf reads it."""
    path = tmp_path / "huge.onnx"
    with open(path, "wb") as handle:
        handle.write(head)
        handle.truncate(HUGE_FILE_BYTES)
    started = time.monotonic()
    code, stderr, peak = _max_rss_of(["inspect", str(path)], tmp_path)
    assert time.monotonic() - started < HUGE_FILE_SECONDS
    _assert_one_error_line(code, stderr, ("not an ONNX model", says))
    assert peak < HUGE_FILE_MAX_RSS_BYTES, f"peak memory {peak} bytes"


def _valid_models() -> list[pathlib.Path]:
    """The samples, the real exports and every model of onnx's backend test data."""
    backend = pathlib.Path(onnx.__file__).parent / "backend" / "test" / "data"
    return [
        *SAMPLE_FILES,
        *sorted(SAMPLES.glob("real/**/*.onnx")),
        *sorted(backend.rglob("*.onnx")),
    ]


def test_first_bytes_check_passes_every_valid_model():
    """The check refuses no model protobuf and onnx read: samples and the backend corpus."""
    from eyefold.model_files.wire import top_level_problem

    paths = _valid_models()
    assert len(paths) > 150  # the corpus is there, not an empty folder
    for path in paths:
        onnx.load(path, load_external_data=False)  # a model indeed
        with open(path, "rb") as handle:
            assert top_level_problem(handle, os.fstat(handle.fileno()).st_size) is None, path


# -- corruption fuzzer ----------------------------------------------------------------


def _corrupt(data: bytes, rng: np.random.Generator) -> bytes:
    """Flips 1..8 random bits, truncates, or both."""
    buffer = bytearray(data)
    mode = rng.integers(0, 3)
    if mode in (0, 2):
        for _ in range(int(rng.integers(1, 9))):
            position = int(rng.integers(0, len(buffer)))
            buffer[position] ^= 1 << int(rng.integers(0, 8))
    if mode in (1, 2):
        buffer = buffer[: int(rng.integers(0, len(buffer)))]
    return bytes(buffer)


def _write_corpus(folder: pathlib.Path, count: int) -> list[pathlib.Path]:
    rng = np.random.default_rng(20261201)
    originals = [path.read_bytes() for path in SAMPLE_FILES]
    paths = []
    for index in range(count):
        source = int(rng.integers(0, len(originals)))
        path = folder / f"corrupt_{index:03d}_{SAMPLE_FILES[source].stem}.onnx"
        path.write_bytes(_corrupt(originals[source], rng))
        paths.append(path)
    return paths


def _drive(paths: list[str]) -> None:
    """Worker: runs ``optimize`` on each file in this process; one JSON line per file."""
    for path in paths:
        output = path + ".out.onnx"
        print(json.dumps({"start": path}), flush=True)
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(["optimize", path, output, "-q"])
        print(json.dumps({"file": path, "code": code, "stderr": err.getvalue()}), flush=True)


@pytest.mark.slow
def test_corrupted_sample_models_fail_cleanly_or_succeed(tmp_path: pathlib.Path):
    paths = _write_corpus(tmp_path, CORRUPTED_FILES)
    digests = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}
    result = subprocess.run(
        [sys.executable, __file__, *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT_S * 2,
        check=False,
    )
    records = [json.loads(line) for line in result.stdout.splitlines()]
    last = records[-1] if records else {}
    assert result.returncode == 0, f"worker died ({result.returncode}) at {last}"
    finished = [r for r in records if "file" in r]
    assert len(finished) == len(paths)
    succeeded = 0
    for record in finished:
        output = pathlib.Path(record["file"] + ".out.onnx")
        if record["code"] == 0:
            succeeded += 1
            _assert_valid_unless_input_was_not(pathlib.Path(record["file"]), output)
        else:
            _assert_corruption_error(record)
            assert not output.exists(), record["file"]
    assert all(hashlib.sha256(p.read_bytes()).hexdigest() == digests[p] for p in paths)
    # Both outcomes occur, so the corpus is neither all-garbage nor all-harmless.
    assert 0 < succeeded < len(paths)


def _assert_corruption_error(record: dict) -> None:
    lines = record["stderr"].splitlines()
    assert record["code"] == 1, record
    assert len(lines) == 1 and lines[0].startswith("eyefold: error: "), record
    assert "Traceback" not in record["stderr"], record
    assert "internal error" not in record["stderr"], record


def _is_consistent(path: pathlib.Path) -> bool:
    """Passes the full checker and strict shape inference with data propagation.

    Some corruptions (a declared output dim changed) are visible only with data
    propagation: folding then exposes them to the plain checker.
    """
    model = onnx.load(path)
    try:
        check_model_safely(model)
        defuse_eyelike_dtype(model)
        onnx.shape_inference.infer_shapes(
            model, check_type=True, strict_mode=True, data_prop=True
        )
    except Exception:  # onnx raises ValidationError, InferenceError, ValueError...
        return False
    return True


def _assert_valid_unless_input_was_not(source: pathlib.Path, output: pathlib.Path) -> None:
    """eyefold does not validate every op, but never turns a consistent model invalid."""
    if _is_consistent(source):
        check_model_safely(onnx.load(output))


@pytest.mark.slow
def test_corrupted_files_through_the_real_command(tmp_path: pathlib.Path):
    """A handful of the corrupted files as real subprocesses: exit 0 or 1, never a signal."""
    paths = _write_corpus(tmp_path, 8)
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        results = list(
            pool.map(
                lambda p: _run_subprocess(
                    ["optimize", str(p), str(p) + ".out", "-q"], tmp_path
                ),
                paths,
            )
        )
    for path, result in zip(paths, results, strict=True):
        assert result.returncode in (0, 1), (path.name, result.returncode, result.stderr)
        if result.returncode == 1:
            _assert_corruption_error({"code": 1, "stderr": result.stderr})
        else:
            _assert_valid_unless_input_was_not(path, pathlib.Path(str(path) + ".out"))


if __name__ == "__main__":
    _drive(sys.argv[1:])
