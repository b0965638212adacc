"""Files written under a temporary name beside their target, then renamed into place.

A temporary file lives in the target's own folder (a rename across filesystems would be a
copy), is flushed to disk before the rename, and takes the mode of the file it replaces,
so a crash or a full disk leaves the previous file, never a partial one.

Ctrl-C can land between a temporary file's creation and the ``try`` that would remove it
(or between its last write and the rename that owns it): every temporary file this process
created and has not yet renamed or removed is remembered, and :func:`discard_unfinished`
removes them on the way out.

A process killed mid-write cannot remove its temporary file. Temporary names follow one
pattern per target (``.<target name>.<8 hex digits>.tmp``), so the next write to that
target removes the ones left behind, once they are old enough that no running write can
still own them.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
import time

from eyefold.errors import ModelIOError

__all__ = [
    "STALE_TEMPORARY_SECONDS",
    "check_output_path",
    "discard",
    "discard_unfinished",
    "finish_file",
    "open_temporary",
    "put_in_place",
    "remove_stale_temporaries",
    "stage_text",
    "sync_folder",
    "write_text",
]

# A temporary file untouched for this long belongs to a write that died: a live one writes
# (and so touches its file) at least once a tensor, and renames it within seconds after.
STALE_TEMPORARY_SECONDS = 15 * 60

# The temporary files of this process not yet renamed into place or removed.
_UNFINISHED: set[str] = set()


def open_temporary(final_path: str) -> tuple[str, int]:
    """A new file beside ``final_path``; mode 0o666 less the umask, like a plain open()."""
    folder, base = os.path.split(final_path)
    for _ in range(100):
        temp_path = os.path.join(folder, f".{base}.{secrets.token_hex(4)}.tmp")
        _UNFINISHED.add(temp_path)  # before it exists: no moment when it is not known
        try:
            return temp_path, os.open(temp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            _UNFINISHED.discard(temp_path)  # another writer's
            continue
        except OSError:
            _UNFINISHED.discard(temp_path)  # not created
            raise
    raise ModelIOError(f"cannot create a temporary file beside {final_path}")


def finish_file(handle: object, temp_path: str, final_path: str) -> None:
    """Flushes ``handle`` to disk and keeps the mode of the file it will replace."""
    handle.flush()  # type: ignore[attr-defined]
    os.fsync(handle.fileno())  # type: ignore[attr-defined]
    if os.path.exists(final_path):
        with contextlib.suppress(OSError):
            os.chmod(temp_path, os.stat(final_path).st_mode & 0o7777)


def discard(path: str) -> None:
    """Removes a temporary file if it is still there (it is gone once renamed)."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)
    _UNFINISHED.discard(path)


def discard_unfinished() -> None:
    """Removes every temporary file this process left unfinished (after an interrupt)."""
    for path in list(_UNFINISHED):
        with contextlib.suppress(OSError):
            discard(path)


def sync_folder(folder: str) -> None:
    """Makes the renames in ``folder`` durable, where the file system allows it.

    Best effort: some file systems refuse to sync a folder, and the renames are already
    done.
    """
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def remove_stale_temporaries(
    final_path: str, *, max_age_s: float = STALE_TEMPORARY_SECONDS
) -> int:
    """Removes temporary files of ``final_path`` left by killed writes; returns how many.

    Only regular files named as :func:`open_temporary` names them for this target and not
    modified for ``max_age_s`` are removed; errors are ignored (another process may be
    removing them too).
    """
    folder, base = os.path.split(final_path)
    pattern = re.compile(r"\." + re.escape(base) + r"\.[0-9a-f]{8}\.tmp")
    cutoff = time.time() - max_age_s
    removed = 0
    with os.scandir(folder) as entries:
        candidates = [e for e in entries if pattern.fullmatch(e.name)]
    for entry in candidates:
        with contextlib.suppress(OSError):
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(info.st_mode) and info.st_mtime < cutoff:
                os.remove(entry.path)
                removed += 1
    return removed


def check_output_path(path: str | os.PathLike[str]) -> str:
    """Fails early, before any work, when ``path`` cannot be written; returns it absolute.

    Raises:
        ModelIOError: its folder does not exist or cannot be written, or it is a folder.
    """
    output = os.path.abspath(os.fspath(path))
    folder = os.path.dirname(output)
    if not os.path.isdir(folder):
        raise ModelIOError(f"cannot write {output}: folder {folder} does not exist")
    if os.path.isdir(output):
        raise ModelIOError(f"cannot write {output}: it is a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        # Temporary files are created in the folder, so it must be writable.
        raise ModelIOError(f"cannot write {output}: folder {folder} is not writable")
    return output


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Writes a text file atomically (a temporary file beside it, then a rename).

    Raises:
        ModelIOError: the write fails.
    """
    temp_path = stage_text(path, text)
    put_in_place(temp_path, path)


def stage_text(path: str | os.PathLike[str], text: str) -> str:
    """Writes ``text`` to a temporary file beside ``path``, flushed; returns its path.

    Everything that can fail for want of space or rights happens here, so that
    :func:`put_in_place` is a rename only.

    Raises:
        ModelIOError: the write fails (no temporary file is left).
    """
    target = check_output_path(path)
    try:
        temp_path, fd = open_temporary(target)
    except OSError as error:
        raise ModelIOError(f"cannot write {target}: {error}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            finish_file(handle, temp_path, target)
    except OSError as error:
        discard(temp_path)
        raise ModelIOError(f"cannot write {target}: {error}") from None
    except BaseException:
        discard(temp_path)
        raise
    return temp_path


def put_in_place(temp_path: str, path: str | os.PathLike[str]) -> None:
    """Renames a file :func:`stage_text` wrote onto ``path``.

    Raises:
        ModelIOError: the rename fails (the temporary file is removed).
    """
    target = os.path.abspath(os.fspath(path))
    try:
        os.replace(temp_path, target)
    except OSError as error:
        raise ModelIOError(f"cannot write {target}: {error}") from None
    finally:
        discard(temp_path)
