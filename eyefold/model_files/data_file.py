"""The external data file of a saved model: its name, who may own it, and its contents.

Every initializer over :data:`EXTERNAL_DATA_THRESHOLD_BYTES` goes to one file beside
OUTPUT, named after it, so OUTPUT never points at another model's files. Tensors are
written one after the other, large ones at aligned offsets, and runs of zeros stay holes
(:mod:`eyefold.model_files.sparse_write`).

A data file the existing OUTPUT reads from is never overwritten: until the new OUTPUT is
renamed into place, the old one must keep reading the bytes it was saved with. Hence the
naming rule, where ``<name>`` is OUTPUT's file name:

* ``<name>.data`` (the usual name) when no file has that name. That is always the case for
  a new OUTPUT, so the same input gives the same bytes.
* Otherwise, when the existing OUTPUT reads one of its data names (``<name>.data`` or
  ``<name>.data.N``), the first of ``<name>.data.1``, ``<name>.data.2``, ... that no file
  has. The old data file is removed once the new OUTPUT is in place, so saves to one
  OUTPUT alternate between ``<name>.data`` and ``<name>.data.1``. A higher number appears
  only beside a file that an interrupted save (or someone else) left at a lower one; such
  a file is never written nor removed.
* Otherwise the existing ``<name>.data`` belongs to someone else: the save is refused,
  unless it is empty (a name another save has claimed, or one a killed save left): then
  the first free ``<name>.data.N``.

A save claims its name when it chooses it, by creating the file empty with ``O_EXCL``, and
renames its data onto that file only. Two saves racing to one OUTPUT therefore never write
the same data file: the second takes the next free name, and whichever renames its model
last leaves OUTPUT reading its own data.

Once the new OUTPUT is in place, the files of these names that the old OUTPUT read from are
stale and removed (unless the model being saved was loaded from another file that reads
them), but only when no other model in OUTPUT's folder reads them (:func:`split_stale`):
a file another ``*.onnx`` there names, or one that cannot be ruled out (a model that cannot
be read, or too many to read), is kept and reported. Data files of other names are left
alone: other models may share them.
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
from collections.abc import Callable

import onnx_ir as ir

from eyefold.errors import ModelIOError, error_text
from eyefold.model_files.atomic_write import discard, finish_file, open_temporary
from eyefold.model_files.sparse_write import write_tensor
from eyefold.model_files.tensors import (
    external_data_files,
    iter_initializers,
    read_data_locations,
    referenced_files,
    same_file,
)

__all__ = [
    "EXTERNAL_DATA_THRESHOLD_BYTES",
    "DataFiles",
    "KeptFile",
    "Progress",
    "claim_data_files",
    "data_name_pattern",
    "external_data_name",
    "restore_tensors",
    "split_stale",
    "write_data_file",
]

# Initializers larger than this go to the data file; smaller ones (shape vectors, scalars)
# stay in the model so tools can read them without the data file (onnx uses 1 KiB too).
EXTERNAL_DATA_THRESHOLD_BYTES = 1024
# Large tensors start at multiples of this offset so runtimes can memory-map them (64 KiB
# is the Windows mapping granularity; Linux needs the 4 KiB page). Holes stay sparse.
_ALIGNMENT_BYTES = 1 << 16
_ALIGN_ABOVE_BYTES = 1 << 20
# How many numbered names to try before giving up (each one an existing file).
_MAX_NUMBERED_NAMES = 1000
# Models in OUTPUT's folder read for the data files they name before an old one is
# removed; beyond this many, or this many bytes, the old data files are kept. Each read is
# a search of the file for the bytes that name a data file (about 1 GB/s), then a parse
# of the small model that has them.
_MAX_MODELS_SCANNED = 1000
_MAX_BYTES_SCANNED = 4 << 30

Progress = Callable[[str], None]


def external_data_name(path: str | os.PathLike[str]) -> str:
    """The data file name eyefold uses for OUTPUT: ``<OUTPUT file name>.data``."""
    return os.path.basename(os.fspath(path)) + ".data"


def data_name_pattern(output: str | os.PathLike[str]) -> re.Pattern[str]:
    """The file names a save to ``output`` may give its data file (``<name>.data[.N]``)."""
    return re.compile(re.escape(external_data_name(output)) + r"(\.[1-9][0-9]*)?")


def _aligned(offset: int, nbytes: int) -> int:
    if nbytes <= _ALIGN_ABOVE_BYTES:
        return offset
    return -(-offset // _ALIGNMENT_BYTES) * _ALIGNMENT_BYTES


def _write_data(
    values: list[ir.Value],
    temp_path: str,
    handle_fd: int,
    final_path: str,
    progress: Progress | None,
) -> list[tuple[int, int]]:
    """Writes the values' tensors one after the other; returns (offset, length) of each."""
    placement: list[tuple[int, int]] = []
    contained: set[tuple[str, str]] = set()  # source data files checked once each
    with os.fdopen(handle_fd, "wb") as handle:
        offset = 0
        for index, value in enumerate(values):
            tensor = value.const_value
            assert tensor is not None
            offset = _aligned(offset, tensor.nbytes)
            handle.seek(offset)
            write_tensor(tensor, handle, contained)
            placement.append((offset, tensor.nbytes))
            offset += tensor.nbytes
            if progress is not None:
                progress(f"saving tensors: {index + 1}/{len(values)} ({offset} bytes)")
        handle.truncate(offset)
        finish_file(handle, temp_path, final_path)
    return placement


