"""Saving a model without ever leaving a half-written output behind.

Saving writes one protobuf file when it can. It writes external data, every initializer
over :data:`~eyefold.model_files.data_file.EXTERNAL_DATA_THRESHOLD_BYTES` in one file
``<OUTPUT file name>.data`` beside OUTPUT, when

* the caller asks for it (``--external-data``),
* the model already has external tensors (they are read from the input's data files and
  copied, so OUTPUT never points at another model's files), or
* its tensors would not fit in one protobuf message (:data:`INLINE_LIMIT_BYTES`).

Every file is first written under a temporary name in OUTPUT's folder, flushed to disk and
then renamed into place (the data file first, the model file last), so a crash or a full
disk leaves the previous files, never a partial one. OUTPUT may be the input's own path,
even when the input's tensors are still being read lazily from the data file being
replaced: on POSIX the old file lives on for as long as it is mapped. A data file that the
model's own tensors come from is replaced only when OUTPUT is the file they were loaded
with; any other model's data file is never touched.
"""

from __future__ import annotations

import dataclasses
import logging
import os

import onnx_ir as ir

from eyefold.errors import ModelIOError
from eyefold.model_files.atomic_write import (
    check_output_path,
    discard,
    finish_file,
    open_temporary,
)
from eyefold.model_files.data_file import (
    Progress,
    check_data_target,
    external_data_name,
    restore_tensors,
    write_data_file,
)
from eyefold.model_files.load import root_cause
from eyefold.model_files.stream_write import write_model
from eyefold.model_files.tensors import iter_attribute_tensors, tensor_inventory

__all__ = [
    "INLINE_LIMIT_BYTES",
    "PROTOBUF_LIMIT_BYTES",
    "SavedModel",
    "files_bytes",
    "save_model",
]

logger = logging.getLogger(__name__)

# protobuf cannot serialize a message of 2 GiB or more.
PROTOBUF_LIMIT_BYTES = 1 << 31
# Tensor bytes above which a model is saved with external data even when not asked: the
# limit less room for the graph itself (node and value protos are small next to weights).
INLINE_LIMIT_BYTES = PROTOBUF_LIMIT_BYTES - (64 << 20)


@dataclasses.dataclass(frozen=True)
class SavedModel:
    """What :func:`save_model` wrote.

    Attributes:
        path: the model file.
        data_path: its external data file, or None when saved as one file.
        bytes: size on disk of both files together.
        external_tensors: number of tensors written to the data file.
    """

    path: str
    data_path: str | None
    bytes: int
    external_tensors: int


def files_bytes(paths: list[str]) -> int:
    """Total size on disk (apparent size) of the files that exist among ``paths``."""
    return sum(os.path.getsize(p) for p in paths if os.path.isfile(p))


def _needs_external_data(model: ir.Model, external_data: bool) -> tuple[bool, str]:
    if external_data:
        return True, "asked for"
    files, total = tensor_inventory(model)
    if files:
        return True, "the input has external data"
    if total > INLINE_LIMIT_BYTES:
        return True, f"{total} bytes of tensors do not fit in one 2 GiB protobuf file"
    return False, ""


def _inline_attribute_tensors(model: ir.Model) -> list[tuple[ir.Node, str, ir.Attr]]:
    """Loads external tensors held in node attributes (rare) into memory; returns undo info."""
    undo = []
    for node, name, tensor in list(iter_attribute_tensors(model)):
        if isinstance(tensor, ir.ExternalTensor):
            undo.append((node, name, node.attributes[name]))
            loaded = ir.Tensor(tensor.numpy().copy(), dtype=tensor.dtype, name=tensor.name)
            node.attributes[name] = ir.AttrTensor(name, loaded)
    return undo


def _serialize_to(model: ir.Model, output: str) -> tuple[str, int]:
    """Writes the model proto to a temporary file beside ``output``; returns it and size.

    Large in-memory initializers go from their arrays straight to the file
    (:mod:`eyefold.model_files.stream_write`), without the three copies protobuf
    serialization makes.
    """
    temp_path, fd = open_temporary(output)
    try:
        with os.fdopen(fd, "wb") as handle:
            size = write_model(model, handle)
            finish_file(handle, temp_path, output)
    except ValueError as error:  # protobuf refuses messages of 2 GiB or more
        discard(temp_path)
        raise ModelIOError(f"cannot write {output}: {error}") from None
    except ir.serde.SerdeError as error:  # e.g. a name read from the file is not UTF-8
        discard(temp_path)
        cause = root_cause(error)
        if isinstance(cause, UnicodeDecodeError):
            raise ModelIOError(
                f"cannot write {output}: the model holds text that is not valid UTF-8"
                f" ({cause.object[:40]!r}...)"
            ) from None
        raise ModelIOError(f"cannot write {output}: {cause}") from None
    except BaseException:
        discard(temp_path)
        raise
    return temp_path, size


def _data_path_for(
    model: ir.Model, output: str, external_data: bool, source: str | None
) -> str | None:
    """The data file to write beside ``output``, or None for a single-file save."""
    external, why = _needs_external_data(model, external_data)
    if not external:
        return None
    data_path = os.path.join(os.path.dirname(output), external_data_name(output))
    check_data_target(model, output, data_path, source)
    logger.info("saving %s with external data %s (%s)", output, data_path, why)
    return data_path


def save_model(
    model: ir.Model,
    path: str | os.PathLike[str],
    *,
    external_data: bool = False,
    source_path: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
) -> SavedModel:
    """Saves atomically, with external data when asked or needed (see the module doc).

    The model is left as it was, except that tensors read lazily from a data file this
    call replaced are pointed at the new file.

    Args:
        model: the model to save.
        path: OUTPUT.
        external_data: write initializers over the threshold to ``<OUTPUT name>.data``.
        source_path: the file the model was loaded from; its own data file may then be
            replaced when ``path`` is that same file.
        progress: called with a short message after each tensor written.

    Raises:
        ModelIOError: the folder is missing, the data file belongs to another model, or
            the write fails.
    """
    output = check_output_path(path)
    source = None if source_path is None else os.path.abspath(os.fspath(source_path))
    data_path = _data_path_for(model, output, external_data, source)
    temp_paths: list[str] = []
    originals: list[tuple[ir.Value, ir.TensorProtocol]] = []
    undo_attrs: list[tuple[ir.Node, str, ir.Attr]] = []
    replaced = False
    try:
        if data_path is not None:
            undo_attrs = _inline_attribute_tensors(model)
            temp_data, originals = write_data_file(model, output, data_path, progress)
            temp_paths.append(temp_data)
        temp_model, _ = _serialize_to(model, output)
        temp_paths.append(temp_model)
        if data_path is not None:
            os.replace(temp_paths[0], data_path)
            replaced = True
        os.replace(temp_model, output)
    except (OSError, ValueError) as error:  # ValueError: onnx-ir's data containment checks
        raise ModelIOError(f"cannot write {output}: {error}") from None
    finally:
        restore_tensors(originals, data_path or "", replaced)
        for node, name, attr in undo_attrs:
            node.attributes[name] = attr
        for temp_path in temp_paths:
            discard(temp_path)
    written = [output] if data_path is None else [output, data_path]
    return SavedModel(
        path=output,
        data_path=data_path,
        bytes=files_bytes(written),
        external_tensors=len(originals),
    )
