"""Which EyeLike type combinations a runtime can run, and the profile a run judges by.

A combination is ``(input type, dtype attribute)``, the attribute being None when absent
(the output then has the input's type). EyeLike-22 allows 13 input types and 13 dtypes or
none: 182 combinations; EyeLike-9 (opsets 9..21) has no bfloat16: 156.

For onnxruntime the answer is measured, not guessed: one tiny single-node session per
combination (symbolic input shape, graph optimizations off, one thread), which must load
*and* return the identity matrix bit for bit. That takes well under a second; the result is
cached as JSON per onnxruntime version in the user cache folder (``$EYEFOLD_CACHE_DIR``, else
``$XDG_CACHE_HOME/eyefold``, else ``~/.cache/eyefold``). The kernel registry onnxruntime
exposes (``get_all_opkernel_def``) is read too, but only to tell native combinations from
those onnxruntime runs by inserting casts of its own (float16 on CPU): it lists the CPU
kernel's types and misses what those casts add, so it cannot replace the probe.

Without onnxruntime installed, :data:`FALLBACK_SUPPORTED` (measured with onnxruntime 1.32)
stands in. Nothing here probes unless asked to, so a pipeline without a target runtime
never imports onnxruntime.

OpenVINO, tract and TVM are not probed: measuring their tables took 11, 6 and 25 s here
(imports and one compiled model per cell), so eyefold ships their tables, measured with a
stated version on a stated date (:mod:`eyefold.runtime.measured`), and says so in every
verdict. A
:class:`~eyefold.runtime.profile.RuntimeProfile` adds to each runtime's EyeLike table the
Casts and lowered forms it runs (:func:`get_profile`).

This module decides between the three sources; the table type is
:mod:`eyefold.runtime.table`, the measurement :mod:`eyefold.runtime.probe` and the cache
:mod:`eyefold.runtime.cache`, and the names they export stay importable from here.
"""

from __future__ import annotations

import functools

from eyefold.errors import EyefoldError
from eyefold.runtime.cache import CACHE_DIR_ENV, cache_dir, cache_path, read_cache, write_cache
from eyefold.runtime.installed import SUPPORTED_RUNTIMES, installed_version
from eyefold.runtime.measured import MEASURED
from eyefold.runtime.probe import probe_onnxruntime
from eyefold.runtime.profile import RuntimeProfile
from eyefold.runtime.table import (
    EYELIKE_VERSIONS,
    FALLBACK_NATIVE,
    FALLBACK_SUPPORTED,
    Combination,
    EyeLikeSupport,
    all_combinations,
    eyelike_version,
)
from eyefold.runtime.table import Source as Source  # EyeLikeSupport.source's type

__all__ = [
    "CACHE_DIR_ENV",
    "FALLBACK_NATIVE",
    "FALLBACK_SUPPORTED",
    "SUPPORTED_RUNTIMES",
    "Combination",
    "EyeLikeSupport",
    "all_combinations",
    "cache_dir",
    "cache_path",
    "check_runtime",
    "eyelike_version",
    "fallback_support",
    "get_profile",
    "get_support",
    "other_profiles",
    "probe_onnxruntime",
    "table_support",
]

# The runtime whose support is probed on the installed version; the others ship tables.
_PROBED_RUNTIME = "onnxruntime"


@functools.cache
def fallback_support(
    runtime: str = "onnxruntime", version: str | None = None
) -> EyeLikeSupport:
    """The table measured with onnxruntime 1.32, for when no measurement is at hand.

    Another runtime's fallback is its shipped table (:func:`table_support`).
    Built once per process for each runtime and version (the table is frozen).
    """
    check_runtime(runtime)
    if runtime != _PROBED_RUNTIME:
        return table_support(runtime, version)
    return EyeLikeSupport(
        runtime=runtime,
        version=version,
        source="fallback",
        supported=dict.fromkeys(EYELIKE_VERSIONS, FALLBACK_SUPPORTED),
        native=dict.fromkeys(EYELIKE_VERSIONS, FALLBACK_NATIVE),
    )


def check_runtime(runtime: str) -> None:
    """Raises EyefoldError unless ``runtime`` is one eyefold can target."""
    if runtime not in SUPPORTED_RUNTIMES:
        raise EyefoldError(
            f"unknown target runtime {runtime!r}; supported: {', '.join(SUPPORTED_RUNTIMES)}"
        )


def table_support(runtime: str, version: str | None = None) -> EyeLikeSupport:
    """The EyeLike table eyefold ships for ``runtime`` (OpenVINO, tract or TVM).

    Raises:
        EyefoldError: a runtime without a shipped table.
    """
    check_runtime(runtime)
    measured = MEASURED[runtime]
    if measured.eyelike is None:
        raise EyefoldError(f"{runtime} is probed, not read from a table")
    return EyeLikeSupport(
        runtime=runtime,
        version=version,
        source="table",
        supported=measured.eyelike,
        native=measured.eyelike,
        measured=f"{measured.version} on {measured.date}",
    )


def get_support(runtime: str = "onnxruntime", *, probe: bool = True) -> EyeLikeSupport:
    """What ``runtime`` runs: for onnxruntime the cached measurement, else a new one.

    Args:
        runtime: the target runtime, one of :data:`SUPPORTED_RUNTIMES`.
        probe: measure onnxruntime (and cache) when no cache file exists for the
            installed version. False never creates a session: the cache, else the
            fallback table. The other runtimes are never probed: their shipped tables.

    Returns:
        The measurement, :func:`fallback_support` when onnxruntime is not installed, or
        :func:`table_support` for the other runtimes.

    Raises:
        EyefoldError: an unknown runtime name.
    """
    check_runtime(runtime)
    version = installed_version(runtime)
    if runtime != _PROBED_RUNTIME:
        return table_support(runtime, version)
    if version is None:
        return fallback_support(runtime)
    cached = read_cache(runtime, version)
    if cached is not None:
        return cached
    if not probe:
        return fallback_support(runtime, version)
    try:
        measured = probe_onnxruntime()
    except EyefoldError:  # installed, but its shared library cannot load
        return fallback_support(runtime)
    write_cache(measured)
    return measured


def get_profile(
    runtime: str, *, probe: bool = True, support: EyeLikeSupport | None = None
) -> RuntimeProfile:
    """What ``runtime`` runs of EyeLike, Cast and the lowered form.

    Args:
        runtime: one of :data:`SUPPORTED_RUNTIMES`.
        probe: as for :func:`get_support`.
        support: the EyeLike table to use instead of :func:`get_support`'s.

    Raises:
        EyefoldError: an unknown runtime name.
    """
    check_runtime(runtime)
    measured = MEASURED[runtime]
    return RuntimeProfile(
        support=support or get_support(runtime, probe=probe),
        casts=measured.casts,
        lowered=measured.lowered,
        implicit_fill=measured.implicit_fill,
    )


def other_profiles(runtime: str) -> list[RuntimeProfile]:
    """The profiles of every known runtime but ``runtime``, none of them probed.

    A rewrite for ``runtime`` must keep running on these wherever the node ran before.
    """
    return [get_profile(name, probe=False) for name in SUPPORTED_RUNTIMES if name != runtime]
