"""The tables eyefold ships: what each runtime ran, measured here with a stated version.

Measured on 2026-12-01 with ``python benchmarks/runtime_reach.py --tables`` (CPU, one
thread, Python 3.11, x86-64 Linux): each cell is one single-node model with a dynamic
input ``[n, m]`` fed a 4 x 5 array, counted when the runtime loads it, runs it and returns
the expected matrix bit for bit in the expected type. Three grids per runtime:

- ``eyelike``: EyeLike-22 (opset 22), one row per input type, one column per ``dtype``
  (the first column: no ``dtype``). Measured at opset 21 (EyeLike-9) too, every runtime
  gave the same grid without bfloat16, which is how the EyeLike-9 table is derived;
- ``cast``: ``Cast(x, to=column)`` of a row-typed input;
- ``lowered``: eyefold's lowered form (``LowerEyeLikePass``), per output type;
- ``implicit_fill``: ``EyeLike(ConstantOfShape(Shape(x)))`` at opset 20, the
  ConstantOfShape without ``value`` and its output declared FLOAT, as torch.onnx's dynamo
  exporter writes a diagonal mask (measured on 2026-12-03 on onnxruntime, OpenVINO and
  tract by ``tests/core/test_explicit_fill.py``; TVM, not installed there, is taken to follow
  the spec).

``#`` runs, ``.`` does not. What the grids record, in words:

- onnxruntime 1.32.0: every Cast and every lowered form (its EyeLike table is probed on
  the installed version, see :mod:`eyefold.runtime.support`);
- OpenVINO 2026.4.1: everything;
- tract 0.23.9: no bfloat16 anywhere ("Unknown DatumType Bfloat16"); no EyeLike with a
  bool output ("Bool is not a number"); no Cast to int64, whose result tract types as its
  internal shape type TDim ("Unsupported DatumType in the public API TDim"); a
  ConstantOfShape without ``value`` fills float64, not the spec's float32 ("Impossible to
  unify F32 with F64" where its output is declared FLOAT);
- TVM (apache-tvm 0.27.0.post1, Relax, llvm): EyeLike only without ``dtype`` or with the
  input's type ("dtype mismatch between input and attribute"); no Cast from bfloat16 to
  an integer type ("Data type T.bfloat16 not supported for finiteness ops").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import onnx_ir as ir

from eyefold.core.eyelike_types import EYELIKE_TYPES_OPSET_9, EYELIKE_TYPES_OPSET_22
from eyefold.runtime.table import Combination

__all__ = ["MEASURED", "MEASURED_ON", "MeasuredTable"]

MEASURED_ON = "2026-12-01"

# Grid columns: the EyeLike types by name, the order of support.all_combinations.
_TYPES = tuple(sorted(EYELIKE_TYPES_OPSET_22, key=lambda t: t.name))


@dataclasses.dataclass(frozen=True)
class MeasuredTable:
    """One runtime's measurement.

    Attributes:
        runtime: e.g. ``tract``.
        version: the version measured.
        date: when (ISO date).
        eyelike: per EyeLike version (9, 22), the combinations that ran; None for a
            runtime whose EyeLike support is probed on the installed version instead.
        casts: the (from, to) Casts that ran.
        lowered: the output types whose lowered form ran.
        implicit_fill: whether ``EyeLike(ConstantOfShape(Shape(x)))`` ran, the
            ConstantOfShape without ``value`` and its output declared FLOAT.
    """

    runtime: str
    version: str
    date: str
    eyelike: Mapping[int, frozenset[Combination]] | None
    casts: frozenset[tuple[ir.DataType, ir.DataType]]
    lowered: frozenset[ir.DataType]
    implicit_fill: bool


def _rows(grid: Sequence[str], columns: Sequence[ir.DataType | None]) -> set[tuple]:
    """(row type, column) for every ``#`` of a grid whose rows start with the type's name."""
    cells = set()
    for line in grid:
        name, marks = line.split()
        assert len(marks) == len(columns), line
        cells |= {
            (ir.DataType[name], c) for c, m in zip(columns, marks, strict=True) if m == "#"
        }
    return cells


