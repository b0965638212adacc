"""The ``eyefold`` process: the command line, then an exit that skips the final collections.

An ``optimize`` run imports onnx, onnx-ir and sympy, and the interpreter's shutdown runs
several full collections of the cyclic garbage collector over what they left (each about
0.04 s here), only to free memory the operating system takes back anyway. On a small model
that was a quarter of the whole command (about 0.15 s of 0.6 s). :func:`gc.freeze` moves
every object into the permanent generation first, so those collections find nothing to
traverse. Everything else about the
exit is unchanged: atexit handlers (logging's flush, ``weakref.finalize``) run, and
stdout and stderr are flushed. Output files are closed and synced before :func:`main`
returns, so nothing they hold depends on the shutdown.

:func:`main` itself leaves the collector alone: a library caller or a test that calls it
many times in one process keeps collecting its garbage.
"""

from __future__ import annotations

import gc
import sys
from typing import NoReturn

from eyefold.cli.main import main

__all__ = ["run"]


def run() -> NoReturn:
    """Runs :func:`main` on ``sys.argv`` and exits with its status."""
    try:
        status = main()
    finally:
        gc.freeze()
    sys.exit(status)
