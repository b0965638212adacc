"""Reading and writing model files, atomically and safely with their external data.

The runtime-support cache (:mod:`eyefold.runtime.cache`) and the batch run's folders
(:mod:`eyefold.batch`) write files too, each of their own kind; every model file and
report goes through here.

Modules:

* :mod:`~eyefold.model_files.load`: :func:`read_model_proto` (protobuf only) and
  :func:`load_model` / :func:`model_from_proto`, external data left lazy and the structure
  checked.
* :mod:`~eyefold.model_files.save`: :func:`save_model` of an onnx-ir model or a proto,
  atomic, with or without external data, and what it wrote (:class:`SavedModel`).
* :mod:`~eyefold.model_files.data_file`: the external data file of a save: its name (the
  rule that never overwrites the data the existing OUTPUT reads), which old data files
  go, its contents.
* :mod:`~eyefold.model_files.path_rules`: what OUTPUT, its data file and the report may
  not be (the input, a data file it reads, each other), checked before anything is
  written.
* :mod:`~eyefold.model_files.atomic_write`: temporary files beside a target, flushed and
  renamed into place, and removed when a killed write left them; :func:`write_text`, or
  :func:`stage_text` then :func:`put_in_place` for a file put in place with another.
* :mod:`~eyefold.model_files.tensors`: where a model's tensors and their data live, read
  without loading any data.
* :mod:`~eyefold.model_files.structure_checks`: what onnx-ir loads but eyefold refuses
  (dangling references, cycles, text that is not UTF-8).
* :mod:`~eyefold.model_files.sparse_initializers`: sparse initializers, which onnx-ir does
  not read, made dense before it reads a model.
* :mod:`~eyefold.model_files.deferred_tensors`: a model file written with its large
  initializers streamed from their arrays, on either path.
* :mod:`~eyefold.model_files.sparse_write`: tensor bytes written with runs of zeros left
  as holes.
"""

from __future__ import annotations

from eyefold.model_files.atomic_write import (
    check_output_path,
    put_in_place,
    stage_text,
    write_text,
)
from eyefold.model_files.data_file import EXTERNAL_DATA_THRESHOLD_BYTES, external_data_name
from eyefold.model_files.load import load_model, model_from_proto, read_model_proto
from eyefold.model_files.save import (
    INLINE_LIMIT_BYTES,
    PROTOBUF_LIMIT_BYTES,
    SavedModel,
    files_bytes,
    save_model,
)
from eyefold.model_files.tensors import external_data_files, tensor_bytes

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
    "model_from_proto",
    "put_in_place",
    "read_model_proto",
    "save_model",
    "stage_text",
    "tensor_bytes",
    "write_text",
]
