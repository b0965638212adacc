"""``--check``: run the original and the optimized model on random inputs and compare.

Inputs are random, from a fixed seed, in every graph input's element type. A symbolic or
unknown dim gets its ``--input-shape`` value when pinned; a model with symbolic dims left
is checked twice, at :data:`DEFAULT_DIM` and at a second, non-square size, or at the
``--check-shape`` shapes: see :mod:`eyefold.check.inputs`.

Both models run under onnxruntime when it is installed and can load both; else both run
under ``onnx.reference.ReferenceEvaluator``, and the result says why (see
:mod:`eyefold.check.backends`). With a target runtime, the optimized model runs there,
where it will be deployed. An optimized model that fails to run where the original ran
fails the check. Under the reference evaluator every output must be bit-identical.
Otherwise integer, bool and string outputs must be identical too, and floating outputs
must agree within :data:`FLOAT_TOLERANCES` (onnxruntime: for constant operands it may pick
other kernels, prepacked MatMul weights or fused constants, whose rounding differs in the
last bits), or :data:`RUNTIME_FLOAT_TOLERANCES` when another runtime ran the optimized
model; ``--check-rtol``/``--check-atol`` replace both.
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

from eyefold.check.backends import (
    ORT,
    REFERENCE,
    Run,
    Source,
    prepare_source,
    run_both,
    run_for_target,
    run_on,
)
from eyefold.check.inputs import (
    DEFAULT_DIM,
    INPUT_LIMIT_BYTES,
    inputs_from_file,
    random_inputs,
    second_sizes,
    sized_by_shapes,
    symbolic_dims,
)
from eyefold.check.saved import save_runs
from eyefold.check.settings import CheckSettings
from eyefold.errors import CheckFailedError, EyefoldError
from eyefold.runtime.installed import installed_version
from eyefold.runtime.runners import RunError

__all__ = [
    "DEFAULT_DIM",
    "FLOAT_TOLERANCES",
    "INPUT_LIMIT_BYTES",
    "RUNTIME_FLOAT_TOLERANCES",
    "CheckResult",
    "CheckSettings",
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
# (rtol, atol) per floating output type when OpenVINO, tract or TVM ran the optimized
# model: their CPU kernels fuse and reorder differently from onnxruntime. Measured on
# the samples (bit-identical) and the float32 real exports (at most 2.4e-7 apart); exports
# computing in float16 inside differ by up to 1.6e-3, and are then compared on the target
# runtime itself (:func:`_judge`).
RUNTIME_FLOAT_TOLERANCES: dict[ir.DataType, tuple[float, float]] = {
    ir.DataType.DOUBLE: (1e-10, 1e-12),
    ir.DataType.FLOAT: (1e-4, 1e-5),
    ir.DataType.FLOAT16: (1e-2, 1e-3),
    ir.DataType.BFLOAT16: (3e-2, 1e-2),
}


@dataclasses.dataclass
class CheckResult:
    """How ``--check`` compared the models.

    Attributes:
        backend: what ran the optimized model: "onnxruntime", "onnx.reference", or the
            target runtime ("openvino", "tract", "tvm").
        backend_reason: why the original did not run on onnxruntime as it is, when not.
        inputs: the shape fed to each graph input in the first check.
        defaulted_dims: symbolic dims that got :data:`DEFAULT_DIM` in the first check.
        outputs: output names compared.
        exact: True when every output had to be bit-identical.
        tolerances: the (rtol, atol) applied per floating output type, by type name.
        max_abs_diff: the largest difference seen per floating output (0.0 when equal).
        seconds: wall time of the whole check.
        inputs_from: the ``--check-inputs`` file the inputs came from (None: random).
        original_route: how the original ran when not as given (its unrunnable EyeLike
            nodes lowered), else None.
        optimized_route: how the optimized model ran when not as written, else None.
        backend_version: the version of the runtime that ran the optimized model.
        original_backend: what ran the original.
        output_backend: what ran the optimized model (the same as ``backend``).
        target_note: why the optimized model did not run on the target runtime, when a
            target was given and it did not.
        sizes: the size of every symbolic dim, per check (one dict per check run).
        shapes: the shape fed to each graph input, per check.
        saved: the ``.npz`` files written by ``--check-save``.
        unchecked_size: why the automatic second size was not checked (the original
            does not run there), None when it was or none was needed.
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
    original_backend: str | None = None
    output_backend: str | None = None
    target_note: str | None = None
    sizes: list[dict[str, int]] = dataclasses.field(default_factory=list)
    shapes: list[dict[str, list[int]]] = dataclasses.field(default_factory=list)
    saved: list[str] = dataclasses.field(default_factory=list)
    unchecked_size: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``check`` entry of the JSON report."""
        return dataclasses.asdict(self)

    def _what_ran(self) -> str:
        """Which models ran how, and why not as they are."""
        if self.original_backend not in (None, self.backend):
            ran = (
                f"the original ran on {self.original_backend}"
                + (f" with {self.original_route}" if self.original_route else "")
                + f", the result on {_named(self.backend, self.backend_version)}"
                " (the target runtime)"
            )
        elif self.original_route is None and self.optimized_route is None:
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
        if self.target_note:
            ran += f"; not on the target runtime: {self.target_note}"
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
        where = _named(self.backend, self.backend_version)
        if self.original_backend not in (None, self.backend):
            where = f"{self.original_backend} and {where}"
        line = f"check: {count} equal under {where} ({rule}); {self._what_ran()}"
        if self.inputs_from:
            line += f"; inputs from {self.inputs_from}"
        if any(self.sizes):
            runs = " then ".join(
                ", ".join(f"{k}={v}" for k, v in sizes.items()) for sizes in self.sizes
            )
            line += f"; symbolic dims at {runs} (choose with --check-shape)"
        if self.unchecked_size:
            line += f"; no second size: {self.unchecked_size}"
        if self.saved:
            line += f"; saved in {os.path.dirname(self.saved[0])}"
        return line


def _named(backend: str, version: str | None) -> str:
    return f"{backend} {version}" if version else backend


Tolerances = dict[ir.DataType, tuple[float, float]] | None  # None: bit-identical


def _mismatch(
    name: str, got: Any, want: Any, backend: str, tolerances: Tolerances
) -> str | None:
    """Why output ``name`` differs, or None when it is equal under the rules."""
    if isinstance(want, list) or isinstance(got, list):
        if not (isinstance(want, list) and isinstance(got, list)) or len(got) != len(want):
            return f"output {name!r} is a sequence in one model only, or of another length"
        for index, (g, w) in enumerate(zip(got, want, strict=True)):
            why = _mismatch(f"{name}[{index}]", g, w, backend, tolerances)
            if why:
                return why
        return None
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return (
            f"output {name!r} is {got.dtype}{list(got.shape)} instead of"
            f" {want.dtype}{list(want.shape)}"
        )
    if tolerances is None or not _is_float(want.dtype):
        if want.dtype == object:
            equal = got.tolist() == want.tolist()
        else:
            equal = got.tobytes() == want.tobytes()
        return None if equal else f"output {name!r} is not bit-identical under {backend}"
    rtol, atol = tolerances[_float_type(want.dtype)]
    g, w = got.astype(np.float64), want.astype(np.float64)
    close = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    if close.all():
        return None
    index = np.unravel_index(int(np.argmin(close)), close.shape)
    return (
        f"output {name!r} differs under {backend} at {tuple(int(i) for i in index)}:"
        f" {w[index]!r} -> {g[index]!r} (rtol={rtol:g}, atol={atol:g};"
        " --check-rtol/--check-atol set others)"
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
    want: dict[str, Any], got: dict[str, Any], backend: str, tolerances: Tolerances
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
        why = _mismatch(name, got[name], want[name], backend, tolerances)
        if why:
            raise CheckFailedError(f"--check failed: {why}")
    return {n: d for n in want if (d := _max_abs_diff(got[n], want[n])) is not None}


def _tolerances(run: Run, settings: CheckSettings) -> Tolerances:
    """The comparison rule of a run: bit-identical, or (rtol, atol) per floating type.

    Bit-identical when the reference evaluator ran both models and no tolerance was
    given; onnxruntime's defaults when it ran either, or one runtime ran both; the target
    runtime's when it ran only the optimized model. A given ``rtol``/``atol`` replaces
    the default of every type.
    """
    backends = {run.backend, run.ran_output_on}
    if backends == {REFERENCE}:
        if settings.rtol is None and settings.atol is None:
            return None
        base = dict.fromkeys(FLOAT_TOLERANCES, (0.0, 0.0))
    elif backends <= {ORT, REFERENCE} or len(backends) == 1:
        base = FLOAT_TOLERANCES
    else:
        base = RUNTIME_FLOAT_TOLERANCES
    return {
        t: (
            rtol if settings.rtol is None else settings.rtol,
            atol if settings.atol is None else settings.atol,
        )
        for t, (rtol, atol) in base.items()
    }


def _judge(
    run: Run,
    feeds: dict[str, np.ndarray],
    settings: CheckSettings,
    original: Source,
    scratch: str,
) -> tuple[Run, dict[str, float]]:
    """The run's largest float differences, once its outputs are equal by the rules.

    When the target runtime's floats differ from onnxruntime's beyond its tolerance, the
    difference may be the runtime's own (float16 inside, other kernels), not the
    optimization's: the original is then run on the target runtime too, and the two
    compared there; the returned run says so.

    Raises:
        CheckFailedError: an output differs.
    """
    try:
        return run, _compare(run.want, run.got, run.ran_output_on, _tolerances(run, settings))
    except CheckFailedError as error:
        target = run.output_backend
        if target in (None, ORT, REFERENCE):
            raise
        try:
            want = run_on(target, original, feeds, scratch, "original")
        except RunError:
            raise error from None
        reason = (
            f"{target}'s floats differ from {run.backend}'s beyond the tolerance for"
            f" {target}, so the original ran on {target} too"
        )
        settled = dataclasses.replace(
            run, want=want, backend=target, reason=reason, original=None
        )
        tolerances = _tolerances(settled, settings)
        return settled, _compare(want, run.got, target, tolerances)


def _tolerances_applied(
    want: dict[str, Any], diffs: dict[str, float], tolerances: Tolerances
) -> dict[str, dict[str, float]]:
    """The (rtol, atol) of each floating type among the compared outputs, by type name."""
    if tolerances is None:
        return {}
    float_types = {_float_type(np.asarray(want[n]).dtype) for n in diffs}
    return {
        t.name: {"rtol": r, "atol": a} for t, (r, a) in tolerances.items() if t in float_types
    }


def _run(
    original: Source,
    optimized: Source,
    feeds: dict[str, np.ndarray],
    settings: CheckSettings,
    scratch: str,
) -> Run:
    """Both models on ``feeds``; a model random inputs cannot run gets a hint."""
    try:
        if settings.target_runtime is None:
            return run_both(original, optimized, feeds)
        return run_for_target(original, optimized, feeds, settings.target_runtime, scratch)
    except CheckFailedError:
        raise
    except EyefoldError as error:
        if settings.inputs_path is not None:
            raise
        raise EyefoldError(
            f"{error}; if random inputs cannot run this model (indices, say), give"
            " real ones with --check-inputs FILE.npz"
        ) from None


def _check_count(model: ir.Model, settings: CheckSettings) -> int:
    """How many checks run: one per ``--check-shape`` given, and two for symbolic dims."""
    if settings.inputs_path is not None:
        return 1
    given = max((len(s) for s in settings.shapes.values()), default=1)
    first = {name: shapes[0] for name, shapes in settings.shapes.items()}
    sized = sized_by_shapes(model, first)
    free = [name for name in symbolic_dims(model) if name not in sized]
    return max(given, 2 if free else 1)


def _feeds(
    model: ir.Model, settings: CheckSettings, index: int, *, seed: int, square: bool
) -> tuple[dict[str, np.ndarray], dict[str, int], dict[str, int]]:
    """The feeds of check ``index``, the size of each symbolic dim, and the defaulted ones.

    The first check gives free symbolic dims :data:`DEFAULT_DIM`; later ones
    :func:`second_sizes`. ``--check-shape`` sizes the dims of the inputs it names.
    """
    if settings.inputs_path is not None:
        return inputs_from_file(model, settings.inputs_path), {}, {}
    shapes = {n: s[min(index, len(s) - 1)] for n, s in settings.shapes.items()}
    given = sized_by_shapes(model, shapes)
    free = [name for name in symbolic_dims(model) if name not in given]
    sizes = dict(given)
    if index > 0:
        sizes.update(second_sizes(free, square=square))
    feeds, used = random_inputs(model, seed=seed, sizes=sizes)
    defaulted = {n: v for n, v in used.items() if n not in sizes}
    return feeds, used, defaulted


def _sizes_text(sizes: dict[str, int]) -> str:
    return ", ".join(f"{name}={size}" for name, size in sizes.items())


def _second_size(
    model: ir.Model,
    settings: CheckSettings,
    index: int,
    seed: int,
    sizes: dict[str, int],
    error: EyefoldError,
    sources: tuple[Source, Source],
    scratch: str,
) -> tuple[Run, dict[str, np.ndarray], dict[str, int]] | str:
    """The automatic second check when the original does not run at its non-square size.

    The model may need some symbolic dims equal: they are tried all at 3. A model whose
    original runs at no second size (a dim that must be 2) is not made to fail by a size
    it was never meant for: the reason is returned instead, and the summary says it.

    Raises:
        CheckFailedError: the original runs at the square size and the result does not.
    """
    why = f"the original does not run at {_sizes_text(sizes)} ({error})"
    if len(set(sizes.values())) < 2:
        return why
    try:
        feeds, square, _ = _feeds(model, settings, index, seed=seed, square=True)
        return _run(*sources, feeds, settings, scratch), feeds, square
    except CheckFailedError:
        raise
    except EyefoldError as again:
        return (
            f"the original does not run at {_sizes_text(sizes)}, nor with those dims"
            f" equal ({again})"
        )


def check_equivalence(
    original: ir.Model | onnx.ModelProto | str | os.PathLike[str],
    optimized: ir.Model | onnx.ModelProto,
    *,
    seed: int = 0,
    workdir: str | None = None,
    inputs_path: str | None = None,
    settings: CheckSettings | None = None,
) -> CheckResult:
    """Runs both models on the same inputs and requires equal outputs.

    Neither model is changed. Inputs are generated from the optimized model's graph inputs,
    where ``--input-shape`` pins are applied; a model with symbolic dims is checked twice,
    at two sizes (or at the ``--check-shape`` shapes).

    Args:
        original: the model as given, best passed as its file path (nothing is copied).
        optimized: the optimized model.
        seed: seed of the random inputs.
        workdir: folder for a temporary copy of a model too large to pass in memory.
        inputs_path: an ``.npz`` file with one array per graph input (``--check-inputs``);
            None: random inputs. The same as ``settings.inputs_path``.
        settings: check shapes, tolerances, where to save, the target runtime.

    Returns:
        How the models were compared.

    Raises:
        CheckFailedError: an output differs, or the optimized model fails where the
            original runs.
        EyefoldError: the inputs cannot be generated or the original does not run at all.
    """
    start = time.perf_counter()
    settings = settings or CheckSettings()
    if inputs_path is not None:
        settings = dataclasses.replace(settings, inputs_path=inputs_path)
    optimized_model = (
        ir.serde.deserialize_model(optimized)
        if isinstance(optimized, onnx.ModelProto)
        else optimized
    )
    count = _check_count(optimized_model, settings)
    runs: list[tuple[Run, dict[str, np.ndarray], dict[str, int]]] = []
    defaulted: dict[str, int] = {}
    diffs: dict[str, float] = {}
    saved: list[str] = []
    unchecked: str | None = None
    with tempfile.TemporaryDirectory(prefix="eyefold-check-", dir=workdir) as scratch:
        optimized_source = prepare_source(optimized, scratch, "optimized")
        original_source = prepare_source(original, scratch, "original")
        sources = (original_source, optimized_source)
        automatic_from = max((len(s) for s in settings.shapes.values()), default=1)
        for index in range(count):
            feeds, sizes, first_defaulted = _feeds(
                optimized_model, settings, index, seed=seed, square=False
            )
            try:
                run = _run(original_source, optimized_source, feeds, settings, scratch)
            except CheckFailedError:
                raise
            except EyefoldError as error:
                if index < automatic_from:  # the first size, or one the user chose
                    raise
                second = _second_size(
                    optimized_model, settings, index, seed, sizes, error, sources, scratch
                )
                if isinstance(second, str):
                    unchecked = second
                    break
                run, feeds, sizes = second
            if index == 0:
                defaulted = first_defaulted
            runs.append((run, feeds, sizes))
        try:
            for index, (run, feeds, sizes) in enumerate(runs):
                run, run_diffs = _judge(run, feeds, settings, original_source, scratch)
                runs[index] = (run, feeds, sizes)
                for name, diff in run_diffs.items():
                    diffs[name] = max(diff, diffs.get(name, 0.0))
        finally:  # a failed check is saved too, to replay
            saved = save_runs(settings.save_dir, [(f, r.want, r.got) for r, f, _ in runs])
    # A run whose original had to run on the target runtime too (see _judge) is the one
    # the result describes.
    settled = [r for r, _, _ in runs if r.output_backend and r.backend == r.output_backend]
    run, feeds, _ = runs[0]
    run = settled[0] if settled else run
    tolerances = _tolerances(run, settings)
    output_version = (
        None if run.ran_output_on == REFERENCE else installed_version(run.ran_output_on)
    )
    return CheckResult(
        backend=run.ran_output_on,
        backend_reason=run.reason,
        inputs={name: list(array.shape) for name, array in feeds.items()},
        defaulted_dims=defaulted,
        outputs=list(run.want),
        exact=tolerances is None,
        tolerances=_tolerances_applied(run.want, diffs, tolerances),
        max_abs_diff=diffs,
        seconds=time.perf_counter() - start,
        inputs_from=settings.inputs_path,
        original_route=run.original,
        optimized_route=run.optimized,
        backend_version=output_version,
        original_backend=run.backend,
        output_backend=run.ran_output_on,
        target_note=run.target_note,
        sizes=[sizes for _, _, sizes in runs],
        shapes=[{n: list(a.shape) for n, a in f.items()} for _, f, _ in runs],
        saved=saved,
        unchecked_size=unchecked,
    )
