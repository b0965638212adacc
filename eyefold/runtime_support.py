"""Which EyeLike type combinations a runtime can run, measured on the installed runtime.

A combination is ``(input type, dtype attribute)``, the attribute being None when absent
(the output then has the input's type). EyeLike-22 allows 13 input types and 13 dtypes or
none: 182 combinations; EyeLike-9 (opsets 9..21) has no bfloat16: 156.

For onnxruntime the answer is measured, not guessed: one tiny single-node session per
combination (symbolic input shape, graph optimizations off, one thread), which must load
*and* return the identity matrix bit for bit. That takes well under a second; the result is
cached as JSON per onnxruntime version in the user cache folder (``$EYEFOLD_CACHE_DIR``, else
``$XDG_CACHE_HOME/eyefold``, else ``~/.cache/eyefold``). The kernel registry onnxruntime
exposes (``get_all_opkernel_def``) is read too, but only to tell native combinations from
those onnxruntime runs by inserting casts of its own (float16 on CPU): it lists the CPU
kernel's types and misses what those casts add, so it cannot replace the probe.

Without onnxruntime installed, :data:`FALLBACK_SUPPORTED` (measured with onnxruntime 1.32)
stands in. Nothing here probes unless asked to, so a pipeline without a target runtime
never imports onnxruntime.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import logging
import os
import pathlib
import tempfile
import time
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import numpy as np
import onnx
import onnx_ir as ir

from eyefold import kernel
from eyefold.errors import EyefoldError
from eyefold.eyelike_types import EYELIKE_TYPES_OPSET_9, EYELIKE_TYPES_OPSET_22, allowed_types
from eyefold.runtimes import SUPPORTED_RUNTIMES, installed_version

__all__ = [
    "CACHE_DIR_ENV",
    "FALLBACK_NATIVE",
    "FALLBACK_SUPPORTED",
    "SUPPORTED_RUNTIMES",
    "Combination",
    "EyeLikeSupport",
    "all_combinations",
    "cache_dir",
    "cache_path",
    "check_runtime",
    "eyelike_version",
    "fallback_support",
    "get_support",
    "probe_onnxruntime",
]

logger = logging.getLogger(__name__)

CACHE_DIR_ENV = "EYEFOLD_CACHE_DIR"
# Bump when the probe or the file layout changes, so old cache files are re-measured.
_CACHE_FORMAT = 1

Combination = tuple[ir.DataType, ir.DataType | None]
Source = Literal["probe", "cache", "fallback"]

# The EyeLike versions (since_version of the schema) and the opset each is probed at.
_PROBE_OPSETS = {9: 21, 22: 22}

_D = ir.DataType
_FALLBACK_INPUTS = (_D.DOUBLE, _D.FLOAT, _D.FLOAT16, _D.INT32, _D.INT64, _D.UINT64)
_FALLBACK_OUTPUTS = (_D.DOUBLE, _D.FLOAT, _D.INT32, _D.INT64, _D.UINT64)


def _table(inputs: Iterable[ir.DataType], outputs: Iterable[ir.DataType]) -> frozenset:
    outputs = tuple(outputs)
    pairs: set[Combination] = {(i, o) for i in inputs for o in outputs}
    pairs |= {(i, None) for i, o in list(pairs) if i == o}
    return frozenset(pairs)


# Measured with onnxruntime 1.32 (CPU): inputs {double, float, float16, int32, int64, uint64}
# x outputs {double, float, int32, int64, uint64}, plus float16 -> float16 (with or without
# dtype), which onnxruntime runs through its own float casts: 37 of 182 combinations. The
# same for EyeLike-9 and EyeLike-22.
FALLBACK_SUPPORTED: frozenset[Combination] = _table(_FALLBACK_INPUTS, _FALLBACK_OUTPUTS) | {
    (_D.FLOAT16, _D.FLOAT16),
    (_D.FLOAT16, None),
}
# What the CPU kernel registers itself (no float16): the rest needs onnxruntime's casts.
FALLBACK_NATIVE: frozenset[Combination] = _table(_FALLBACK_OUTPUTS, _FALLBACK_OUTPUTS)


def eyelike_version(opset: int | None) -> int:
    """The EyeLike schema version in force at a default-domain opset (None: the newest)."""
    return 9 if opset is not None and opset < 22 else 22


def all_combinations(version: int = 22) -> list[Combination]:
    """Every (input type, dtype or None) EyeLike-``version`` allows, in a stable order."""
    types = EYELIKE_TYPES_OPSET_22 if version >= 22 else EYELIKE_TYPES_OPSET_9
    ordered = sorted(types, key=lambda t: t.name)
    return [(i, o) for i in ordered for o in [None, *ordered]]


@dataclasses.dataclass(frozen=True)
class EyeLikeSupport:
    """The EyeLike combinations one runtime runs, per EyeLike version (9 and 22).

    Attributes:
        runtime: the runtime's name, e.g. ``onnxruntime``.
        version: its version, None when it is not installed.
        source: ``probe`` (measured now), ``cache`` (measured earlier, same version) or
            ``fallback`` (the table measured with onnxruntime 1.32).
        supported: per EyeLike version, the combinations that load and run correctly.
        native: the subset the runtime's own kernel implements, without casts of its own.
    """

    runtime: str
    version: str | None
    source: Source
    supported: Mapping[int, frozenset[Combination]]
    native: Mapping[int, frozenset[Combination]]

    def runs(
        self, input_type: ir.DataType, dtype: ir.DataType | None, opset: int | None
    ) -> bool:
        """Whether EyeLike(input of ``input_type``, dtype=``dtype``) runs at ``opset``."""
        return (input_type, dtype) in self.supported.get(eyelike_version(opset), frozenset())

    def verdict(
        self, source: ir.DataType | None, dtype: ir.DataType | None, opset: int | None
    ) -> bool | None:
        """Like :meth:`runs`, for an input type that may be unknown (None: cannot tell).

        With the input type unknown, the answer is known only when ``dtype`` is set and the
        runtime runs it for every input type, or for none.
        """
        if source is not None:
            return self.runs(source, dtype, opset)
        if dtype is None:
            return None
        verdicts = {self.runs(t, dtype, opset) for t in allowed_types(opset)}
        return verdicts.pop() if len(verdicts) == 1 else None

    def is_native(
        self, input_type: ir.DataType, dtype: ir.DataType | None, opset: int | None
    ) -> bool:
        """Whether the runtime's kernel runs the combination without inserting casts."""
        return (input_type, dtype) in self.native.get(eyelike_version(opset), frozenset())

    def hidden_casts(
        self, input_type: ir.DataType, dtype: ir.DataType | None, opset: int | None
    ) -> int:
        """Casts the runtime inserts itself to run a supported combination (0 if native).

        A type the kernel takes natively on one side costs nothing there; each other side
        costs one cast the runtime adds (onnxruntime's CPU float16 <-> float casts).
        """
        if self.is_native(input_type, dtype, opset):
            return 0
        pairs = self.native.get(eyelike_version(opset), frozenset())
        inputs = {i for i, _ in pairs}
        outputs = {i if o is None else o for i, o in pairs}
        output_type = input_type if dtype is None else dtype
        return max(1, (input_type not in inputs) + (output_type not in outputs))

    def describe(self) -> str:
        """E.g. ``onnxruntime 1.32.0``; a verdict from the fallback table says so."""
        if self.source != "fallback":
            return f"{self.runtime} {self.version}"
        installed = self.version or "(not installed)"
        return f"{self.runtime} {installed} (by the table measured with 1.32)"

    def to_json(self) -> dict[str, Any]:
        """The cache file's content."""

        def encode(pairs: frozenset[Combination]) -> list[list[str | None]]:
            rows = [[i.name, None if o is None else o.name] for i, o in pairs]
            return sorted(rows, key=lambda r: (r[0], r[1] or ""))

        return {
            "format": _CACHE_FORMAT,
            "runtime": self.runtime,
            "version": self.version,
            "eyelike": {
                str(v): {
                    "supported": encode(self.supported[v]),
                    "native": encode(self.native[v]),
                }
                for v in sorted(self.supported)
            },
        }


