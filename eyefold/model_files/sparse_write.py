"""Write tensor bytes into a data file, leaving runs of zeros as holes.

A folded EyeLike is almost all zeros (a 23200 x 23200 float identity is 2.15 GB, of which
92.8 KB are ones), and weights copied from a sparse data file are zeros where the source has
holes. Skipping those runs with a seek keeps the output file sparse on filesystems that
support it; reading it back gives the same bytes either way. Other data is copied as is:
from a data file with ``os.copy_file_range`` where available (no bytes pass through Python),
from memory in blocks.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import BinaryIO

import numpy as np
import onnx_ir as ir

__all__ = ["write_tensor"]

# Zero pages are skipped (left as holes); everything else is written in blocks.
PAGE_BYTES = 4096
BLOCK_BYTES = 1 << 20
_NO_KERNEL_COPY = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM, errno.EXDEV}


def _contiguous_bytes(tensor: ir.TensorProtocol) -> np.ndarray | None:
    """The tensor's bytes as a flat uint8 array without a copy, when it is numpy-backed."""
    if not isinstance(tensor, ir.Tensor) or not isinstance(tensor.raw, np.ndarray):
        return None
    array = tensor.raw
    if tensor.dtype.bitwidth < 8 or not array.flags.c_contiguous or array.dtype.hasobject:
        return None  # packed 4-bit types are laid out by tobytes(); leave them to it
    if array.dtype.byteorder == ">" or sys.byteorder != "little":
        return None  # tobytes() converts to the little-endian order ONNX stores
    return array.reshape(-1).view(np.uint8)


def _nonzero_runs(data: np.ndarray) -> list[tuple[int, int]]:
    """Byte ranges of ``data`` to write: runs of pages that hold a nonzero byte."""
    pages = data.size // PAGE_BYTES
    if pages == 0:
        return [(0, data.size)] if data.size else []
    # One vectorized pass: a page is kept when any of its 8-byte words is nonzero.
    words = data[: pages * PAGE_BYTES].view(np.uint64).reshape(pages, PAGE_BYTES // 8)
    keep = np.concatenate(([False], words.any(axis=1), [False]))
    edges = np.flatnonzero(keep[1:] != keep[:-1])
    runs = [
        (int(a) * PAGE_BYTES, int(b) * PAGE_BYTES)
        for a, b in zip(edges[::2], edges[1::2], strict=True)
    ]
    if data.size > pages * PAGE_BYTES:
        runs.append((pages * PAGE_BYTES, data.size))  # the tail is always written
    return runs


def _write_memory(data: np.ndarray, handle: BinaryIO) -> None:
    start = handle.tell()
    for begin, end in _nonzero_runs(data):
        handle.seek(start + begin)
        for chunk in range(begin, end, BLOCK_BYTES):
            handle.write(data[chunk : min(end, chunk + BLOCK_BYTES)].data)
    handle.seek(start + data.size)


def _data_ranges(fd: int, begin: int, end: int) -> list[tuple[int, int]]:
    """The non-hole ranges of ``[begin, end)`` in the file ``fd`` (all of it if unknown)."""
    ranges = []
    position = begin
    while position < end:
        try:
            data = os.lseek(fd, position, os.SEEK_DATA)
        except OSError as error:
            if error.errno == errno.ENXIO:  # only a hole is left
                break
            return [(begin, end)]  # SEEK_DATA unsupported here: copy everything
        if data >= end:
            break
        hole = min(os.lseek(fd, data, os.SEEK_HOLE), end)
        ranges.append((data, hole))
        position = hole
    return ranges


def _copy_range(source: int, handle: BinaryIO, begin: int, length: int, at: int) -> None:
    handle.flush()
    destination = handle.fileno()
    copied = 0
    copy_file_range = getattr(os, "copy_file_range", None)
    if copy_file_range is not None:
        try:
            while copied < length:
                done = copy_file_range(
                    source,
                    destination,
                    min(1 << 30, length - copied),
                    offset_src=begin + copied,
                    offset_dst=at + copied,
                )
                if done == 0:
                    break
                copied += done
        except OSError as error:
            if error.errno not in _NO_KERNEL_COPY:
                raise
    while copied < length:
        chunk = os.pread(source, min(BLOCK_BYTES, length - copied), begin + copied)
        if not chunk:
            raise OSError(errno.EIO, f"external data ends {length - copied} bytes early")
        os.pwrite(destination, chunk, at + copied)
        copied += len(chunk)


def _check_contained(tensor: ir.ExternalTensor, contained: set[tuple[str, str]]) -> None:
    """The containment rule onnx-ir applies when it reads: stay inside ``base_dir``.

    ``contained`` holds the (base_dir, path) pairs already checked by this write: the
    tensors of one model mostly share one data file, and resolving its path per tensor
    would cost two ``realpath`` walks each.
    """
    key = (os.fspath(tensor.base_dir), tensor.path)
    if not tensor.base_dir or key in contained:
        return
    base = os.path.realpath(tensor.base_dir)
    if os.path.commonpath([base, os.path.realpath(tensor.path)]) != base:
        raise ValueError(
            f"external data {tensor.location!r} of tensor {tensor.name!r} is outside {base}"
        )
    contained.add(key)


def _write_external(
    tensor: ir.ExternalTensor, handle: BinaryIO, contained: set[tuple[str, str]]
) -> None:
    _check_contained(tensor, contained)
    start = handle.tell()
    begin = tensor.offset or 0
    length = tensor.length or tensor.nbytes
    with open(tensor.path, "rb") as source:
        fd = source.fileno()
        if os.fstat(fd).st_size < begin + length:
            raise OSError(errno.EIO, f"external data file {tensor.path} is too short")
        for data, hole in _data_ranges(fd, begin, begin + length):
            _copy_range(fd, handle, data, hole - data, start + data - begin)
    handle.seek(start + length)


def write_tensor(
    tensor: ir.TensorProtocol,
    handle: BinaryIO,
    contained: set[tuple[str, str]] | None = None,
) -> None:
    """Writes the tensor's bytes at the handle's position and leaves it after them.

    The caller sets the file's final size (``truncate``) so that a trailing hole counts.
    A caller writing many tensors passes one ``contained`` set to all of them: each data
    file's containment is then checked once.
    """
    if isinstance(tensor, ir.ExternalTensor):
        if not tensor.valid():
            raise ValueError(f"external tensor {tensor.name!r} was invalidated")
        _write_external(tensor, handle, set() if contained is None else contained)
        return
    data = _contiguous_bytes(tensor)
    if data is None:
        tensor.tofile(handle)
    else:
        _write_memory(data, handle)
