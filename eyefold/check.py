"""``--check``: run the original and the optimized model on random inputs and compare.

Inputs are random, from a fixed seed, in every graph input's element type. A symbolic or
unknown dim gets its ``--input-shape`` value when pinned, else :data:`DEFAULT_DIM` (the same
value for every use of one symbolic name).

Both models run under onnxruntime when it is installed and can load both; else both run
under ``onnx.reference.ReferenceEvaluator``, and the result says why. An optimized model
that onnxruntime loads but fails to run where the original ran fails the check. Under the
reference evaluator
every output must be bit-identical. Under onnxruntime integer, bool and string outputs must
be identical too, and floating outputs must agree within :data:`FLOAT_TOLERANCES`: for
constant operands onnxruntime may pick other kernels (prepacked MatMul weights, fused
constants) whose rounding differs in the last bits.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tempfile
import time
from collections.abc import Mapping
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import onnx.reference
import onnx_ir as ir

from eyefold.errors import CheckFailedError, EyefoldError
from eyefold.model_files import external_data_files, save_model, tensor_bytes
from eyefold.model_files.save import INLINE_LIMIT_BYTES

__all__ = [
    "DEFAULT_DIM",
    "FLOAT_TOLERANCES",
    "INPUT_LIMIT_BYTES",
    "CheckResult",
    "check_equivalence",
    "random_inputs",
]

# Symbolic dims without a pinned value get this size: small enough for any model to run
# fast, and above 1 so that broadcasting mistakes still show.
DEFAULT_DIM = 2
# The random inputs may take at most this much memory together; a model declaring huge
# static inputs (2^40 x 2^40) cannot be checked by running it.
INPUT_LIMIT_BYTES = 1 << 30
# (rtol, atol) per floating output type under onnxruntime: |got - want| <= atol + rtol*|want|.
# A few units in the last place of each type.
FLOAT_TOLERANCES: dict[ir.DataType, tuple[float, float]] = {
    ir.DataType.DOUBLE: (1e-12, 1e-14),
    ir.DataType.FLOAT: (1e-5, 1e-6),
    ir.DataType.FLOAT16: (2e-3, 1e-4),
    ir.DataType.BFLOAT16: (1.6e-2, 1e-3),
}
ORT = "onnxruntime"
REFERENCE = "onnx.reference"

Source = str | bytes | onnx.ModelProto


@dataclasses.dataclass
class CheckResult:
    """How ``--check`` compared the models.

    Attributes:
        backend: "onnxruntime" or "onnx.reference".
        backend_reason: why the reference evaluator was used, when it was.
        inputs: the shape fed to each graph input.
        defaulted_dims: symbolic dims that got :data:`DEFAULT_DIM`, by name.
        outputs: output names compared.
        exact: True when every output had to be bit-identical.
        tolerances: the (rtol, atol) applied per floating output type, by type name.
        max_abs_diff: the largest difference seen per floating output (0.0 when equal).
        seconds: wall time of the whole check.
    """

    backend: str
    backend_reason: str | None
    inputs: dict[str, list[int]]
    defaulted_dims: dict[str, int]
    outputs: list[str]
    exact: bool
    tolerances: dict[str, dict[str, float]]
    max_abs_diff: dict[str, float]
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The ``check`` entry of the JSON report."""
        return dataclasses.asdict(self)

    def describe(self) -> str:
        """One line for the summary."""
        rule = "bit-identical"
        if self.tolerances:
            rule = "integers bit-identical, floats within " + ", ".join(
                f"{t} rtol={v['rtol']:g} atol={v['atol']:g}"
                for t, v in self.tolerances.items()
            )
        count = f"{len(self.outputs)} output{'s' if len(self.outputs) != 1 else ''}"
        line = f"check: {count} equal under {self.backend} ({rule})"
        if self.backend_reason:
            line += f"; {self.backend_reason}"
        if self.defaulted_dims:
            dims = ", ".join(f"{k}={v}" for k, v in self.defaulted_dims.items())
            line += f"; symbolic dims defaulted: {dims} (pin them with --input-shape)"
        return line


def _shape_of(value: ir.Value, defaulted: dict[str, int]) -> list[int]:
    if value.shape is None:
        raise EyefoldError(
            f"--check cannot make an input for {value.name!r}: its rank is unknown"
            " (give it with --input-shape)"
        )
    dims = []
    for index, dim in enumerate(value.shape.dims):
        if isinstance(dim, int):
            dims.append(dim)
        else:
            name = dim.value or f"{value.name}[{index}]"
            dims.append(defaulted.setdefault(name, DEFAULT_DIM))
    return dims


