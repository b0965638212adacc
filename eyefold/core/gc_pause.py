"""Pausing Python's cyclic garbage collector around walks that make many objects.

Both the opset upgrade's write-back (tens of thousands of onnx-ir objects) and the proto
scan (a list per node of a model of any size) allocate far past the collector's
thresholds, and every collection they trigger rescans all that is alive: measured, that
doubles their time. Neither leaves cycles that matter: the first collection after the
pause finds any left behind.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["cyclic_gc_paused"]


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pauses the cyclic garbage collector, restoring its previous state after."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
