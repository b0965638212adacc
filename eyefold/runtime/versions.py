"""The newest default-domain opset and IR version each onnxruntime release loads.

Measured with ``python benchmarks/runtime_versions.py`` on 2026-12-03 (Linux x86-64,
CPython 3.11, the CPU wheel of each release from PyPI, default session options): an
``Identity`` and an ``EyeLike`` model at each opset (IR version 8), and an ``Identity``
model of opset 13 at each IR version. A release "loads" an opset when both models of it
create a session and return the right values: a newer opset fails with ``Opset N is under
development and support for this is limited``, a newer IR version with ``Unsupported model
IR version: N, max supported IR version: M``. The written source to set beside it is
onnxruntime's compatibility table ("ONNX opset support" in
https://onnxruntime.ai/docs/reference/compatibility.html), which lists the opset and IR
version each release implements; eyefold uses the measurement.

One row per minor release; only its newest patch release was measured, and the others are
taken to load the same. OpenVINO and TensorRT are not here: no measurement of theirs was
made, and eyefold states no figure it has not checked.
"""

from __future__ import annotations

__all__ = ["ONNXRUNTIME_LIMITS", "oldest_onnxruntime", "onnxruntime_limits"]

# (major, minor) -> (newest opset, newest IR version) it loads; oldest release first. Each
# row was measured on the newest patch release of its minor one (1.15.1, 1.16.3, 1.17.3,
# 1.18.1, 1.19.2, 1.20.1, 1.21.1, 1.22.1, 1.23.2, 1.24.4, 1.25.1, 1.26.0 ... 1.30.0,
# 1.31.1, 1.32.0). 1.32 loaded every model written: opset 28 and IR 14 are the newest the
# measuring onnx (1.23.2) writes, so they are its floor, not its ceiling.
ONNXRUNTIME_LIMITS: dict[tuple[int, int], tuple[int, int]] = {
    (1, 15): (18, 9),  # opset 19 passes the opset check, but has no Identity-19 kernel
    (1, 16): (19, 9),
    (1, 17): (20, 9),
    (1, 18): (21, 10),
    (1, 19): (21, 10),
    (1, 20): (21, 10),
    (1, 21): (22, 10),
    (1, 22): (22, 10),
    (1, 23): (23, 11),
    (1, 24): (25, 13),
    (1, 25): (26, 13),
    (1, 26): (26, 13),
    (1, 27): (26, 13),
    (1, 28): (26, 13),
    (1, 29): (26, 13),
    (1, 30): (26, 13),
    (1, 31): (26, 13),
    (1, 32): (28, 14),
}


def _minor(version: str) -> tuple[int, int] | None:
    """``"1.17.3"`` -> ``(1, 17)``; None for a version that does not start that way."""
    parts = version.split(".")
    if len(parts) < 2 or not parts[0].isdigit():
        return None
    digits = "".join(c for c in parts[1] if c.isdigit())  # "20rc1" -> 20
    return (int(parts[0]), int(digits)) if digits else None


def onnxruntime_limits(version: str) -> tuple[int, int] | None:
    """The newest opset and IR version onnxruntime ``version`` loads.

    A release newer than the table's newest loads at least what that one does, so it gets
    no limit here (None); so does one older than the table or unreadable (no figure).
    """
    minor = _minor(version)
    if minor is None or minor not in ONNXRUNTIME_LIMITS:
        return None
    return ONNXRUNTIME_LIMITS[minor]


def oldest_onnxruntime(opset: int, ir_version: int) -> str | None:
    """The oldest onnxruntime release (``"1.21"``) that loads ``opset`` and ``ir_version``.

    None when no release of the table does (a newer one may: the table ends where the
    measurement did).
    """
    for (major, minor), (max_opset, max_ir_version) in ONNXRUNTIME_LIMITS.items():
        if opset <= max_opset and ir_version <= max_ir_version:
            return f"{major}.{minor}"
    return None
