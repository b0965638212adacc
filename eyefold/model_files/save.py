"""Saving a model without ever leaving a half-written output behind.

Saving writes one protobuf file when it can. It writes external data, every initializer
over :data:`~eyefold.model_files.data_file.EXTERNAL_DATA_THRESHOLD_BYTES` in one file
beside OUTPUT (``<OUTPUT file name>.data``; see :mod:`eyefold.model_files.data_file` for
the naming rule), when

* the caller asks for it (``--external-data``),
* the model already has external tensors (they are read from the input's data files and
  copied, so OUTPUT never points at another model's files), or
* its tensors would not fit in one protobuf message (:data:`INLINE_LIMIT_BYTES`).

The sequence, in which a crash at any point leaves OUTPUT either the whole old model
reading its old data or the whole new one reading its new data:

1. the data file's name is claimed: a name no file has (never a data file the old OUTPUT
   reads, nor one another save is writing), created empty;
2. the data file and the model file are written under temporary names in OUTPUT's folder
   and flushed to disk, and the data file is renamed onto its claimed name;
3. the caller's last step runs, if any (the command line writes the report's temporary
   file there, so a report that cannot be written leaves OUTPUT untouched);
4. the model file is renamed to OUTPUT, the only step that switches from old to new;
5. the old OUTPUT's data files that the new one does not read are removed, unless another
   model in the folder reads them or may (then they are kept, and
   :attr:`SavedModel.kept_data_files` says why).

A failure before step 4 removes the temporary files and the claimed name.

OUTPUT may be the input's own path, even when the input's tensors are still being read
lazily from its data file: that file is removed only at step 5, and on POSIX a removed
file lives on for as long as it is mapped. Any other model's data file is never touched.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable
from typing import BinaryIO

import onnx
import onnx_ir as ir

from eyefold.errors import ModelIOError
from eyefold.model_files.atomic_write import (
    check_output_path,
    discard,
    finish_file,
    open_temporary,
    remove_stale_temporaries,
    sync_folder,
)
from eyefold.model_files.data_file import (
    EXTERNAL_DATA_THRESHOLD_BYTES,
    DataFiles,
    KeptFile,
    Progress,
    claim_data_files,
    restore_tensors,
    split_stale,
    write_data_file,
)
from eyefold.model_files.deferred_tensors import DeferredTensors
from eyefold.model_files.load import root_cause
from eyefold.model_files.tensors import (
    check_external_data,
    iter_attribute_tensors,
    same_file,
    tensor_inventory,
)

__all__ = [
    "INLINE_LIMIT_BYTES",
    "PROTOBUF_LIMIT_BYTES",
    "SavedModel",
    "files_bytes",
    "initializer_model",
    "save_model",
]

logger = logging.getLogger(__name__)

# What save_model's caller does last, before OUTPUT is renamed into place.
BeforeSwitch = Callable[["SavedModel"], None]

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
        kept_data_files: data files of the old OUTPUT left in place because another model
            reads them, or may.
    """

    path: str
    data_path: str | None
    bytes: int
    external_tensors: int
    kept_data_files: tuple[KeptFile, ...] = ()


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


def _undo_inlining(undo: list[tuple[ir.Node, str, ir.Attr]], superseded: list[str]) -> None:
    """Puts attribute tensors back, except those whose data file is about to be removed."""
    for node, name, attr in undo:
        tensor = attr.value
        if isinstance(tensor, ir.ExternalTensor) and any(
            same_file(tensor.path, path) for path in superseded
        ):
            continue  # the in-memory copy stays: its file goes
        node.attributes[name] = attr


def _serialize_to(model: ir.Model, output: str) -> tuple[str, int]:
    """Writes the model proto to a temporary file beside ``output``; returns it and size.

    Large in-memory initializers of the main graph go from their arrays straight to the
    file (:mod:`eyefold.model_files.deferred_tensors`), without the three copies protobuf
    serialization makes; the bytes are protobuf's all the same.
    """
    temp_path, fd = open_temporary(output)
    try:
        with os.fdopen(fd, "wb") as handle:
            size = DeferredTensors.of_model(model).write(handle)
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


def _claim_data_files(
    model: ir.Model, output: str, external_data: bool, source: str | None
) -> DataFiles:
    """The data file to write beside ``output`` (None: one file) and the stale ones."""
    external, why = _needs_external_data(model, external_data)
    data_files = claim_data_files(model, output, external, source)
    if data_files.path is not None:
        logger.info("saving %s with external data %s (%s)", output, data_files.path, why)
    return data_files


