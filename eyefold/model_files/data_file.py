"""The external data file of a saved model: its name, who may own it, and its contents.

Every initializer over :data:`EXTERNAL_DATA_THRESHOLD_BYTES` goes to one file beside
OUTPUT, named after it (``<OUTPUT file name>.data``), so OUTPUT never points at another
model's files. Tensors are written one after the other, large ones at aligned offsets, and
runs of zeros stay holes (:mod:`eyefold.model_files.sparse_write`).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import onnx_ir as ir

from eyefold.errors import ModelIOError
from eyefold.model_files.atomic_write import discard, finish_file, open_temporary
from eyefold.model_files.sparse_write import write_tensor
from eyefold.model_files.tensors import (
    external_data_files,
    iter_initializers,
    referenced_by,
    same_file,
)

__all__ = [
    "EXTERNAL_DATA_THRESHOLD_BYTES",
    "Progress",
    "check_data_target",
    "external_data_name",
    "restore_tensors",
    "write_data_file",
]

# Initializers larger than this go to the data file; smaller ones (shape vectors, scalars)
# stay in the model so tools can read them without the data file (onnx uses 1 KiB too).
EXTERNAL_DATA_THRESHOLD_BYTES = 1024
# Large tensors start at multiples of this offset so runtimes can memory-map them (64 KiB
# is the Windows mapping granularity; Linux needs the 4 KiB page). Holes stay sparse.
_ALIGNMENT_BYTES = 1 << 16
_ALIGN_ABOVE_BYTES = 1 << 20

Progress = Callable[[str], None]


def external_data_name(path: str | os.PathLike[str]) -> str:
    """The data file name eyefold uses for OUTPUT: ``<OUTPUT file name>.data``."""
    return os.path.basename(os.fspath(path)) + ".data"


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
    with os.fdopen(handle_fd, "wb") as handle:
        offset = 0
        for index, value in enumerate(values):
            tensor = value.const_value
            assert tensor is not None
            offset = _aligned(offset, tensor.nbytes)
            handle.seek(offset)
            write_tensor(tensor, handle)
            placement.append((offset, tensor.nbytes))
            offset += tensor.nbytes
            if progress is not None:
                progress(f"saving tensors: {index + 1}/{len(values)} ({offset} bytes)")
        handle.truncate(offset)
        finish_file(handle, temp_path, final_path)
    return placement


def check_data_target(
    model: ir.Model, output: str, data_path: str, source_path: str | None
) -> None:
    """Refuses to replace a data file some other model (the input) still reads from.

    Raises:
        ModelIOError: ``data_path`` is the input model itself, holds the input's tensors
            while OUTPUT is another file, or exists without being OUTPUT's data file.
    """
    own = source_path is not None and same_file(output, source_path)
    if source_path is not None and same_file(data_path, source_path):
        raise ModelIOError(
            f"cannot write {output}: its data file {data_path} would replace the input model"
        )
    read_by_model = any(same_file(p, data_path) for p in external_data_files(model))
    if not own and read_by_model:
        raise ModelIOError(
            f"cannot write {output}: its data file {data_path} holds the input's tensors;"
            " choose another OUTPUT name (the data file is named after it)"
        )
    if (
        os.path.exists(data_path)
        and not read_by_model
        and not referenced_by(output, data_path)
    ):
        raise ModelIOError(
            f"cannot write {output}: {data_path} exists and is not the data file of"
            f" {output}; remove it or choose another OUTPUT name"
        )


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
    temp_data, fd = open_temporary(data_path)
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
    originals: list[tuple[ir.Value, ir.TensorProtocol]], data_path: str, replaced: bool
) -> None:
    """Puts the original tensors back, except those read from the data file just replaced.

    Those now point at the new data file (same values), so the model stays usable.
    """
    for value, tensor in originals:
        if (
            replaced
            and isinstance(tensor, ir.ExternalTensor)
            and os.path.abspath(tensor.path) == data_path
        ):
            continue
        value.const_value = tensor
