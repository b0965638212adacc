"""Reading and writing model files: eyefold's only code that touches the file system.

Modules:

* :mod:`~eyefold.model_files.save`: loading and atomic saving, with or without external
  data.
* :mod:`~eyefold.model_files.tensors`: where a model's tensors and their data live, read
  without loading any data.
* :mod:`~eyefold.model_files.structure_checks`: what onnx-ir loads but eyefold refuses
  (dangling references, cycles, text that is not UTF-8).
* :mod:`~eyefold.model_files.stream_write`: a model file written with its large
  initializers streamed from their arrays.
* :mod:`~eyefold.model_files.sparse_write`: tensor bytes written with runs of zeros left
  as holes.
"""

from __future__ import annotations

from eyefold.model_files.save import (
    EXTERNAL_DATA_THRESHOLD_BYTES,
    INLINE_LIMIT_BYTES,
    PROTOBUF_LIMIT_BYTES,
    SavedModel,
    check_output_path,
    external_data_files,
    external_data_name,
    files_bytes,
    load_model,
    save_model,
    tensor_bytes,
    write_text,
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
