"""The runtimes eyefold can target and their installed versions, importing none of them.

The command line lists the runtimes in ``--help``, and a run that only judges EyeLike
nodes against a cached measurement needs the installed version, not the runtime:
``eyefold.runtime.support`` (numpy, onnx) and the runtimes themselves (onnxruntime about
0.2 s, OpenVINO and TVM more) are imported only by the runs that measure.
"""

from __future__ import annotations

import contextlib
import functools

__all__ = ["DISTRIBUTIONS", "SUPPORTED_RUNTIMES", "installed_version"]

# The runtimes whose EyeLike support eyefold knows (probed, cached or measured into a
# table); ``tensorrt`` is a lowering target (eyefold.options.LOWERED_RUNTIMES), not here.
SUPPORTED_RUNTIMES = ("onnxruntime", "openvino", "tract", "tvm")

# The package each runtime is installed as, where it differs from the runtime's name.
DISTRIBUTIONS = {"tvm": "apache-tvm"}
# Runtimes whose other builds (GPU, DirectML...) ship the same import name under other
# distribution names. Finding those scans every installed package (tens of milliseconds),
# so only onnxruntime, whose version keys its cached measurement, is looked up that way.
_SCANNED_RUNTIMES = ("onnxruntime",)


@functools.cache
def installed_version(runtime: str = "onnxruntime") -> str | None:
    """The installed runtime's version from its package metadata, None when absent.

    onnxruntime's GPU and other builds ship the same import name under another
    distribution name, so the import name's distributions are asked too. Reading the
    metadata parses files of every installed distribution; it is read once per process (a
    package installed while a process runs is not imported by it either).
    """
    import importlib.metadata  # about 10 ms of imports: only runs that judge need it

    try:
        return importlib.metadata.version(DISTRIBUTIONS.get(runtime, runtime))
    except importlib.metadata.PackageNotFoundError:
        if runtime not in _SCANNED_RUNTIMES:
            return None
    for distribution in importlib.metadata.packages_distributions().get(runtime, []):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            return importlib.metadata.version(distribution)
    return None
