"""Running a model on OpenVINO, tract or TVM in a child process, for ``--check``.

A native runtime can take the whole process down: tract aborts on a panic in a kernel
(GatherND with an index out of range: "thread caused non-unwinding panic. aborting"), and
its panic message and backtrace go straight to file descriptor 2. ``--check`` must end in
an outcome and one ``eyefold: error:`` line, so these runtimes run in a spawned child
process that reads the inputs from and writes the outputs to ``.npz`` files, its own
output kept in a file; a crash is a :class:`RunError` like any other refusal. bfloat16
arrays travel as their uint16 bits (npz has no bfloat16).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
from collections.abc import Mapping

import ml_dtypes
import numpy as np

from eyefold.check.saved import write_npz
from eyefold.runtime.runners import RunError, runner_for

__all__ = ["run_isolated"]

# The child's exit status when the runtime raised a RunError (its message in a file).
_REFUSED = 3
_BFLOAT16_KEY = "__bfloat16__"


class RelayedRunError(RunError):
    """A :class:`RunError` raised in the child, or its crash, with the message kept."""

    def __init__(self, text: str, stage: str | None = None) -> None:
        Exception.__init__(self, text)
        self.stage = stage or text.partition(":")[0]


def _save(path: str, arrays: Mapping[str, np.ndarray]) -> None:
    bfloat16 = [name for name, array in arrays.items() if array.dtype == ml_dtypes.bfloat16]
    plain = {n: a.view(np.uint16) if n in bfloat16 else a for n, a in arrays.items()}
    write_npz(path, {**plain, _BFLOAT16_KEY: np.array(json.dumps(bfloat16))})


def _load(path: str) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as archive:
        bfloat16 = set(json.loads(str(archive[_BFLOAT16_KEY])))
        return {
            name: archive[name].view(ml_dtypes.bfloat16) if name in bfloat16 else archive[name]
            for name in archive.files
            if name != _BFLOAT16_KEY
        }


def run_isolated(
    runtime: str, model_path: str, feeds: Mapping[str, np.ndarray], scratch: str
) -> list[np.ndarray]:
    """The model's outputs on ``runtime``, run in a spawned child process.

    A daemonic process (a Dask or multiprocessing worker) may not start one: there the
    runtime runs in this process, as it did before the child existed, and a runtime that
    aborts takes that worker with it.

    Raises:
        RunError: the runtime refused or failed the model, or its process crashed.
    """
    if multiprocessing.current_process().daemon:
        return list(runner_for(runtime)(model_path, feeds))
    paths = {
        name: os.path.join(scratch, f"isolated_{name}")
        for name in ("inputs.npz", "outputs.npz", "refusal.txt", "stderr.txt")
    }
    _save(paths["inputs.npz"], feeds)
    child = multiprocessing.get_context("spawn").Process(
        target=_child, args=(runtime, model_path, paths), daemon=True
    )
    child.start()
    child.join()
    if child.exitcode == _REFUSED:
        with open(paths["refusal.txt"], encoding="utf-8") as file:
            raise RelayedRunError(file.read().strip())
    if child.exitcode != 0:
        raise RelayedRunError(
            f"run: {runtime}'s process ended with status {child.exitcode}"
            + _crash_line(paths["stderr.txt"]),
            stage="run",
        )
    arrays = _load(paths["outputs.npz"])
    return [arrays[str(index)] for index in range(len(arrays))]


def _crash_line(path: str) -> str:
    """`` (the panic's message)`` from the child's stderr, or "" when there is none."""
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            lines = [line.strip() for line in file if line.strip()]
    except OSError:
        return ""
    panic = next((i for i, line in enumerate(lines) if "panicked at" in line), None)
    if panic is not None and panic + 1 < len(lines):
        return f" ({lines[panic + 1]})"
    return f" ({lines[-1]})" if lines else ""


def _child(runtime: str, model_path: str, paths: dict[str, str]) -> None:
    """Runs the model, writes its outputs; exits with 3 and the message when refused.

    The child's file descriptors 1 and 2 go to a file: a native runtime's own messages
    (a panic, a backtrace) are read from there, never shown.
    """
    log = os.open(paths["stderr.txt"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    try:
        results = runner_for(runtime)(model_path, _load(paths["inputs.npz"]))
    except RunError as error:
        with open(paths["refusal.txt"], "w", encoding="utf-8") as file:
            file.write(str(error))
        sys.exit(_REFUSED)
    arrays = {str(index): np.asarray(array) for index, array in enumerate(results)}
    _save(paths["outputs.npz"], arrays)
