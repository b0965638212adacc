"""``eyefold`` whose batch workers SIGKILL themselves on one model: in place of a segfault.

Run as ``python tests/helpers/kill_worker_runner.py optimize ... -j 2`` with
``EYEFOLD_TEST_KILL_ON`` set to model file names (comma-separated). Spawned workers import
this script as their main module (``__mp_main__``), so the patch below is made in every
worker before it takes a task; the worker that reaches a named model kills itself with
SIGKILL, as the OOM killer would. The command is the real one (``eyefold.cli.main.main``)
with the real workers.
"""

from __future__ import annotations

import os
import signal
import sys

import eyefold.file_run

_optimize_file = eyefold.file_run.optimize_file


def _optimize_file_or_die(input_path: str, *args: object, **kwargs: object) -> object:
    if os.path.basename(input_path) in os.environ.get("EYEFOLD_TEST_KILL_ON", "").split(","):
        os.kill(os.getpid(), signal.SIGKILL)
    return _optimize_file(input_path, *args, **kwargs)  # type: ignore[arg-type]


if __name__ == "__mp_main__":  # how a spawned worker imports this script: workers only
    eyefold.file_run.optimize_file = _optimize_file_or_die  # type: ignore[assignment]

if __name__ == "__main__":
    from eyefold.cli.main import main

    sys.exit(main())
