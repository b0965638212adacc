"""What one runtime runs of EyeLike: the :class:`EyeLikeSupport` table and the fallback one.

A combination is ``(input type, dtype attribute)``, the attribute being None when absent
(the output then has the input's type). EyeLike-22 allows 13 input types and 13 dtypes or
none: 182 combinations; EyeLike-9 (opsets 9..21) has no bfloat16: 156.

The table is only data and its questions (does this combination run, natively or through
casts the runtime adds): the probe (:mod:`eyefold.runtime.probe`), the cache
(:mod:`eyefold.runtime.cache`) and the fallback all build the same type.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import onnx_ir as ir

from eyefold.core.eyelike_types import (
    EYELIKE_TYPES_OPSET_9,
    EYELIKE_TYPES_OPSET_22,
    allowed_types,
)

__all__ = [
    "CACHE_FORMAT",
    "EYELIKE_VERSIONS",
    "FALLBACK_NATIVE",
    "FALLBACK_SUPPORTED",
    "Combination",
    "EyeLikeSupport",
    "Source",
    "all_combinations",
    "eyelike_version",
]

# Bump when the probe or the file layout changes, so old cache files are re-measured.
CACHE_FORMAT = 1

Combination = tuple[ir.DataType, ir.DataType | None]
Source = Literal["probe", "cache", "fallback", "table"]

# The EyeLike versions (since_version of the schema) a table covers.
EYELIKE_VERSIONS = (9, 22)

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
        source: ``probe`` (measured now), ``cache`` (measured earlier, same version),
            ``fallback`` (the table measured with onnxruntime 1.32) or ``table`` (the
            table eyefold ships for a runtime it does not probe, see ``measured``).
        supported: per EyeLike version, the combinations that load and run correctly.
        native: the subset the runtime's own kernel implements, without casts of its own.
        measured: for a ``table``, the version it was measured with and when, e.g.
            ``0.23.9 on 2026-12-01``.
    """

    runtime: str
    version: str | None
    source: Source
    supported: Mapping[int, frozenset[Combination]]
    native: Mapping[int, frozenset[Combination]]
    measured: str | None = None

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
        """E.g. ``onnxruntime 1.32.0``; a verdict from a built-in table says so."""
        if self.source not in ("fallback", "table"):
            return f"{self.runtime} {self.version}"
        installed = self.version or "(not installed)"
        measured = self.measured or "1.32"
        return f"{self.runtime} {installed} (by the table measured with {measured})"

    def to_json(self) -> dict[str, Any]:
        """The cache file's content."""

        def encode(pairs: frozenset[Combination]) -> list[list[str | None]]:
            rows = [[i.name, None if o is None else o.name] for i, o in pairs]
            return sorted(rows, key=lambda r: (r[0], r[1] or ""))

        return {
            "format": CACHE_FORMAT,
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
