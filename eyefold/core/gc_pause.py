"""Pausing Python's cyclic garbage collector around walks that make many objects.

The opset upgrade's write-back (tens of thousands of onnx-ir objects), the proto walks
(a list per node of a model of any size: the scan, the order check) and the file path's
neighbourhood run (an onnx-ir model of thousands of nodes) allocate far past the
collector's thresholds, and every collection they trigger rescans all that is alive:
measured, that doubles a walk's time, and on a 28,000-node upgrade two full collections
took 0.13 s. None leaves cycles that matter (what the neighbourhood holds is alive until
its result is spliced back anyway): the first collection after the pause finds any left
behind.
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
