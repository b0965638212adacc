"""``--check``: run the original and the optimized model on random inputs and compare.

Inputs are random, from a fixed seed, in every graph input's element type. A symbolic or
unknown dim gets its ``--input-shape`` value when pinned, else :data:`DEFAULT_DIM` (the same
value for every use of one symbolic name): see :mod:`eyefold.check.inputs`.

Both models run under onnxruntime when it is installed and can load both; else both run
under ``onnx.reference.ReferenceEvaluator``, and the result says why (see
:mod:`eyefold.check.backends`). An optimized model that onnxruntime loads but fails to run
where the original ran fails the check. Under the reference evaluator
every output must be bit-identical. Under onnxruntime integer, bool and string outputs must
be identical too, and floating outputs must agree within :data:`FLOAT_TOLERANCES`: for
constant operands onnxruntime may pick other kernels (prepacked MatMul weights, fused
constants) whose rounding differs in the last bits.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import onnx_ir as ir

from eyefold.check.backends import ORT, REFERENCE, prepare_source, run_both
from eyefold.check.inputs import (
    DEFAULT_DIM,
    INPUT_LIMIT_BYTES,
    inputs_from_file,
    random_inputs,
)
from eyefold.errors import CheckFailedError, EyefoldError
from eyefold.runtime.installed import installed_version

__all__ = [
    "DEFAULT_DIM",
    "FLOAT_TOLERANCES",
    "INPUT_LIMIT_BYTES",
    "CheckResult",
    "check_equivalence",
    "random_inputs",
]

# (rtol, atol) per floating output type under onnxruntime: |got - want| <= atol + rtol*|want|.
# A few units in the last place of each type.
FLOAT_TOLERANCES: dict[ir.DataType, tuple[float, float]] = {
    ir.DataType.DOUBLE: (1e-12, 1e-14),
    ir.DataType.FLOAT: (1e-5, 1e-6),
    ir.DataType.FLOAT16: (2e-3, 1e-4),
    ir.DataType.BFLOAT16: (1.6e-2, 1e-3),
}


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
        inputs_from: the ``--check-inputs`` file the inputs came from (None: random).
        original_route: how the original ran when not as given (its unrunnable EyeLike
            nodes lowered), else None.
        optimized_route: how the optimized model ran when not as written, else None.
        backend_version: the version of the backend that ran (onnxruntime's).
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
    inputs_from: str | None = None
    original_route: str | None = None
    optimized_route: str | None = None
    backend_version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``check`` entry of the JSON report."""
        return dataclasses.asdict(self)

    def _what_ran(self) -> str:
        """Which models ran how, and why not as they are."""
        if self.original_route is None and self.optimized_route is None:
            ran = "both models ran as they are"
            if self.backend == REFERENCE:
                ran = "both models ran on onnx's reference evaluator"
        else:
            ran = f"the original ran with {self.original_route or 'nothing changed'}"
            if self.optimized_route:
                ran += f"; the result ran with {self.optimized_route}"
            else:
                ran += f"; the result ran as written ({self.backend} loads it)"
        if self.backend_reason:
            ran += f", because {self.backend_reason}"
        return ran

    def describe(self) -> str:
        """One line for the summary: what ran, on what, and how the outputs compared."""
        rule = "bit-identical"
        if self.tolerances:
            rule = "integers bit-identical, floats within " + ", ".join(
                f"{t} rtol={v['rtol']:g} atol={v['atol']:g}"
                for t, v in self.tolerances.items()
            )
        count = f"{len(self.outputs)} output{'s' if len(self.outputs) != 1 else ''}"
        backend = self.backend
        if self.backend_version:
            backend += f" {self.backend_version}"
        line = f"check: {count} equal under {backend} ({rule}); {self._what_ran()}"
        if self.inputs_from:
            line += f"; inputs from {self.inputs_from}"
        if self.defaulted_dims:
            dims = ", ".join(f"{k}={v}" for k, v in self.defaulted_dims.items())
            line += f"; symbolic dims defaulted: {dims} (pin them with --input-shape)"
        return line


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


def _compare(
    want: dict[str, Any], got: dict[str, Any], backend: str, exact: bool
) -> dict[str, float]:
    """The largest difference per floating output, once every output is equal by the rules.

    Raises:
        CheckFailedError: the output names differ, or an output differs.
    """
    if list(want) != list(got):
        raise CheckFailedError(
            f"the models have different outputs: {list(want)} -> {list(got)}"
        )
    for name in want:
        why = _mismatch(name, got[name], want[name], backend, exact)
        if why:
            raise CheckFailedError(f"--check failed: {why}")
    return {n: d for n in want if (d := _max_abs_diff(got[n], want[n])) is not None}


def _tolerances_applied(
    want: dict[str, Any], diffs: dict[str, float]
) -> dict[str, dict[str, float]]:
    """The (rtol, atol) of each floating type among the compared outputs, by type name."""
    float_types = {_float_type(np.asarray(want[n]).dtype) for n in diffs}
    return {
        t.name: {"rtol": r, "atol": a}
        for t, (r, a) in FLOAT_TOLERANCES.items()
        if t in float_types
    }


def _run_both(original, optimized, feeds: dict[str, np.ndarray], *, random: bool):
    """:func:`run_both`; a model random inputs cannot run gets a hint at --check-inputs."""
    try:
        return run_both(original, optimized, feeds)
    except CheckFailedError:
        raise
    except EyefoldError as error:
        if not random:
            raise
        raise EyefoldError(
            f"{error}; if random inputs cannot run this model (indices, say), give"
            " real ones with --check-inputs FILE.npz"
        ) from None


def check_equivalence(
    original: ir.Model | onnx.ModelProto | str | os.PathLike[str],
    optimized: ir.Model | onnx.ModelProto,
    *,
    seed: int = 0,
    workdir: str | None = None,
    inputs_path: str | None = None,
) -> CheckResult:
    """Runs both models on the same inputs and requires equal outputs.

    Neither model is changed. Inputs are generated from the optimized model's graph inputs,
    where ``--input-shape`` pins are applied.

    Args:
        original: the model as given, best passed as its file path (nothing is copied).
        optimized: the optimized model.
        seed: seed of the random inputs.
        workdir: folder for a temporary copy of a model too large to pass in memory.
        inputs_path: an ``.npz`` file with one array per graph input (``--check-inputs``);
            None: random inputs.

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
        if inputs_path is not None:
            feeds, defaulted = inputs_from_file(optimized_model, inputs_path), {}
        else:
            feeds, defaulted = random_inputs(optimized_model, seed=seed)
        optimized_source = prepare_source(optimized, scratch, "optimized")
        original_source = prepare_source(original, scratch, "original")
        run = _run_both(original_source, optimized_source, feeds, random=inputs_path is None)
    exact = run.backend == REFERENCE
    diffs = _compare(run.want, run.got, run.backend, exact)
    return CheckResult(
        backend=run.backend,
        backend_reason=run.reason,
        inputs={name: list(array.shape) for name, array in feeds.items()},
        defaulted_dims=defaulted,
        outputs=list(run.want),
        exact=exact,
        tolerances={} if exact else _tolerances_applied(run.want, diffs),
        max_abs_diff=diffs,
        seconds=time.perf_counter() - start,
        inputs_from=inputs_path,
        original_route=run.original,
        optimized_route=run.optimized,
        backend_version=installed_version() if run.backend == ORT else None,
    )
