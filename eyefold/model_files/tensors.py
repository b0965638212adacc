"""What a model's tensors are and where their data lives, read without loading any data.

Shared by loading (external data checks), saving (which tensors go to the data file, who
owns an existing data file) and ``--check`` (whether a model fits in memory as one proto).
"""

from __future__ import annotations

import math
import mmap
import os
from collections.abc import Iterator

import onnx
import onnx_ir as ir

from eyefold.core.proto_subgraphs import node_subgraphs
from eyefold.core.scopes import iter_scopes
from eyefold.errors import ModelIOError

__all__ = [
    "attribute_tensors",
    "body_tensors",
    "check_external_data",
    "check_external_fields",
    "external_data_files",
    "iter_attribute_tensors",
    "iter_external_tensors",
    "iter_initializers",
    "may_name_data_files",
    "read_data_locations",
    "referenced_files",
    "same_file",
    "tensor_bytes",
    "tensor_inventory",
]

# An existing OUTPUT is parsed to see whether it owns ``OUTPUT.data`` only up to this size:
# a model that keeps its weights outside is small.
_OWNER_PARSE_LIMIT_BYTES = 256 << 20


# Tensors of these classes hold their data in memory. ``isinstance(t, ir.ExternalTensor)``
# goes through typing's runtime-Protocol machinery (onnx-ir's tensor classes derive from
# TensorProtocol), several microseconds a call over every weight of a model in each walk:
# these common classes are answered by their type first.
_IN_MEMORY_CLASSES = frozenset({ir.serde.TensorProtoTensor, ir.Tensor})


def _is_external(tensor: ir.TensorProtocol) -> bool:
    """``isinstance(tensor, ir.ExternalTensor)``, the common in-memory classes first."""
    return type(tensor) not in _IN_MEMORY_CLASSES and isinstance(tensor, ir.ExternalTensor)


def iter_tensors(model: ir.Model) -> Iterator[ir.TensorProtocol]:
    """Every tensor with data: initializers and node attributes, in one walk of the model."""
    for graph in _all_graphs(model):
        if isinstance(graph, ir.Graph):
            for value in graph.initializers.values():
                if value.const_value is not None:
                    yield value.const_value
        for _, _, tensor in _attribute_tensors_of(graph):
            yield tensor


def iter_external_tensors(model: ir.Model) -> Iterator[ir.ExternalTensor]:
    """Tensors whose data is still in a file: initializers and node attributes."""
    for tensor in iter_tensors(model):
        if _is_external(tensor):
            yield tensor


def check_external_data(model: ir.Model, model_path: str) -> None:
    """Fails at load time, with the tensor named, on data files that are unsafe or short.

    Nothing is read: only paths are resolved and file sizes compared, once per data file
    (a model's tensors mostly share one). onnx-ir would raise the same containment errors
    later, in the middle of a pass or a save.
    """
    folder: str | None = None  # resolved at the first external tensor: most models have none
    sizes: dict[str, int] = {}  # location -> size of its checked data file
    for tensor in iter_external_tensors(model):
        if folder is None:
            folder = os.path.realpath(os.path.dirname(model_path))
        where = f"{model_path}: tensor {tensor.name!r} has external data {tensor.location!r}"
        location = os.fspath(tensor.location)
        if "\x00" in location:
            raise ModelIOError(f"{where}, a location with a NUL byte (no file has that name)")
        if location not in sizes:
            sizes[location] = _checked_data_file(folder, location, where)
        if tensor.length is not None and tensor.length != tensor.nbytes:
            raise ModelIOError(
                f"{where} with length {tensor.length}; its type and shape need"
                f" {tensor.nbytes} bytes"
            )
        if (tensor.offset or 0) < 0:
            raise ModelIOError(f"{where} at the negative offset {tensor.offset}")
        end = (tensor.offset or 0) + tensor.nbytes
        if sizes[location] < end:
            raise ModelIOError(
                f"{where}, which is {sizes[location]} bytes; the tensor ends at byte {end}"
            )


