"""Which files a run may write: never the input, a file it reads, nor another file it writes.

One rule for ``eyefold optimize INPUT OUTPUT``, for every model of a batch and for the
batch's report, checked before any work so a slip of the keyboard costs nothing:

* OUTPUT may not be a data file an input reads, nor another input (it may be its own
  input: an in-place run);
* the data file OUTPUT writes (``<OUTPUT name>.data``, when it writes one) may not be an
  input, nor a data file another input reads; an in-place run may name its input's own
  data file, since the naming rule of :mod:`.data_file` then writes a new name;
* the report may not be an input, a data file an input reads, an OUTPUT, nor any name an
  OUTPUT's data file may take.

Files are compared by identity, not spelling (:func:`.tensors.same_file`: the real path, or
one inode for hard links).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Sequence

from eyefold.model_files.data_file import data_name_pattern, external_data_name
from eyefold.model_files.tensors import referenced_files, same_file

__all__ = ["ModelFiles", "model_clash", "report_clash"]


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

    def named(self) -> list[tuple[str, str]]:
        """(what it is, with its path; the path) of every file the model reads."""
        return [(f"the input {self.input}", self.input), *self.named_data()]

    def named_data(self) -> list[tuple[str, str]]:
        """(what it is, with its path; the path) of every data file the model reads."""
        return [
            (f"the data file {path} of the input {self.input}", path)
            for path in self.data_files
        ]


def _clash(what: str, read: Iterable[tuple[str, str]]) -> str | None:
    """The message for the first of ``read`` that ``what`` (a role and its path) names."""
    role, path = what
    for other_role, other in read:
        if same_file(path, other):
            return f"{role} would replace {other_role}; choose another path"
    return None


def model_clash(
    output: str,
    source: ModelFiles,
    others: Sequence[ModelFiles] = (),
    *,
    writes_data: bool,
) -> str | None:
    """Why writing ``source``'s result to ``output`` would destroy a file read, or None.

    Args:
        output: OUTPUT.
        source: the model written there.
        others: the other inputs of the run (a batch's).
        writes_data: whether OUTPUT is saved with a data file.
    """
    in_place = same_file(output, source.input)
    own_data = source.named_data()
    elsewhere = [item for other in others for item in other.named()]
    reason = _clash((f"OUTPUT {output}", output), own_data + elsewhere)
    if reason is None and writes_data:
        data = os.path.join(
            os.path.dirname(os.path.abspath(output)), external_data_name(output)
        )
        read = source.named()[:1] + elsewhere + ([] if in_place else own_data)
        reason = _clash((f"the data file {data} of OUTPUT {output}", data), read)
    return reason


def report_clash(
    report: str, outputs: Sequence[str], sources: Sequence[ModelFiles]
) -> str | None:
    """Why writing the report to ``report`` would destroy a file of the run, or None."""
    read = [item for source in sources for item in source.named()]
    written = [(f"OUTPUT {output}", output) for output in outputs]
    reason = _clash((f"--report {report}", report), read + written)
    if reason is not None:
        return reason
    folder, name = os.path.split(os.path.realpath(report))
    for output in outputs:
        output_folder = os.path.dirname(os.path.realpath(output))
        if output_folder == folder and data_name_pattern(output).fullmatch(name):
            return (
                f"--report {report} would take the name of the data file of OUTPUT"
                f" {output}; choose another path"
            )
    return None