def _decode(rows: list[list[str | None]]) -> frozenset[Combination]:
    pairs: set[Combination] = set()
    for input_name, output_name in rows:
        assert isinstance(input_name, str)
        pairs.add((_D[input_name], None if output_name is None else _D[output_name]))
    return frozenset(pairs)


def fallback_support(
    runtime: str = "onnxruntime", version: str | None = None
) -> EyeLikeSupport:
    """The table measured with onnxruntime 1.32, for when no measurement is at hand."""
    check_runtime(runtime)
    return EyeLikeSupport(
        runtime=runtime,
        version=version,
        source="fallback",
        supported=dict.fromkeys(_PROBE_OPSETS, FALLBACK_SUPPORTED),
        native=dict.fromkeys(_PROBE_OPSETS, FALLBACK_NATIVE),
    )


def cache_dir() -> pathlib.Path:
    """``$EYEFOLD_CACHE_DIR``, else ``$XDG_CACHE_HOME/eyefold``, else ``~/.cache/eyefold``."""
    explicit = os.environ.get(CACHE_DIR_ENV)
    if explicit:
        return pathlib.Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = pathlib.Path(xdg) if xdg else pathlib.Path.home() / ".cache"
    return base / "eyefold"


def cache_path(runtime: str, version: str) -> pathlib.Path:
    """Where the measurement of ``runtime`` ``version`` is cached."""
    safe_version = "".join(c if c.isalnum() or c in ".+-_" else "_" for c in version)
    return cache_dir() / f"{runtime}-{safe_version}-eyelike.json"


