"""Loading a model file, with its external data left lazy and its structure checked.

onnx-ir maps each external tensor on first use, so a 3 GiB model costs only what the
pipeline touches. What onnx-ir loads but eyefold cannot work on (dangling references,
cycles, data files outside the model's folder) is refused here, with one clear error.
"""

from __future__ import annotations

import os

import onnx
import onnx_ir as ir
from google.protobuf.message import DecodeError

from eyefold.errors import InvalidModelError, ModelIOError
from eyefold.model_files.sparse_initializers import with_dense_initializers
from eyefold.model_files.structure_checks import check_structure, held_load_warnings
from eyefold.model_files.tensors import check_external_data, check_external_fields
from eyefold.model_files.wire import top_level_problem

__all__ = [
    "load_model",
    "model_from_memory",
    "model_from_proto",
    "not_a_model",
    "read_model_proto",
    "root_cause",
]


def root_cause(error: BaseException) -> BaseException:
    """The innermost cause: onnx-ir's SerdeError only says which graph failed."""
    while error.__cause__ is not None:
        error = error.__cause__
    return error


def not_a_model(proto: onnx.ModelProto) -> str | None:
    """Why ``proto`` cannot be an ONNX model (protobuf parses almost any bytes), or None.

    Every model has an IR version of 3 or more, an opset import and a graph; an empty
    ``ModelProto()`` or a file of other bytes that happen to parse has none of them.
    """
    if proto.ir_version >= 3 and proto.opset_import and proto.HasField("graph"):
        return None
    graph = "a graph" if proto.HasField("graph") else "no graph"
    return f"ir_version {proto.ir_version}, {len(proto.opset_import)} opset imports, {graph}"


def read_model_proto(path: str | os.PathLike[str]) -> onnx.ModelProto:
    """Parses a model file with protobuf, external data left in its files.

    Raises:
        ModelIOError: the file is missing, unreadable or not an ONNX model.
    """
    full_path = os.path.abspath(os.fspath(path))
    if not os.path.exists(full_path):
        raise ModelIOError(f"cannot read {full_path}: no such file")
    if not os.path.isfile(full_path):
        raise ModelIOError(f"cannot read {full_path}: not a regular file")
    try:
        with open(full_path, "rb") as handle:  # a huge file of other bytes: refused here
            problem = top_level_problem(handle, os.fstat(handle.fileno()).st_size)
        if problem is not None:
            raise ModelIOError(f"{full_path} is not an ONNX model (protobuf: {problem})")
        proto = onnx.load(full_path, load_external_data=False)
    except DecodeError as error:
        raise ModelIOError(f"{full_path} is not an ONNX model (protobuf: {error})") from None
    except (OSError, ValueError, TypeError, RuntimeError) as error:
        raise ModelIOError(f"cannot load {full_path}: {root_cause(error)}") from None
    problem = not_a_model(proto)
    if problem is not None:
        raise ModelIOError(f"{full_path} is not an ONNX model ({problem})")
    return proto


def model_from_proto(proto: onnx.ModelProto, model_path: str) -> ir.Model:
    """The onnx-ir model of a proto read from ``model_path``, checked as a load is.

    Sparse initializers are made dense (:mod:`eyefold.model_files.sparse_initializers`).
    External tensors stay lazy, read relative to ``model_path``'s folder (made absolute
    first: onnx-ir skips its external-data containment check when that folder is an empty
    string, which would let ``../`` locations read outside it).

    Raises:
        ModelIOError: a tensor cannot be read as declared, or its data file is unsafe.
        InvalidModelError: a dangling reference, a cycle, text that is not UTF-8... (see
            :mod:`eyefold.model_files.structure_checks`).
    """
    full_path = os.path.abspath(model_path)
    try:
        with held_load_warnings():  # a dangling reference is an error, not a log line
            model = ir.serde.deserialize_model(with_dense_initializers(proto))
            check_structure(model)
    except (OSError, ValueError, TypeError, RuntimeError) as error:
        check_external_fields(proto, full_path)  # names the tensor, if it is one of those
        raise ModelIOError(f"cannot load {full_path}: {root_cause(error)}") from None
    ir.external_data.set_base_dir(model.graph, os.path.dirname(full_path))
    check_external_data(model, full_path)
    return model


def model_from_memory(proto: onnx.ModelProto) -> ir.Model:
    """The onnx-ir model of a proto the library was given (no file: nothing to check).

    Raises:
        InvalidModelError: onnx-ir cannot read it (an element type onnx does not define,
            text that is not UTF-8...).
    """
    try:
        return ir.serde.deserialize_model(with_dense_initializers(proto))
    except (ValueError, TypeError, RuntimeError) as error:
        raise InvalidModelError(f"the model cannot be read: {root_cause(error)}") from None


def load_model(path: str | os.PathLike[str]) -> ir.Model:
    """Loads a model with onnx-ir, external data left lazy (memory-mapped on first use).

    Raises:
        ModelIOError: the file is missing, unreadable or not an ONNX model.
        InvalidModelError: a dangling reference or a cycle (see
            :mod:`eyefold.model_files.structure_checks`).
    """
    return model_from_proto(read_model_proto(path), os.path.abspath(os.fspath(path)))