@dataclasses.dataclass(frozen=True)
class DataFiles:
    """The data files of one save.

    Attributes:
        path: the data file to write, or None for a single-file save. The name is claimed:
            an empty file until the data is renamed onto it, removed if the save fails.
        stale: data files of the old OUTPUT to remove once the new one is in place.
    """

    path: str | None
    stale: list[str]


def _files_in_use(output: str, own_files: list[str]) -> list[str]:
    """Files of OUTPUT's data names that the existing OUTPUT, or ``own_files``, read.

    OUTPUT is parsed only when a file of such a name exists beside it.
    """
    folder = os.path.dirname(output)
    pattern = data_name_pattern(output)
    with os.scandir(folder) as entries:
        existing = [os.path.join(folder, e.name) for e in entries if pattern.fullmatch(e.name)]
    if not existing:
        return []
    readers = referenced_files(output) + own_files
    return [path for path in sorted(existing) if any(same_file(r, path) for r in readers)]


def _refuse_usual_name(output: str, usual: str, source: str | None, read: bool) -> None:
    """Refuses a usual data path that the input reads (``read``), or that is not OUTPUT's.

    Raises:
        ModelIOError: always, saying what to do about it.
    """
    if source is not None and same_file(usual, source):
        raise ModelIOError(
            f"cannot write {output}: its data file {usual} would replace the input model"
        )
    if read:
        raise ModelIOError(
            f"cannot write {output}: its data file {usual} holds the input's tensors;"
            " choose another OUTPUT name (the data file is named after it)"
        )
    raise ModelIOError(
        f"cannot write {output}: {usual} exists and is not the data file of"
        f" {output}; remove it or choose another OUTPUT name"
    )


def _is_empty_file(path: str) -> bool:
    """Whether ``path`` is an empty regular file, which no model reads data from.

    That is a name another save claimed and has not filled yet, or one a killed save left.
    """
    try:
        status = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(status.st_mode) and status.st_size == 0


def _claim_free_path(output: str) -> str:
    """Claims the first free name of ``<name>.data``, ``<name>.data.1``, ... beside ``output``.

    The file is created empty with ``O_EXCL``: of two saves racing, one gets each name.
    """
    usual = os.path.join(os.path.dirname(output), external_data_name(output))
    candidates = [usual] + [f"{usual}.{n}" for n in range(1, _MAX_NUMBERED_NAMES)]
    for path in candidates:
        if os.path.lexists(path):
            continue
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue  # another save claimed it first
        except OSError as error:
            raise ModelIOError(
                f"cannot write {output}: cannot create {path}: {error_text(error)}"
            ) from None
        return path
    raise ModelIOError(f"cannot write {output}: {usual}.1 to .{_MAX_NUMBERED_NAMES} exist")


def claim_data_files(
    model: ir.Model | None, output: str, external: bool, source: str | None
) -> DataFiles:
    """Claims the data file to write (see the module doc); lists the stale ones to remove.

    Args:
        model: the model to save (None: a proto saved as one file).
        output: OUTPUT, absolute.
        external: whether the model is saved with external data (a model saved as one
            file reads no data file, so it is not walked for them).
        source: the file the model was loaded from, absolute, if known.

    Raises:
        ModelIOError: the usual data name is the input, holds the input's tensors while
            OUTPUT is not the input, or is a file that OUTPUT does not read from.
    """
    own = source is not None and same_file(output, source)
    usual = os.path.join(os.path.dirname(output), external_data_name(output))
    model_files = external_data_files(model) if external and model is not None else []
    read = any(same_file(p, usual) for p in model_files)
    in_use = _files_in_use(output, model_files if own else [])
    foreign = os.path.lexists(usual) and not in_use and not _is_empty_file(usual)
    if external and ((read and not own) or foreign):
        _refuse_usual_name(output, usual, source, read)
    data_path = _claim_free_path(output) if external else None
    # The input's own files stay, unless OUTPUT is the input: its old data goes with it.
    keep = [p for p in (*model_files, source or "") if p] if not own else []
    stale = [p for p in in_use if not any(same_file(p, k) for k in keep)]
    return DataFiles(data_path, stale)


