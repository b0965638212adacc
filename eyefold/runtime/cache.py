"""The runtime-support cache: one JSON file per runtime version in the user cache folder.

Measuring onnxruntime takes well under a second, but every run that targets it would pay
that again; the cache keeps the measurement per installed version (``$EYEFOLD_CACHE_DIR``,
else ``$XDG_CACHE_HOME/eyefold``, else ``~/.cache/eyefold``). A cache file that cannot be
read or written only costs a new measurement, never the run.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import tempfile

import onnx_ir as ir

from eyefold.runtime.table import CACHE_FORMAT, EYELIKE_VERSIONS, Combination, EyeLikeSupport

__all__ = ["CACHE_DIR_ENV", "cache_dir", "cache_path", "read_cache", "write_cache"]

# The messages keep the logger name of eyefold.runtime.support, which users configure.
logger = logging.getLogger("eyefold.runtime.support")

CACHE_DIR_ENV = "EYEFOLD_CACHE_DIR"


def _decode(rows: list[list[str | None]]) -> frozenset[Combination]:
    """The combinations :meth:`EyeLikeSupport.to_json` wrote; KeyError on an unknown type."""
    pairs: set[Combination] = set()
    for input_name, output_name in rows:
        assert isinstance(input_name, str)
        input_type = ir.DataType[input_name]
        pairs.add((input_type, None if output_name is None else ir.DataType[output_name]))
    return frozenset(pairs)


def cache_dir() -> pathlib.Path:
    """``$EYEFOLD_CACHE_DIR``, else ``$XDG_CACHE_HOME/eyefold``, else ``~/.cache/eyefold``."""
    explicit = os.environ.get(CACHE_DIR_ENV)
    if explicit:
        return pathlib.Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = pathlib.Path(xdg) if xdg else pathlib.Path.home() / ".cache"
    return base / "eyefold"


def cache_path(runtime: str, version: str) -> pathlib.Path:
    """Where the measurement of ``runtime`` ``version`` is cached."""
    safe_version = "".join(c if c.isalnum() or c in ".+-_" else "_" for c in version)
    return cache_dir() / f"{runtime}-{safe_version}-eyelike.json"


# Measurements read in this process, by cache file, with the file's (mtime, size, inode)
# when it was read: a run reads the table at several steps, and batch mode once per model.
_READ: dict[pathlib.Path, tuple[tuple[int, int, int], EyeLikeSupport]] = {}


def read_cache(runtime: str, version: str) -> EyeLikeSupport | None:
    """The cached measurement of ``runtime`` ``version``, None when there is none to trust.

    A file written for another version or format, or one that cannot be read, is ignored
    (and logged) rather than raised: a new measurement replaces it. A file already read
    in this process and unchanged since (same modification time, size and inode) is not
    read again.
    """
    path = cache_path(runtime, version)
    try:
        status = path.stat()
    except FileNotFoundError:
        return None
    except OSError:
        return _read(path, runtime, version)  # reading says what is wrong
    stamp = (status.st_mtime_ns, status.st_size, status.st_ino)
    known = _READ.get(path)
    if known is not None and known[0] == stamp:
        return known[1]
    support = _read(path, runtime, version)
    if support is not None:
        _READ[path] = (stamp, support)
    return support


def _read(path: pathlib.Path, runtime: str, version: str) -> EyeLikeSupport | None:
    """The measurement in ``path``, None (logged) when it cannot be trusted."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise TypeError(f"a JSON {type(data).__name__}, not an object")
        if (
            data.get("format") != CACHE_FORMAT
            or data.get("runtime") != runtime
            or data.get("version") != version
        ):
            logger.info("ignoring %s: written for another version or format", path)
            return None
        tables = data["eyelike"]
        return EyeLikeSupport(
            runtime=runtime,
            version=version,
            source="cache",
            supported={v: _decode(tables[str(v)]["supported"]) for v in EYELIKE_VERSIONS},
            native={v: _decode(tables[str(v)]["native"]) for v in EYELIKE_VERSIONS},
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, AssertionError) as error:
        # Whatever the file holds (another tool's JSON, a truncated write, garbage), it
        # costs a new measurement, which then replaces it.
        logger.warning(
            "ignoring the unreadable cache file %s (%s); measuring again", path, error
        )
        return None


def write_cache(support: EyeLikeSupport) -> None:
    """Stores a measurement atomically (a reader never sees half a file); errors are logged."""
    assert support.version is not None
    path = cache_path(support.runtime, support.version)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            "w",
            encoding="utf-8",
            dir=path.parent,
            prefix=path.name,
            suffix=".tmp",
            delete=False,
        ) as handle:
            json.dump(support.to_json(), handle, indent=1)
            handle.write("\n")
        os.replace(handle.name, path)
    except OSError as error:
        # The measurement is still used; it will just be repeated next time.
        logger.warning("cannot write the runtime-support cache %s: %s", path, error)