def _remove_stale(folder: str, paths: list[str]) -> None:
    """Removes the old OUTPUT's data files once the renames before are durable.

    The save has succeeded whatever happens here: a file left behind is only disk space.
    With nothing to remove the folder is not synced: a crash before the rename reaches
    the disk leaves the whole old OUTPUT, which the sequence allows, and on a busy disk
    that sync costs a small model's save several times over.
    """
    if not paths:
        return
    sync_folder(folder)
    for path in paths:
        _remove_old_data_file(path)


def _remove_old_data_file(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    except OSError as error:
        logger.warning("could not remove the old data file %s: %s", path, error)


def save_model(
    model: ir.Model | onnx.ModelProto | DeferredTensors,
    path: str | os.PathLike[str],
    *,
    external_data: bool = False,
    source_path: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    before_switch: BeforeSwitch | None = None,
) -> SavedModel:
    """Saves atomically, with external data when asked or needed (see the module doc).

    An onnx-ir model is left as it was, except that tensors read lazily from a data file
    this call removed now read the same values from the new one. A proto (the file
    path's save) is serialized by protobuf in one call, with none of onnx-ir's per-node
    work; with ``external_data`` the main graph's initializers over the threshold go to
    a data file beside OUTPUT, copied from the input's data files or written from the
    proto, and the proto is pointed at it. Tensors elsewhere in a proto (node
    attributes, subgraphs) stay as they are: a proto whose data lives there is saved as
    an onnx-ir model. A proto with deferred tensors (the file path's result) is written
    with their data straight from their arrays, or filled in first for a data file.

    Args:
        model: the model to save.
        path: OUTPUT.
        external_data: write initializers over the threshold to a data file (an onnx-ir
            model also gets one when it would not fit in one message).
        source_path: the file the model was loaded from; its own data files may then be
            removed when ``path`` is that same file.
        progress: called with a short message after each tensor written.
        before_switch: called with what is about to be saved once every file is written,
            just before the rename that puts OUTPUT in place; if it raises, nothing is.

    Raises:
        ModelIOError: the folder is missing, a data file is unsafe or belongs to another
            model, or the write fails.
    """
    output = check_output_path(path)
    remove_stale_temporaries(output)
    source = None if source_path is None else os.path.abspath(os.fspath(source_path))
    if isinstance(model, DeferredTensors):
        if external_data or not model:
            model = model.fill()
        else:
            return _save_proto(
                model.proto, output, False, source, progress, before_switch, model.write
            )
    if isinstance(model, onnx.ModelProto):
        return _save_proto(model, output, external_data, source, progress, before_switch)
    return _save_ir(model, output, external_data, source, progress, before_switch)


def _save_ir(
    model: ir.Model,
    output: str,
    external_data: bool,
    source: str | None,
    progress: Progress | None,
    before_switch: BeforeSwitch | None,
) -> SavedModel:
    data_files = _claim_data_files(model, output, external_data, source)
    originals: list[tuple[ir.Value, ir.TensorProtocol]] = []
    undo_attrs: list[tuple[ir.Node, str, ir.Attr]] = []

    def write_data(data_path: str) -> str:
        undo_attrs.extend(_inline_attribute_tensors(model))
        temp_data, written = write_data_file(model, output, data_path, progress)
        originals.extend(written)
        return temp_data

    def ready(size: int, kept: tuple[KeptFile, ...]) -> None:
        if before_switch is not None:
            before_switch(SavedModel(output, data_files.path, size, len(originals), kept))

    superseded: list[str] = []  # the old data files, once the new OUTPUT is in place
    kept: tuple[KeptFile, ...] = ()
    try:
        superseded, kept = _commit(
            output, data_files, write_data, lambda: _serialize_to(model, output)[0], ready
        )
    finally:
        restore_tensors(originals, superseded)
        _undo_inlining(undo_attrs, superseded)
    return _saved(output, data_files, superseded, kept, len(originals))


def _commit(
    output: str,
    data_files: DataFiles,
    write_data: Callable[[str], str],
    write_model: Callable[[], str],
    ready: Callable[[int, tuple[KeptFile, ...]], None],
) -> tuple[list[str], tuple[KeptFile, ...]]:
    """Steps 2 to 4 of the module doc; returns the old data files to remove and those kept.

    ``data_files`` has claimed the data file's name (step 1). ``write_data(final path)``
    (called when there is a data file) and ``write_model()`` write under temporary
    names and return them; ``ready(bytes of both files, data files kept)`` runs just
    before OUTPUT's rename, once the old data files are sorted into those to remove and
    those another model reads (:func:`split_stale`, which skips OUTPUT itself).
    """
    temp_paths: list[str] = []
    temp_model: str | None = None
    switched = False
    try:
        if data_files.path is not None:
            temp_paths.append(write_data(data_files.path))
        temp_model = write_model()
        temp_paths.append(temp_model)
        if data_files.path is not None:
            os.replace(temp_paths[0], data_files.path)
        remove, kept = split_stale(os.path.dirname(output), data_files.stale, output)
        for item in kept:
            logger.info("keeping the old data file %s: %s", item.path, item.reason)
        size = files_bytes(
            [temp_model] if data_files.path is None else [temp_model, data_files.path]
        )
        ready(size, tuple(kept))
        os.replace(temp_model, output)
        switched = True
    except (OSError, ValueError) as error:  # ValueError: onnx-ir's data containment checks
        raise ModelIOError(f"cannot write {output}: {error}") from None
    finally:
        # An interrupt raised as the rename returns skips ``switched = True``: the file
        # system tells whether OUTPUT now reads the new data file.
        renamed = temp_model is not None and not os.path.lexists(temp_model)
        for temp_path in temp_paths:
            discard(temp_path)
        if not (switched or renamed) and data_files.path is not None:
            discard(data_files.path)  # the claimed name: no model reads it
    return remove, tuple(kept)


def _saved(
    output: str,
    data_files: DataFiles,
    superseded: list[str],
    kept: tuple[KeptFile, ...],
    tensors: int,
) -> SavedModel:
    """Step 5 of the module doc, and what was written."""
    _remove_stale(os.path.dirname(output), superseded)
    written = [output] if data_files.path is None else [output, data_files.path]
    return SavedModel(
        path=output,
        data_path=data_files.path,
        bytes=files_bytes(written),
        external_tensors=tensors,
        kept_data_files=kept,
    )


def _save_proto(
    proto: onnx.ModelProto,
    output: str,
    external_data: bool,
    source: str | None,
    progress: Progress | None,
    before_switch: BeforeSwitch | None,
    write: Callable[[BinaryIO], object] | None = None,
) -> SavedModel:
    """Saves a proto; ``write(handle)``, when given, writes its serialization."""
    weights = initializer_model(proto, source) if external_data else None
    if weights is not None and source is not None:
        check_external_data(weights, source)
    data_files = claim_data_files(weights, output, external_data, source)
    moved: list[tuple[ir.Value, ir.TensorProtocol]] = []

    def write_data(data_path: str) -> str:
        assert weights is not None
        temp_data, written = write_data_file(weights, output, data_path, progress)
        moved.extend(written)
        _point_at_data(proto, [value for value, _ in written])
        return temp_data

    def write_proto() -> str:
        temp_path, fd = open_temporary(output)
        try:
            with os.fdopen(fd, "wb") as handle:
                if write is None:
                    handle.write(proto.SerializeToString())
                else:
                    write(handle)
                finish_file(handle, temp_path, output)
        except BaseException:
            discard(temp_path)
            raise
        return temp_path

    def ready(size: int, kept: tuple[KeptFile, ...]) -> None:
        if before_switch is not None:
            before_switch(SavedModel(output, data_files.path, size, len(moved), kept))

    superseded, kept = _commit(output, data_files, write_data, write_proto, ready)
    return _saved(output, data_files, superseded, kept, len(moved))


def initializer_model(proto: onnx.ModelProto, source: str | None) -> ir.Model:
    """The main graph's initializers that may go to a data file, as an onnx-ir model.

    What claiming the data file and writing it read: the external initializers and those
    whose message is over the threshold (their data cannot be larger), in a model without
    nodes. External data stays lazy (read from ``source``'s folder); each TensorProto is
    wrapped, not copied.
    """
    base_dir = "" if source is None else os.path.dirname(source)
    values = [
        ir.Value(name=t.name, const_value=ir.serde.deserialize_tensor(t, base_dir))
        for t in proto.graph.initializer
        if t.data_location == onnx.TensorProto.EXTERNAL
        or t.ByteSize() > EXTERNAL_DATA_THRESHOLD_BYTES
    ]
    graph = ir.Graph([], [], nodes=[], initializers=values, name=proto.graph.name)
    return ir.Model(graph, ir_version=proto.ir_version)


def _point_at_data(proto: onnx.ModelProto, values: list[ir.Value]) -> None:
    """Replaces the proto's initializers of ``values`` by their data-file references."""
    position = {t.name: i for i, t in enumerate(proto.graph.initializer)}
    for value in values:
        assert value.const_value is not None
        reference = ir.serde.serialize_tensor(value.const_value)
        proto.graph.initializer[position[value.name or ""]].CopyFrom(reference)
