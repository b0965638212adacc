"""``--check-save DIR``: each check's inputs and both models' outputs, as ``.npz`` files.

The files let a check be replayed in another tool (polygraphy, a notebook): for check
``n`` (1, 2, ...), ``inputs_n.npz`` holds one array per graph input name,
``original_outputs_n.npz`` and ``output_outputs_n.npz`` one array per output name (a
sequence output as ``NAME[i]``). They are written before the outputs are compared, so a
failed check can be replayed too.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from eyefold.errors import EyefoldError

__all__ = ["save_runs", "write_npz"]


def write_npz(path: str, arrays: Mapping[str, np.ndarray]) -> None:
    """Writes ``arrays`` as an ``.npz`` that ``np.load`` reads, under any names.

    ``np.savez(path, **arrays)`` cannot take a value named ``file`` or ``allow_pickle``
    (its own parameters), and graph inputs and outputs may be named so.
    """
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, array in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)


def _arrays(outputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {}
    for name, value in outputs.items():
        if isinstance(value, list):
            arrays.update({f"{name}[{i}]": np.asarray(v) for i, v in enumerate(value)})
        else:
            arrays[name] = np.asarray(value)
    return arrays


def save_runs(
    folder: str | None,
    runs: Sequence[tuple[Mapping[str, np.ndarray], Mapping[str, Any], Mapping[str, Any]]],
) -> list[str]:
    """Writes (inputs, original's outputs, optimized model's outputs) of each check.

    Returns:
        The paths written (none when ``folder`` is None).

    Raises:
        EyefoldError: the folder cannot be written.
    """
    if folder is None:
        return []
    paths = []
    try:
        os.makedirs(folder, exist_ok=True)
        for number, (feeds, want, got) in enumerate(runs, start=1):
            for stem, arrays in (
                ("inputs", dict(feeds)),
                ("original_outputs", _arrays(want)),
                ("output_outputs", _arrays(got)),
            ):
                path = os.path.join(folder, f"{stem}_{number}.npz")
                write_npz(path, arrays)
                paths.append(path)
    except OSError as error:
        raise EyefoldError(f"--check-save cannot write {folder}: {error}") from None
    return paths
