"""Running a model on OpenVINO, tract or TVM in a child process, for ``--check``.

A native runtime can take the whole process down: tract aborts on a panic in a kernel
(GatherND with an index out of range: "thread caused non-unwinding panic. aborting"), and
its panic message and backtrace go straight to file descriptor 2. ``--check`` must end in
an outcome and one ``eyefold: error:`` line, so these runtimes run in a child process
(``python -m eyefold.check.isolated RUNTIME MODEL INPUTS OUTPUTS``) that reads the inputs
from and writes the outputs to ``.npz`` files; a crash is a :class:`RunError` like any
other refusal. bfloat16 arrays travel as their uint16 bits (npz has no bfloat16).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping

import ml_dtypes
import numpy as np

from eyefold.runtime.runners import RunError, runner_for

__all__ = ["run_isolated"]

# The child's exit status when the runtime raised a RunError (its message on stdout).
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
    np.savez(path, **plain, **{_BFLOAT16_KEY: np.array(json.dumps(bfloat16))})


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
    """The model's outputs on ``runtime``, run in a child process.

    Raises:
        RunError: the runtime refused or failed the model, or its process crashed.
    """
    inputs = os.path.join(scratch, "isolated_inputs.npz")
    outputs = os.path.join(scratch, "isolated_outputs.npz")
    _save(inputs, feeds)
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-m", "eyefold.check.isolated", runtime, model_path, inputs, outputs],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
        check=False,
    )
    if done.returncode == _REFUSED:
        raise RelayedRunError(done.stdout.strip())
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        why = next((line for line in lines if "panicked" in line or "Error" in line), None)
        raise RelayedRunError(
            f"run: {runtime}'s process ended with status {done.returncode}"
            + (f" ({why.strip()})" if why else ""),
            stage="run",
        )
    arrays = _load(outputs)
    return [arrays[str(index)] for index in range(len(arrays))]


def main(argv: list[str]) -> int:
    """The child: runs the model, writes its outputs; exit 3 with the message if refused."""
    runtime, model_path, inputs, outputs = argv
    try:
        results = runner_for(runtime)(model_path, _load(inputs))
    except RunError as error:
        print(error)
        return _REFUSED
    _save(outputs, {str(index): np.asarray(array) for index, array in enumerate(results)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