def _checked_data_file(folder: str, location: str, where: str) -> int:
    """The size of the data file at ``location``, once it is found safe to read."""
    data_path = os.path.realpath(os.path.join(folder, location))
    if os.path.commonpath([folder, data_path]) != folder:
        raise ModelIOError(f"{where} outside the model's folder {folder}")
    if not os.path.isfile(data_path):
        raise ModelIOError(f"{where}, which does not exist")
    status = os.stat(data_path)
    if status.st_nlink > 1:
        # As onnx and onnx-ir do: a hard link can put any file inside the folder.
        raise ModelIOError(
            f"{where}, a file with {status.st_nlink} hard links (refused:"
            " it may be a link to a file outside the folder)"
        )
    return status.st_size


def _all_graphs(model: ir.Model) -> Iterator[ir.Graph | ir.Function]:
    """The main graph, its subgraphs, every function and the subgraphs inside them."""
    for scope in iter_scopes(model):
        yield scope.graph


def iter_initializers(model: ir.Model) -> Iterator[ir.Value]:
    """Initializers with data, of the main graph and every subgraph."""
    for graph in _all_graphs(model):
        if isinstance(graph, ir.Graph):
            for value in graph.initializers.values():
                if value.const_value is not None:
                    yield value


def _attribute_tensors_of(
    graph: ir.Graph | ir.Function,
) -> Iterator[tuple[ir.Node, str, ir.TensorProtocol]]:
    for node in graph:
        if not node.attributes:
            continue
        for name, attr in node.attributes.items():
            if attr.type == ir.AttributeType.TENSOR and not attr.is_ref():
                # attr.value: as_tensor()'s runtime Protocol check costs ~80 us a call.
                yield node, name, attr.value


def iter_attribute_tensors(
    model: ir.Model,
) -> Iterator[tuple[ir.Node, str, ir.TensorProtocol]]:
    """(node, attribute name, tensor) for tensor attributes in every graph and function."""
    for graph in _all_graphs(model):
        yield from _attribute_tensors_of(graph)


def _nbytes(tensor: ir.TensorProtocol) -> int:
    """``tensor.nbytes``, read from the proto's dims for a tensor deserialized from one.

    Such a tensor builds a new ``ir.Shape`` at each ``shape`` (and so ``nbytes``) call:
    over the thousands of weights of a zoo model, most of a save's size check.
    """
    if type(tensor) is ir.serde.TensorProtoTensor:
        proto = tensor.raw
        return math.ceil(ir.DataType(proto.data_type).itemsize * math.prod(proto.dims))
    return tensor.nbytes


def tensor_bytes(model: ir.Model) -> int:
    """Bytes of all tensor data: initializers of every graph and Constant-like attributes."""
    return sum(_nbytes(tensor) for tensor in iter_tensors(model))


def tensor_inventory(model: ir.Model) -> tuple[list[str], int]:
    """(external data files, bytes of all tensor data), from one walk of the model."""
    files: dict[str, None] = {}
    total = 0
    for tensor in iter_tensors(model):
        total += _nbytes(tensor)
        if _is_external(tensor):
            files[os.path.abspath(tensor.path)] = None
    return list(files), total


def external_data_files(model: ir.Model) -> list[str]:
    """Absolute paths of the data files the model's external tensors are read from."""
    return list(
        {os.path.abspath(tensor.path): None for tensor in iter_external_tensors(model)}
    )


def same_file(first: str, second: str) -> bool:
    """Whether two paths name one file (the same real path, or links to one inode).

    The real path catches a file that does not exist yet, spelled through a linked folder.
    """
    if os.path.realpath(first) == os.path.realpath(second):
        return True
    try:
        return os.path.samefile(first, second)
    except OSError:
        return False


