"""Reading and writing model files without ever leaving a half-written output behind.

Loading keeps external data lazy: onnx-ir maps each external tensor on first use, so a
3 GiB model costs only what the pipeline touches.

Saving writes one protobuf file when it can. It writes external data, every initializer
over :data:`EXTERNAL_DATA_THRESHOLD_BYTES` in one file ``<OUTPUT file name>.data`` beside
OUTPUT, when

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

import contextlib
import dataclasses
import logging
import os
import secrets
from collections.abc import Callable

import onnx_ir as ir
from google.protobuf.message import DecodeError

from eyefold.errors import ModelIOError
from eyefold.model_files.sparse_write import write_tensor
from eyefold.model_files.stream_write import write_model
from eyefold.model_files.structure_checks import check_structure, held_load_warnings
from eyefold.model_files.tensors import (
    check_external_data,
    external_data_files,
    iter_attribute_tensors,
    iter_initializers,
    referenced_by,
    same_file,
    tensor_bytes,
    tensor_inventory,
)

__all__ = [
    "EXTERNAL_DATA_THRESHOLD_BYTES",
    "INLINE_LIMIT_BYTES",
    "PROTOBUF_LIMIT_BYTES",
    "SavedModel",
    "check_output_path",
    "external_data_files",
    "external_data_name",
    "files_bytes",
    "load_model",
    "save_model",
    "tensor_bytes",
    "write_text",
]

logger = logging.getLogger(__name__)

# protobuf cannot serialize a message of 2 GiB or more.
PROTOBUF_LIMIT_BYTES = 1 << 31
# Tensor bytes above which a model is saved with external data even when not asked: the
# limit less room for the graph itself (node and value protos are small next to weights).
INLINE_LIMIT_BYTES = PROTOBUF_LIMIT_BYTES - (64 << 20)
# Initializers larger than this go to the data file; smaller ones (shape vectors, scalars)
# stay in the model so tools can read them without the data file (onnx uses 1 KiB too).
EXTERNAL_DATA_THRESHOLD_BYTES = 1024
# Large tensors start at multiples of this offset so runtimes can memory-map them (64 KiB
# is the Windows mapping granularity; Linux needs the 4 KiB page). Holes stay sparse.
_ALIGNMENT_BYTES = 1 << 16
_ALIGN_ABOVE_BYTES = 1 << 20

Progress = Callable[[str], None]


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


def _innermost(error: BaseException) -> BaseException:
    """The root cause: onnx-ir's SerdeError only says which graph failed to load."""
    while error.__cause__ is not None:
        error = error.__cause__
    return error


def load_model(path: str | os.PathLike[str]) -> ir.Model:
    """Loads a model with onnx-ir, external data left lazy (memory-mapped on first use).

    The path is made absolute first: onnx-ir skips its external-data containment check when
    the model's folder is an empty string (a bare file name), which would let ``../``
    locations read outside the model's folder.

    Raises:
        ModelIOError: the file is missing, unreadable or not an ONNX model.
        InvalidModelError: an unknown operator, a dangling reference or a cycle (see
            :mod:`eyefold.model_files.structure_checks`).
    """
    full_path = os.path.abspath(os.fspath(path))
    if not os.path.exists(full_path):
        raise ModelIOError(f"cannot read {full_path}: no such file")
    if not os.path.isfile(full_path):
        raise ModelIOError(f"cannot read {full_path}: not a regular file")
    try:
        with held_load_warnings():  # a dangling reference is an error, not a log line
            model = ir.load(full_path)
            check_structure(model)
    except DecodeError as error:
        raise ModelIOError(f"{full_path} is not an ONNX model (protobuf: {error})") from None
    except (OSError, ValueError, TypeError, RuntimeError) as error:
        raise ModelIOError(f"cannot load {full_path}: {_innermost(error)}") from None
    if model.ir_version < 3 or not model.opset_imports:
        raise ModelIOError(
            f"{full_path} is not an ONNX model (ir_version {model.ir_version},"
            f" {len(model.opset_imports)} opset imports)"
        )
    check_external_data(model, full_path)
    return model


def files_bytes(paths: list[str]) -> int:
    """Total size on disk (apparent size) of the files that exist among ``paths``."""
    return sum(os.path.getsize(p) for p in paths if os.path.isfile(p))


def external_data_name(path: str | os.PathLike[str]) -> str:
    """The data file name eyefold uses for OUTPUT: ``<OUTPUT file name>.data``."""
    return os.path.basename(os.fspath(path)) + ".data"