def _read_cache(runtime: str, version: str) -> EyeLikeSupport | None:
    path = cache_path(runtime, version)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if (
            data.get("format") != _CACHE_FORMAT
            or data.get("runtime") != runtime
            or data.get("version") != version
        ):
            logger.info("ignoring %s: written for another version or format", path)
            return None
        tables = data["eyelike"]
        return EyeLikeSupport(
            runtime=runtime,
            version=version,
            source="cache",
            supported={v: _decode(tables[str(v)]["supported"]) for v in _PROBE_OPSETS},
            native={v: _decode(tables[str(v)]["native"]) for v in _PROBE_OPSETS},
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AssertionError) as error:
        logger.warning("ignoring the unreadable cache file %s (%s)", path, error)
        return None


def _write_cache(support: EyeLikeSupport) -> None:
    assert support.version is not None
    path = cache_path(support.runtime, support.version)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            "w",
            encoding="utf-8",
            dir=path.parent,
            prefix=path.name,
            suffix=".tmp",
            delete=False,
        ) as handle:
            json.dump(support.to_json(), handle, indent=1)
            handle.write("\n")
        os.replace(handle.name, path)
    except OSError as error:
        # The measurement is still used; it will just be repeated next time.
        logger.warning("cannot write the runtime-support cache %s: %s", path, error)


def _probe_model(opset: int, input_type: ir.DataType, dtype: ir.DataType | None) -> bytes:
    output_type = input_type if dtype is None else dtype
    attributes = {} if dtype is None else {"dtype": int(dtype)}
    node = onnx.helper.make_node("EyeLike", ["x"], ["y"], k=1, **attributes)
    graph = onnx.helper.make_graph(
        [node],
        "eyefold_probe",
        [onnx.helper.make_tensor_value_info("x", int(input_type), ["rows", "cols"])],
        [onnx.helper.make_tensor_value_info("y", int(output_type), ["rows", "cols"])],
    )
    model = onnx.helper.make_model(
        graph, opset_imports=[onnx.helper.make_opsetid("", opset)], ir_version=10
    )
    return model.SerializeToString()


def _probe_one(ort: Any, options: Any, opset: int, combination: Combination) -> bool:
    input_type, dtype = combination
    output_type = input_type if dtype is None else dtype
    try:
        session = ort.InferenceSession(
            _probe_model(opset, input_type, dtype), options, providers=["CPUExecutionProvider"]
        )
        raw = np.zeros((2, 3), dtype=input_type.numpy())
        if input_type.itemsize == 2:  # float16/bfloat16/(u)int16: hand over raw bits
            raw = raw.view(np.uint16)
        feed = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(raw, int(input_type))
        (result,) = session.run_with_ort_values(["y"], {"x": feed})
        got = ctypes.string_at(result.data_ptr(), result.tensor_size_in_bytes())
    except Exception:  # onnxruntime raises many types; any means "cannot run"
        return False
    return got == kernel.eye(2, 3, k=1, dtype=output_type).tobytes()