def attribute_tensors(node: onnx.NodeProto) -> Iterator[onnx.TensorProto]:
    """The tensors of ``node``'s attributes (a sparse tensor's values and indices too)."""
    for attr in node.attribute:
        if attr.HasField("t"):
            yield attr.t
        yield from attr.tensors
        if attr.HasField("sparse_tensor"):
            yield attr.sparse_tensor.values
            yield attr.sparse_tensor.indices


def body_tensors(body: onnx.GraphProto | onnx.FunctionProto) -> Iterator[onnx.TensorProto]:
    """Every tensor of a graph or function body, its subgraphs' included, depth first."""
    if isinstance(body, onnx.GraphProto):
        yield from body.initializer
    for node in body.node:
        yield from attribute_tensors(node)
        for sub in node_subgraphs(node):
            yield from body_tensors(sub)


def _model_tensors(proto: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """Every tensor of the proto: of the main graph, its subgraphs and every function."""
    for body in [proto.graph, *proto.functions]:
        yield from body_tensors(body)


_BYTE_COUNT_FIELDS = frozenset({"offset", "length"})


def check_external_fields(proto: onnx.ModelProto, model_path: str) -> None:
    """Fails, naming the tensor, on an external-data offset or length that is no byte count.

    onnx-ir refuses such a field too, but with an error that names neither the tensor nor
    the field. Called once that load has failed: a model that loads pays no extra walk.
    """
    for tensor in _model_tensors(proto):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        for entry in tensor.external_data:
            if entry.key in _BYTE_COUNT_FIELDS and not (
                entry.value.isascii() and entry.value.isdigit()
            ):
                raise ModelIOError(
                    f"{model_path}: tensor {tensor.name!r} has the external-data"
                    f" {entry.key} {entry.value!r}, which is not a byte count (a whole"
                    " number, 0 or more)"
                )


def _proto_data_files(proto: onnx.ModelProto, folder: str) -> list[str]:
    """Absolute paths of the data files a model proto's tensors name (none is opened).

    ``folder`` is the model file's folder, which locations are relative to.
    """
    files: dict[str, None] = {}
    for tensor in _model_tensors(proto):
        location = next((e.value for e in tensor.external_data if e.key == "location"), None)
        if location is not None:
            files[os.path.abspath(os.path.join(folder, location))] = None
    return list(files)


def may_name_data_files(model_path: str) -> bool:
    """Whether the model file holds the bytes ``location``; False proves it names no data file.

    ``location`` is the key of every external tensor's data file. The search runs at
    memory speed over the mapped file, with no parse.

    Raises:
        OSError: the file cannot be read.
    """
    with open(model_path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return False
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
            return view.find(b"location") >= 0


def read_data_locations(model_path: str) -> list[str]:
    """Absolute paths of the data files the model file at ``model_path`` names.

    Cheap: a file without the bytes ``location`` (every external tensor's key) names
    none and is not parsed; one with them is parsed without its data. Only a model that
    keeps its weights outside, and so is small, gets that far.

    Raises:
        OSError: the file cannot be read.
        ValueError: it names data files but is too large to parse cheaply.
        Exception: protobuf cannot parse it.
    """
    if not may_name_data_files(model_path):
        return []
    size = os.path.getsize(model_path)
    if size > _OWNER_PARSE_LIMIT_BYTES:
        raise ValueError(f"{size} bytes, too large to read its data file names")
    proto = onnx.load(model_path, load_external_data=False)
    return _proto_data_files(proto, os.path.dirname(os.path.abspath(model_path)))


def referenced_files(model_path: str) -> list[str]:
    """Absolute paths of the data files the model file at ``model_path`` keeps tensors in.

    Only the model file is parsed (no data is loaded); a missing, unreadable or very large
    file (a model with inline weights, which then owns no data file) answers [].
    """
    if not os.path.isfile(model_path):
        return []
    try:
        return read_data_locations(model_path)
    except Exception:  # any unreadable file is simply not the owner
        return []
