"""Which files a run may write: never the input, a file it reads, nor another file it writes.

One rule for ``eyefold optimize INPUT OUTPUT``, for every model of a batch and for the
batch's report, checked before anything is written (for one model, once its run has
found the data files it reads; a batch checks before any model runs), so a slip of the
keyboard destroys nothing:

* OUTPUT may not be a data file an input reads, nor another input (it may be its own
  input: an in-place run);
* the data file OUTPUT writes (``<OUTPUT name>.data``, when it writes one) may not be an
  input, nor a data file another input reads; an in-place run may name its input's own
  data file, since the naming rule of :mod:`.data_file` then writes a new name;
* the report may not be an input, a data file an input reads, an OUTPUT, nor any name an
  OUTPUT's data file may take.

Files are compared by identity, not spelling: the real path, or one inode (hard links).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

from eyefold.model_files.data_file import data_name_pattern, external_data_name
from eyefold.model_files.tensors import referenced_files, same_file

__all__ = ["ModelFiles", "RunFiles"]


@dataclasses.dataclass(frozen=True)
class ModelFiles:
    """An input model and the data files it reads (absolute paths).

    Attributes:
        input: the model file, as given.
        data_files: the data files its tensors name.
    """

    input: str
    data_files: tuple[str, ...]

    @classmethod
    def read(cls, input_path: str) -> ModelFiles:
        """The input and the data files its file names, read cheaply (no tensor data).

        A file that cannot be read names none here: loading it fails with its own error.
        """
        return cls(input_path, tuple(referenced_files(os.path.abspath(input_path))))


@dataclasses.dataclass(frozen=True)
class _Read:
    role: str  # what the file is, with its path, for the messages
    owner: ModelFiles
    is_input: bool  # the model file itself, not one of its data files


def _keys(path: str) -> list[object]:
    """What identifies the file ``path`` names: its real path, and its inode if it exists."""
    keys: list[object] = [os.path.realpath(path)]
    try:
        status = os.stat(path)
    except (OSError, ValueError):
        return keys
    return [*keys, (status.st_dev, status.st_ino)]


class RunFiles:
    """Every file a run reads (its inputs and their data files), found by identity.

    Each check is a few lookups, so a batch of many models checks in linear time.
    """

    def __init__(self, sources: Sequence[ModelFiles]) -> None:
        self._reads: dict[object, list[_Read]] = {}
        for source in sources:
            self._add(_Read(f"the input {source.input}", source, True), source.input)
            for path in source.data_files:
                role = f"the data file {path} of the input {source.input}"
                self._add(_Read(role, source, False), path)

    def _add(self, read: _Read, path: str) -> None:
        for key in _keys(path):
            self._reads.setdefault(key, []).append(read)

    def _find(self, path: str) -> list[_Read]:
        found: dict[int, _Read] = {}
        for key in _keys(path):
            found.update((id(read), read) for read in self._reads.get(key, []))
        return list(found.values())

    def model_clash(self, output: str, source: ModelFiles, *, writes_data: bool) -> str | None:
        """Why writing ``source``'s result to ``output`` would destroy a file read, or None.

        Args:
            output: OUTPUT.
            source: the model written there (one of the run's).
            writes_data: whether OUTPUT is saved with a data file.
        """
        reads = self._find(output)
        in_place = any(read.owner is source and read.is_input for read in reads)
        for read in reads:
            if not (read.owner is source and read.is_input):
                return f"OUTPUT {output} would replace {read.role}; choose another path"
        if not writes_data:
            return None
        folder = os.path.dirname(os.path.abspath(output))
        data = os.path.join(folder, external_data_name(output))
        for read in self._find(data):
            if not (in_place and read.owner is source and not read.is_input):
                return (
                    f"the data file {data} of OUTPUT {output} would replace {read.role};"
                    " choose another path"
                )
        return None

    def report_clash(self, report: str, outputs: Sequence[str]) -> str | None:
        """Why writing the report to ``report`` would destroy a file of the run, or None."""
        for read in self._find(report):
            return f"--report {report} would replace {read.role}; choose another path"
        folder, name = os.path.split(os.path.realpath(report))
        for output in outputs:
            if same_file(report, output):
                return f"--report {report} would replace OUTPUT {output}; choose another path"
            output_folder = os.path.dirname(os.path.realpath(output))
            if output_folder == folder and data_name_pattern(output).fullmatch(name):
                return (
                    f"--report {report} would take the name of the data file of OUTPUT"
                    f" {output}; choose another path"
                )
        return None
