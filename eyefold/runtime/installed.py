"""The runtimes eyefold can target and their installed versions, importing none of them.

The command line lists the runtimes in ``--help``, and a run that only judges EyeLike
nodes against a cached measurement needs the installed version, not the runtime:
``eyefold.runtime.support`` (numpy, onnx) and onnxruntime itself (about 0.2 s) are
imported only by the runs that measure.
"""

from __future__ import annotations

import contextlib
import functools

__all__ = ["SUPPORTED_RUNTIMES", "installed_version"]

SUPPORTED_RUNTIMES = ("onnxruntime",)


@functools.cache
def installed_version(runtime: str = "onnxruntime") -> str | None:
    """The installed runtime's version from its package metadata, None when absent.

    GPU and other builds ship the same import name under another distribution name, so
    the import name's distributions are asked too. Reading the metadata parses files of
    every installed distribution; it is read once per process (a package installed
    while a process runs is not imported by it either).
    """
    import importlib.metadata  # about 10 ms of imports: only runs that judge need it

    try:
        return importlib.metadata.version(runtime)
    except importlib.metadata.PackageNotFoundError:
        pass
    for distribution in importlib.metadata.packages_distributions().get(runtime, []):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            return importlib.metadata.version(distribution)
    return None