@dataclasses.dataclass(frozen=True)
class KeptFile:
    """An old data file a save did not remove, and why.

    Attributes:
        path: the data file.
        reason: who reads it, or why eyefold cannot tell that nobody does.
    """

    path: str
    reason: str


def split_stale(
    folder: str, stale: list[str], output: str
) -> tuple[list[str], list[KeptFile]]:
    """The old data files no model in ``folder`` reads (to remove), and the others (kept).

    ``output``, whose old model read them and is being replaced, is not asked. Only the
    data file names are read (:func:`read_data_locations`).
    """
    if not stale:
        return [], []
    try:
        with os.scandir(folder) as entries:
            found = sorted(e.path for e in entries if e.name.endswith(".onnx"))
        models = [m for m in found if os.path.isfile(m) and not same_file(m, output)]
        size = sum(os.path.getsize(model) for model in models)
    except OSError as error:
        return [], [KeptFile(p, f"cannot list {folder}: {error_text(error)}") for p in stale]
    if len(models) > _MAX_MODELS_SCANNED or size > _MAX_BYTES_SCANNED:
        why = (
            f"{folder} holds {len(models)} other models ({size} bytes), more than eyefold"
            f" reads to find who reads it ({_MAX_MODELS_SCANNED}, {_MAX_BYTES_SCANNED} bytes)"
        )
        return [], [KeptFile(path, why) for path in stale]
    readers: dict[str, str] = {}  # stale path -> why it stays
    for model in models:
        try:
            files = read_data_locations(model)
        except Exception as error:  # unreadable, or too large to parse: it may read them
            why = f"cannot tell whether {model} reads it ({error_text(error)})"
            return [], [KeptFile(path, readers.get(path, why)) for path in stale]
        for path in stale:
            if path not in readers and any(same_file(f, path) for f in files):
                readers[path] = f"{model} reads it"
    remove = [path for path in stale if path not in readers]
    return remove, [KeptFile(path, readers[path]) for path in stale if path in readers]


def write_data_file(
    model: ir.Model, output: str, data_path: str, progress: Progress | None
) -> tuple[str, list[tuple[ir.Value, ir.TensorProtocol]]]:
    """Writes the data file under a temporary name and points the model's tensors at it.

    Returns the temporary data path and the (value, original tensor) pairs to restore.
    """
    values = [
        v
        for v in iter_initializers(model)
        if isinstance(v.const_value, ir.ExternalTensor)
        or (
            v.const_value.nbytes > EXTERNAL_DATA_THRESHOLD_BYTES  # type: ignore[union-attr]
            and not isinstance(v.const_value, ir.StringTensor)
        )
    ]
    temp_data, fd = open_temporary(output)  # named after OUTPUT: one pattern to clean
    try:
        placement = _write_data(values, temp_data, fd, data_path, progress)
    except BaseException:
        discard(temp_data)
        raise
    folder = os.path.dirname(output)
    originals = []
    for value, (offset, length) in zip(values, placement, strict=True):
        tensor = value.const_value
        assert tensor is not None
        originals.append((value, tensor))
        value.const_value = ir.ExternalTensor(
            os.path.basename(data_path),
            offset,
            length,
            tensor.dtype,
            shape=tensor.shape,
            name=tensor.name or value.name or "",
            doc_string=tensor.doc_string,
            metadata_props=dict(tensor.metadata_props),
            base_dir=folder,
        )
    return temp_data, originals


def restore_tensors(
    originals: list[tuple[ir.Value, ir.TensorProtocol]], superseded: list[str]
) -> None:
    """Puts the original tensors back, except those read from a data file now superseded.

    Those keep pointing at the new data file (same values): their old file is removed, so
    the model stays usable.
    """
    for value, tensor in originals:
        if isinstance(tensor, ir.ExternalTensor) and _read_from(tensor, superseded):
            continue
        value.const_value = tensor


def _read_from(tensor: ir.ExternalTensor, files: list[str]) -> bool:
    """Whether ``tensor`` is read from one of ``files`` (called while they still exist)."""
    return any(same_file(tensor.path, path) for path in files)