def _registered_types(version: int) -> tuple[set[str], set[str]] | None:
    """(T1, T2) type names of the CPU EyeLike kernel registered for ``version``."""
    try:
        from onnxruntime.capi import _pybind_state

        kernel_defs = _pybind_state.get_all_opkernel_def()
    except (ImportError, AttributeError, RuntimeError):
        return None
    for kernel_def in kernel_defs:
        low, high = kernel_def.version_range
        if (
            kernel_def.op_name == "EyeLike"
            and kernel_def.domain in ("", "ai.onnx")
            and kernel_def.provider == "CPUExecutionProvider"
            and low <= version <= high
        ):
            constraints = kernel_def.type_constraints
            return _type_names(constraints["T1"]), _type_names(constraints["T2"])
    return None


def _type_names(type_strings: Iterable[str]) -> set[str]:
    """``tensor(float)`` -> ``float``."""
    return {t.removeprefix("tensor(").removesuffix(")") for t in type_strings}


def _native_subset(
    supported: frozenset[Combination], registered: tuple[set[str], set[str]] | None
) -> frozenset[Combination]:
    if registered is None:
        return supported
    inputs, outputs = registered

    def onnx_name(data_type: ir.DataType) -> str:
        return data_type.name.lower()

    return frozenset(
        (i, o)
        for i, o in supported
        if onnx_name(i) in inputs and onnx_name(i if o is None else o) in outputs
    )


def probe_onnxruntime() -> EyeLikeSupport:
    """Measures the installed onnxruntime (no cache involved).

    Raises:
        EyefoldError: onnxruntime is not installed.
    """
    try:
        import onnxruntime as ort
    except (ImportError, OSError):  # not installed, or its shared library cannot load
        raise EyefoldError("onnxruntime is not installed; cannot probe it") from None
    start = time.perf_counter()
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4  # refusals are the expected outcome, not news
    options.intra_op_num_threads = 1  # a thread pool per session is most of the load time
    options.inter_op_num_threads = 1
    supported: dict[int, frozenset[Combination]] = {}
    native: dict[int, frozenset[Combination]] = {}
    for version, opset in _PROBE_OPSETS.items():
        supported[version] = frozenset(
            c for c in all_combinations(version) if _probe_one(ort, options, opset, c)
        )
        native[version] = _native_subset(supported[version], _registered_types(version))
    logger.info(
        "probed onnxruntime %s EyeLike support in %.2f s: %d of %d combinations run",
        ort.__version__,
        time.perf_counter() - start,
        len(supported[22]),
        len(all_combinations(22)),
    )
    return EyeLikeSupport("onnxruntime", ort.__version__, "probe", supported, native)


def check_runtime(runtime: str) -> None:
    """Raises EyefoldError unless ``runtime`` is one eyefold can target."""
    if runtime not in SUPPORTED_RUNTIMES:
        raise EyefoldError(
            f"unknown target runtime {runtime!r}; supported: {', '.join(SUPPORTED_RUNTIMES)}"
        )


def get_support(runtime: str = "onnxruntime", *, probe: bool = True) -> EyeLikeSupport:
    """What ``runtime`` runs: the cached measurement for its version, else a new one.

    Args:
        runtime: the target runtime; only ``onnxruntime`` is known.
        probe: measure (and cache) when no cache file exists for the installed version.
            False never creates a session: the cache, else the fallback table.

    Returns:
        The measurement, or :func:`fallback_support` when onnxruntime is not installed.

    Raises:
        EyefoldError: an unknown runtime name.
    """
    check_runtime(runtime)
    version = installed_version(runtime)
    if version is None:
        return fallback_support(runtime)
    cached = _read_cache(runtime, version)
    if cached is not None:
        return cached
    if not probe:
        return fallback_support(runtime, version)
    try:
        measured = probe_onnxruntime()
    except EyefoldError:  # installed, but its shared library cannot load
        return fallback_support(runtime)
    _write_cache(measured)
    return measured
