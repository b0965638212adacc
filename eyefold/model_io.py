"""Reading and writing model files without ever leaving a half-written output behind."""

from __future__ import annotations

import contextlib
import os
import tempfile

import onnx_ir as ir
from google.protobuf.message import DecodeError

from eyefold.errors import ModelIOError

__all__ = ["load_model", "save_model"]


def load_model(path: str | os.PathLike[str]) -> ir.Model:
    """Loads a model with onnx-ir, external data left lazy (memory-mapped on first use).

    The path is made absolute first: onnx-ir skips its external-data containment check when
    the model's folder is an empty string (a bare file name), which would let ``../``
    locations read outside the model's folder.

    Raises:
        ModelIOError: the file is missing, unreadable or not an ONNX model.
    """
    full_path = os.path.abspath(os.fspath(path))
    if not os.path.exists(full_path):
        raise ModelIOError(f"cannot read {full_path}: no such file")
    if not os.path.isfile(full_path):
        raise ModelIOError(f"cannot read {full_path}: not a regular file")
    try:
        model = ir.load(full_path)
    except DecodeError as error:
        raise ModelIOError(f"{full_path} is not an ONNX model (protobuf: {error})") from None
    except (OSError, ValueError, TypeError, RuntimeError) as error:
        raise ModelIOError(f"cannot load {full_path}: {error}") from None
    if model.ir_version < 3 or not model.opset_imports:
        raise ModelIOError(
            f"{full_path} is not an ONNX model (ir_version {model.ir_version},"
            f" {len(model.opset_imports)} opset imports)"
        )
    return model


def save_model(model: ir.Model, path: str | os.PathLike[str]) -> None:
    """Saves atomically: a temporary file in the output's folder, renamed when complete.

    A crash or a kill during the write leaves the previous file (or none), never a partial
    one, and OUTPUT may be the input's own path.

    Raises:
        ModelIOError: the folder is missing or the write fails.
    """
    full_path = os.path.abspath(os.fspath(path))
    folder = os.path.dirname(full_path)
    if not os.path.isdir(folder):
        raise ModelIOError(f"cannot write {full_path}: folder {folder} does not exist")
    handle, temp_path = tempfile.mkstemp(
        prefix=f".{os.path.basename(full_path)}.", suffix=".tmp", dir=folder
    )
    os.close(handle)
    try:
        ir.save(model, temp_path)
        os.replace(temp_path, full_path)
    except (OSError, ValueError) as error:
        raise ModelIOError(f"cannot write {full_path}: {error}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temp_path)