def _table(
    runtime: str,
    version: str,
    eyelike: Sequence[str] | None,
    cast: Sequence[str],
    lowered: str,
    *,
    implicit_fill: bool = True,
) -> MeasuredTable:
    per_version = None
    if eyelike is not None:
        newest = frozenset(_rows(eyelike, (None, *_TYPES)))
        older = frozenset(
            (i, o)
            for i, o in newest
            if i in EYELIKE_TYPES_OPSET_9 and (o is None or o in EYELIKE_TYPES_OPSET_9)
        )
        per_version = {9: older, 22: newest}
    return MeasuredTable(
        runtime=runtime,
        version=version,
        date=MEASURED_ON,
        eyelike=per_version,
        casts=frozenset(_rows(cast, _TYPES)),
        lowered=frozenset(t for t, m in zip(_TYPES, lowered, strict=True) if m == "#"),
        implicit_fill=implicit_fill,
    )


_ALL_CASTS = [f"{t.name} {'#' * len(_TYPES)}" for t in _TYPES]

#                  EyeLike columns: none BFLOAT16 BOOL DOUBLE FLOAT FLOAT16 INT16 INT32
#                  INT64 INT8 UINT16 UINT32 UINT64 UINT8 (Cast columns: the same, no none)
MEASURED: dict[str, MeasuredTable] = {
    "onnxruntime": _table("onnxruntime", "1.32.0", None, _ALL_CASTS, "#############"),
    "openvino": _table(
        "openvino",
        "2026.4.1",
        [f"{t.name} {'#' * (len(_TYPES) + 1)}" for t in _TYPES],
        _ALL_CASTS,
        "#############",
    ),
    "tract": _table(
        "tract",
        "0.23.9",
        [
            "BFLOAT16 ..............",
            "BOOL     ...###########",
            "DOUBLE   #..###########",
            "FLOAT    #..###########",
            "FLOAT16  #..###########",
            "INT16    #..###########",
            "INT32    #..###########",
            "INT64    #..###########",
            "INT8     #..###########",
            "UINT16   #..###########",
            "UINT32   #..###########",
            "UINT64   #..###########",
            "UINT8    #..###########",
        ],
        [
            "BFLOAT16 .............",
            "BOOL     .######.#####",
            "DOUBLE   .######.#####",
            "FLOAT    .######.#####",
            "FLOAT16  .######.#####",
            "INT16    .######.#####",
            "INT32    .######.#####",
            "INT64    .######.#####",
            "INT8     .######.#####",
            "UINT16   .######.#####",
            "UINT32   .######.#####",
            "UINT64   .######.#####",
            "UINT8    .######.#####",
        ],
        ".############",
        implicit_fill=False,
    ),
    "tvm": _table(
        "tvm",
        "0.27.0.post1",
        [
            "BFLOAT16 ##............",
            "BOOL     #.#...........",
            "DOUBLE   #..#..........",
            "FLOAT    #...#.........",
            "FLOAT16  #....#........",
            "INT16    #.....#.......",
            "INT32    #......#......",
            "INT64    #.......#.....",
            "INT8     #........#....",
            "UINT16   #.........#...",
            "UINT32   #..........#..",
            "UINT64   #...........#.",
            "UINT8    #............#",
        ],
        [
            "BFLOAT16 #####........",
            "BOOL     #############",
            "DOUBLE   #############",
            "FLOAT    #############",
            "FLOAT16  #############",
            "INT16    #############",
            "INT32    #############",
            "INT64    #############",
            "INT8     #############",
            "UINT16   #############",
            "UINT32   #############",
            "UINT64   #############",
            "UINT8    #############",
        ],
        "#############",
    ),
}