def _open_temporary(final_path: str) -> tuple[str, int]:
    """A new file beside ``final_path``; mode 0o666 less the umask, like a plain open()."""
    folder, base = os.path.split(final_path)
    for _ in range(100):
        temp_path = os.path.join(folder, f".{base}.{secrets.token_hex(4)}.tmp")
        try:
            return temp_path, os.open(temp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
    raise ModelIOError(f"cannot create a temporary file beside {final_path}")


def _finish_file(handle: object, temp_path: str, final_path: str) -> None:
    """Flushes ``handle`` to disk and keeps the mode of the file it will replace."""
    handle.flush()  # type: ignore[attr-defined]
    os.fsync(handle.fileno())  # type: ignore[attr-defined]
    if os.path.exists(final_path):
        with contextlib.suppress(OSError):
            os.chmod(temp_path, os.stat(final_path).st_mode & 0o7777)


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
        _finish_file(handle, temp_path, final_path)
    return placement


def _check_data_target(
    model: ir.Model, output: str, data_path: str, source_path: str | None
) -> None:
    """Refuses to replace a data file some other model (the input) still reads from."""
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


def check_output_path(path: str | os.PathLike[str]) -> str:
    """Fails early, before any work, when ``path`` cannot be written; returns it absolute.

    Raises:
        ModelIOError: its folder does not exist or cannot be written, or it is a folder.
    """
    output = os.path.abspath(os.fspath(path))
    folder = os.path.dirname(output)
    if not os.path.isdir(folder):
        raise ModelIOError(f"cannot write {output}: folder {folder} does not exist")
    if os.path.isdir(output):
        raise ModelIOError(f"cannot write {output}: it is a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        # Temporary files are created in the folder, so it must be writable.
        raise ModelIOError(f"cannot write {output}: folder {folder} is not writable")
    return output


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Writes a text file atomically (a temporary file beside it, then a rename).

    Raises:
        ModelIOError: the write fails.
    """
    target = check_output_path(path)
    try:
        temp_path, fd = _open_temporary(target)
    except OSError as error:
        raise ModelIOError(f"cannot write {target}: {error}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            _finish_file(handle, temp_path, target)
        os.replace(temp_path, target)
    except OSError as error:
        raise ModelIOError(f"cannot write {target}: {error}") from None
    finally:
        _discard(temp_path)


def _serialize_to(model: ir.Model, output: str) -> tuple[str, int]:
    """Writes the model proto to a temporary file beside ``output``; returns it and size.

    Large in-memory initializers go from their arrays straight to the file
    (``stream_write``), without the three copies protobuf serialization makes.
    """
    temp_path, fd = _open_temporary(output)
    try:
        with os.fdopen(fd, "wb") as handle:
            size = write_model(model, handle)
            _finish_file(handle, temp_path, output)
    except ValueError as error:  # protobuf refuses messages of 2 GiB or more
        _discard(temp_path)
        raise ModelIOError(f"cannot write {output}: {error}") from None
    except ir.serde.SerdeError as error:  # e.g. a name read from the file is not UTF-8
        _discard(temp_path)
        cause = _innermost(error)
        if isinstance(cause, UnicodeDecodeError):
            raise ModelIOError(
                f"cannot write {output}: the model holds text that is not valid UTF-8"
                f" ({cause.object[:40]!r}...)"
            ) from None
        raise ModelIOError(f"cannot write {output}: {cause}") from None
    except BaseException:
        _discard(temp_path)
        raise
    return temp_path, size


def _discard(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


def _externalize(
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
    temp_data, fd = _open_temporary(data_path)
    try:
        placement = _write_data(values, temp_data, fd, data_path, progress)
    except BaseException:
        _discard(temp_data)
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


def _restore(
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
    folder = os.path.dirname(output)
    source = None if source_path is None else os.path.abspath(os.fspath(source_path))
    external, why = _needs_external_data(model, external_data)
    data_path = os.path.join(folder, external_data_name(output)) if external else None
    if data_path is not None:
        _check_data_target(model, output, data_path, source)
        logger.info("saving %s with external data %s (%s)", output, data_path, why)
    temp_paths: list[str] = []
    originals: list[tuple[ir.Value, ir.TensorProtocol]] = []
    undo_attrs: list[tuple[ir.Node, str, ir.Attr]] = []
    replaced = False
    try:
        if data_path is not None:
            undo_attrs = _inline_attribute_tensors(model)
            temp_data, originals = _externalize(model, output, data_path, progress)
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
        _restore(originals, data_path or "", replaced)
        for node, name, attr in undo_attrs:
            node.attributes[name] = attr
        for temp_path in temp_paths:
            _discard(temp_path)
    written = [output] if data_path is None else [output, data_path]
    return SavedModel(
        path=output,
        data_path=data_path,
        bytes=files_bytes(written),
        external_tensors=len(originals),
    )
