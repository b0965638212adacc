"""Loading a model file, with its external data left lazy and its structure checked.

onnx-ir maps each external tensor on first use, so a 3 GiB model costs only what the
pipeline touches. What onnx-ir loads but eyefold cannot work on (dangling references,
cycles, data files outside the model's folder) is refused here, with one clear error.
"""

from __future__ import annotations

import os

import onnx_ir as ir
from google.protobuf.message import DecodeError

from eyefold.errors import ModelIOError
from eyefold.model_files.structure_checks import check_structure, held_load_warnings
from eyefold.model_files.tensors import check_external_data

__all__ = ["load_model", "root_cause"]


def root_cause(error: BaseException) -> BaseException:
    """The innermost cause: onnx-ir's SerdeError only says which graph failed."""
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
        raise ModelIOError(f"cannot load {full_path}: {root_cause(error)}") from None
    if model.ir_version < 3 or not model.opset_imports:
        raise ModelIOError(
            f"{full_path} is not an ONNX model (ir_version {model.ir_version},"
            f" {len(model.opset_imports)} opset imports)"
        )
    check_external_data(model, full_path)
    return model
