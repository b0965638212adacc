"""What one runtime runs of the ops eyefold may write for an EyeLike: :class:`RuntimeProfile`.

An EyeLike a runtime cannot run is rewritten into casts around a combination it runs, or
into eyefold's lowered form (``LowerEyeLikePass``). Whether a runtime runs each of those
is its profile: the EyeLike combinations (:class:`~eyefold.runtime.table.EyeLikeSupport`),
the Casts between element types and the output types of the lowered form it returns
correctly, and whether it fills a ConstantOfShape without ``value`` as the spec says, each
measured on the runtime (``eyefold/runtime/measured.py``). A form runs when
each of its ops does: the measurements of whole forms on every runtime
(``benchmarks/runtime_reach.py``) confirm that they compose.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable

import onnx_ir as ir

from eyefold.core.eyelike_types import allowed_types
from eyefold.runtime.table import EyeLikeSupport

__all__ = ["CAST_BFLOAT16_OPSET", "CastPair", "RuntimeProfile", "spec_allows_cast"]

# Cast takes bfloat16 from Cast-13 on (EyeLike itself only from EyeLike-22).
CAST_BFLOAT16_OPSET = 13

CastPair = tuple[ir.DataType, ir.DataType]


def spec_allows_cast(data_type: ir.DataType, opset: int | None) -> bool:
    """Whether a Cast from or to ``data_type`` exists at ``opset`` (bfloat16: Cast-13)."""
    return data_type != ir.DataType.BFLOAT16 or opset is None or opset >= CAST_BFLOAT16_OPSET


@dataclasses.dataclass(frozen=True)
class RuntimeProfile:
    """What one runtime runs of EyeLike, of Cast, and of the lowered form.

    Attributes:
        support: the EyeLike combinations it runs (and where that table came from).
        casts: the (from, to) Casts it runs and returns correctly, identity casts included.
        lowered: the output types whose lowered form it runs and returns correctly.
        implicit_fill: whether it runs a ConstantOfShape without ``value`` declared FLOAT
            (the spec's default); where not, eyefold spells the default out in front of
            the EyeLike nodes it keeps (``eyefold/passes/explicit_fill.py``).
    """

    support: EyeLikeSupport
    casts: frozenset[CastPair]
    lowered: frozenset[ir.DataType]
    implicit_fill: bool = True

    @property
    def runtime(self) -> str:
        """The runtime's name, e.g. ``tract``."""
        return self.support.runtime

    def describe(self) -> str:
        """The runtime, its version and where the table came from, in words."""
        return self.support.describe()

    @functools.cached_property
    def lacks(self) -> frozenset[ir.DataType]:
        """Element types the runtime cannot hold at all: no Cast from or to them runs.

        tract has no bfloat16: a model with a bfloat16 tensor anywhere does not load.
        Read for every form tried, so computed once per profile.
        """
        held = {t for pair in self.casts for t in pair}
        return frozenset(t for t in allowed_types(None) if t not in held)

    def lacking(self, types: Iterable[ir.DataType | None]) -> list[ir.DataType]:
        """Those of ``types`` the runtime cannot hold, in order, without repeats."""
        lacks = self.lacks
        return list(dict.fromkeys(t for t in types if t is not None and t in lacks))

    def runs_eyelike(
        self, source: ir.DataType | None, dtype: ir.DataType | None, opset: int | None
    ) -> bool | None:
        """Whether it runs EyeLike(``source`` input, ``dtype``); None: cannot be told."""
        return self.support.verdict(source, dtype, opset)

    def runs_cast(
        self, source: ir.DataType | None, target: ir.DataType, opset: int | None
    ) -> bool:
        """Whether ``Cast(to=target)`` of a ``source`` tensor runs (None: any input type).

        Equal types need no Cast. From an unknown type, every type the runtime holds
        must cast.
        """
        if source == target:
            return True
        if not spec_allows_cast(target, opset):
            return False
        if source is None:
            sources = allowed_types(opset) - self.lacks - {target}
            return all(self.runs_cast(t, target, opset) for t in sources)
        return spec_allows_cast(source, opset) and (source, target) in self.casts

    def runs_lowered(self, source: ir.DataType | None, output_type: ir.DataType) -> bool:
        """Whether eyefold's lowered form of an EyeLike with this output type runs."""
        return source not in self.lacks and output_type in self.lowered