def _random_array(
    rng: np.random.Generator, dtype: ir.DataType, shape: list[int], name: str
) -> np.ndarray:
    if dtype == ir.DataType.BOOL:
        return rng.random(shape) < 0.5
    if dtype == ir.DataType.STRING:
        return rng.choice(np.array(["a", "bc", ""], dtype=object), size=shape)
    np_dtype = np.dtype(dtype.numpy())
    if dtype.is_floating_point():
        return rng.standard_normal(shape).astype(np_dtype)
    if np_dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np_dtype)
    if dtype.is_integer():
        low = -4 if dtype.is_signed() else 0
        return rng.integers(low, 5, size=shape).astype(np_dtype)
    raise EyefoldError(f"--check cannot make an input for {name!r} of type {dtype.name}")


def _item_bytes(dtype: ir.DataType) -> int:
    try:
        return math.ceil(dtype.itemsize)
    except TypeError:  # STRING has no fixed size; the generated strings are short
        return 8


def random_inputs(
    model: ir.Model, *, seed: int = 0
) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Random feeds for every main-graph input that is not an initializer.

    Returns:
        The feeds, and the symbolic dims that got :data:`DEFAULT_DIM`.

    Raises:
        EyefoldError: an input is not a tensor, or has no known type or rank.
    """
    rng = np.random.default_rng(seed)
    defaulted: dict[str, int] = {}
    feeds: dict[str, np.ndarray] = {}
    total = 0
    for value in model.graph.inputs:
        if value.is_initializer():
            continue
        name = value.name or ""
        if not isinstance(value.type, ir.TensorType) or value.dtype is None:
            raise EyefoldError(
                f"--check cannot make an input for {name!r}: not a typed tensor"
            )
        shape = _shape_of(value, defaulted)
        total += math.prod(shape) * _item_bytes(value.dtype)  # Python ints: no overflow
        if total > INPUT_LIMIT_BYTES:
            raise EyefoldError(
                f"--check would need {total} bytes of random inputs (input {name!r} is"
                f" {value.dtype.name}{shape}), over {INPUT_LIMIT_BYTES}; pin smaller"
                " symbolic dims with --input-shape"
            )
        array = _random_array(rng, value.dtype, shape, name)
        feeds[name] = np.asarray(array)  # a 0-d result comes back as a numpy scalar
    return feeds, defaulted


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def _ort_session(source: Source) -> Any:
    import onnxruntime  # optional: the reference evaluator is the fallback

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    if isinstance(source, onnx.ModelProto):
        source = source.SerializeToString()
    return onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def _run_ort(session: Any, feeds: Mapping[str, np.ndarray]) -> dict[str, Any]:
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, dict(feeds)), strict=True))


def _to_proto(source: Source) -> onnx.ModelProto:
    if isinstance(source, onnx.ModelProto):
        return source
    if isinstance(source, bytes):
        return onnx.load_from_string(source)
    return onnx.load(source)


def _run_reference(source: Source, feeds: Mapping[str, np.ndarray]) -> dict[str, Any]:
    proto = _to_proto(source)
    evaluator = onnx.reference.ReferenceEvaluator(proto)
    names = [o.name for o in proto.graph.output]
    return dict(zip(names, evaluator.run(None, dict(feeds)), strict=True))


def _mismatch(name: str, got: Any, want: Any, backend: str, exact: bool) -> str | None:
    """Why output ``name`` differs, or None when it is equal under the rules."""
    if isinstance(want, list) or isinstance(got, list):
        if not (isinstance(want, list) and isinstance(got, list)) or len(got) != len(want):
            return f"output {name!r} is a sequence in one model only, or of another length"
        for index, (g, w) in enumerate(zip(got, want, strict=True)):
            why = _mismatch(f"{name}[{index}]", g, w, backend, exact)
            if why:
                return why
        return None
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return (
            f"output {name!r} is {got.dtype}{list(got.shape)} instead of"
            f" {want.dtype}{list(want.shape)}"
        )
    if exact or not _is_float(want.dtype):
        if want.dtype == object:
            equal = got.tolist() == want.tolist()
        else:
            equal = got.tobytes() == want.tobytes()
        return None if equal else f"output {name!r} is not bit-identical under {backend}"
    rtol, atol = FLOAT_TOLERANCES[_float_type(want.dtype)]
    g, w = got.astype(np.float64), want.astype(np.float64)
    close = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    if close.all():
        return None
    index = np.unravel_index(int(np.argmin(close)), close.shape)
    return (
        f"output {name!r} differs under {backend} at {tuple(int(i) for i in index)}:"
        f" {w[index]!r} -> {g[index]!r} (rtol={rtol:g}, atol={atol:g})"
    )


_FLOAT_NUMPY = {
    np.dtype(np.float64): ir.DataType.DOUBLE,
    np.dtype(np.float32): ir.DataType.FLOAT,
    np.dtype(np.float16): ir.DataType.FLOAT16,
    np.dtype(ml_dtypes.bfloat16): ir.DataType.BFLOAT16,
}


def _is_float(dtype: np.dtype) -> bool:
    return dtype in _FLOAT_NUMPY


def _float_type(dtype: np.dtype) -> ir.DataType:
    return _FLOAT_NUMPY[dtype]


def _max_abs_diff(got: Any, want: Any) -> float | None:
    got, want = np.asarray(got), np.asarray(want)
    if not _is_float(want.dtype) or got.shape != want.shape or want.size == 0:
        return None
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    both_nan = np.isnan(diff)
    return float(np.max(np.where(both_nan, 0.0, diff)))


def _prepare(
    model: ir.Model | onnx.ModelProto | str | os.PathLike[str], scratch: str, stem: str
) -> Source:
    """A source both backends can load: bytes, a proto or a path (large models)."""
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model)
    if isinstance(model, onnx.ModelProto):
        return model
    if external_data_files(model) or tensor_bytes(model) > INLINE_LIMIT_BYTES:
        path = os.path.join(scratch, f"{stem}.onnx")
        save_model(model, path, external_data=True)
        return path
    return ir.serde.serialize_model(model).SerializeToString()


def _pick_backend(original: Source, optimized: Source) -> tuple[Any, Any, str | None]:
    """Two onnxruntime sessions, or (None, None, why the reference evaluator is used)."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return None, None, "onnxruntime is not installed"
    try:
        original_session = _ort_session(original)
    except Exception as error:  # onnxruntime raises its own exception types
        return None, None, f"onnxruntime cannot load the original: {_first_line(error)}"
    try:
        optimized_session = _ort_session(optimized)
    except Exception as error:
        # E.g. an opset newer than this onnxruntime: the reference evaluator still decides.
        return None, None, f"onnxruntime cannot load the optimized model: {_first_line(error)}"
    return original_session, optimized_session, None


def _run_both(
    original: Source, optimized: Source, feeds: dict[str, np.ndarray]
) -> tuple[dict[str, Any], dict[str, Any], str, str | None]:
    original_session, optimized_session, reason = _pick_backend(original, optimized)
    if original_session is not None:
        try:
            want = _run_ort(original_session, feeds)
        except Exception as error:
            reason = f"onnxruntime cannot run the original: {_first_line(error)}"
        else:
            try:
                got = _run_ort(optimized_session, feeds)
            except Exception as error:
                raise CheckFailedError(
                    "onnxruntime runs the original model but not the optimized one:"
                    f" {_first_line(error)}"
                ) from None
            return want, got, ORT, None
    try:
        want = _run_reference(original, feeds)
    except Exception as error:
        raise EyefoldError(
            f"--check cannot run the original model ({reason}; onnx.reference:"
            f" {_first_line(error)})"
        ) from None
    try:
        got = _run_reference(optimized, feeds)
    except Exception as error:
        raise CheckFailedError(
            "onnx.reference runs the original model but not the optimized one:"
            f" {_first_line(error)}"
        ) from None
    return want, got, REFERENCE, reason


def check_equivalence(
    original: ir.Model | onnx.ModelProto | str | os.PathLike[str],
    optimized: ir.Model | onnx.ModelProto,
    *,
    seed: int = 0,
    workdir: str | None = None,
) -> CheckResult:
    """Runs both models on the same random inputs and requires equal outputs.

    Neither model is changed. Inputs are generated from the optimized model's graph inputs,
    where ``--input-shape`` pins are applied.

    Args:
        original: the model as given, best passed as its file path (nothing is copied).
        optimized: the optimized model.
        seed: seed of the random inputs.
        workdir: folder for a temporary copy of a model too large to pass in memory.

    Returns:
        How the models were compared.

    Raises:
        CheckFailedError: an output differs, or the optimized model fails where the
            original runs.
        EyefoldError: the inputs cannot be generated or the original does not run at all.
    """
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="eyefold-check-", dir=workdir) as scratch:
        optimized_model = (
            ir.serde.deserialize_model(optimized)
            if isinstance(optimized, onnx.ModelProto)
            else optimized
        )
        feeds, defaulted = random_inputs(optimized_model, seed=seed)
        optimized_source = _prepare(optimized, scratch, "optimized")
        original_source = _prepare(original, scratch, "original")
        want, got, backend, reason = _run_both(original_source, optimized_source, feeds)
    if list(want) != list(got):
        raise CheckFailedError(
            f"the models have different outputs: {list(want)} -> {list(got)}"
        )
    exact = backend == REFERENCE
    for name in want:
        why = _mismatch(name, got[name], want[name], backend, exact)
        if why:
            raise CheckFailedError(f"--check failed: {why}")
    diffs = {n: d for n in want if (d := _max_abs_diff(got[n], want[n])) is not None}
    float_types = {_float_type(np.asarray(want[n]).dtype) for n in diffs}
    return CheckResult(
        backend=backend,
        backend_reason=reason,
        inputs={name: list(array.shape) for name, array in feeds.items()},
        defaulted_dims=defaulted,
        outputs=list(want),
        exact=exact,
        tolerances={}
        if exact
        else {
            t.name: {"rtol": r, "atol": a}
            for t, (r, a) in FLOAT_TOLERANCES.items()
            if t in float_types
        },
        max_abs_diff=diffs,
        seconds=time.perf_counter() - start,
    )
