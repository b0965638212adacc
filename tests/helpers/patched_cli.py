"""``python tests/helpers/patched_cli.py ARGS...``: ``eyefold ARGS...``, file operations
steered.

Real processes, real files, real renames; only the timing (or the fate) of one kind of
call is forced, so a test can reproduce an unlucky moment on demand. Set by environment:

* ``PATCHED_FAIL_FSYNC=NAME``: ``os.fsync`` of a file whose name contains NAME fails
  with ``ENOSPC``, as on a full disk (a temporary file is flushed just before its rename).
* ``PATCHED_SCHEDULE="A1 B1 B2 A2"``, ``PATCHED_ROLE=A``, ``PATCHED_BARRIER=DIR``:
  ``os.replace`` calls of concurrent processes run in this order. Token ``A2`` is the
  second ``os.replace`` of the process whose role is ``A``. Every process first waits at
  its first ``os.replace`` until all roles are there; a call waits until the calls before
  it in the schedule have run, or their process has exited. Calls not in the schedule run
  at once. A wait gives up after ``WAIT_S``, so a broken run fails instead of hanging.
"""

from __future__ import annotations

import errno
import os
import pathlib
import sys
import time

WAIT_S = 60.0


def _fail_fsync(name: str) -> None:
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if name in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    os.fsync = fsync


def _wait(ready: callable) -> None:  # type: ignore[valid-type]
    deadline = time.monotonic() + WAIT_S
    while not ready() and time.monotonic() < deadline:
        time.sleep(0.01)


def _schedule_replace(schedule: list[str], role: str, barrier: pathlib.Path) -> None:
    real_replace = os.replace
    roles = sorted({token[0] for token in schedule})
    calls = 0

    def settled(token: str) -> bool:
        return (barrier / token).exists() or (barrier / f"exit-{token[0]}").exists()

    def replace(src, dst, *args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        token = f"{role}{calls}"
        if calls == 1:
            (barrier / f"arrived-{role}").touch()
            _wait(
                lambda: all(
                    settled(f"{r}1") or (barrier / f"arrived-{r}").exists() for r in roles
                )
            )
        if token in schedule:
            before = schedule[: schedule.index(token)]
            _wait(lambda: all(settled(t) for t in before))
        try:
            return real_replace(src, dst, *args, **kwargs)
        finally:
            (barrier / token).touch()

    os.replace = replace


def main() -> int:
    if name := os.environ.get("PATCHED_FAIL_FSYNC"):
        _fail_fsync(name)
    role = os.environ.get("PATCHED_ROLE", "")
    barrier = pathlib.Path(os.environ.get("PATCHED_BARRIER", "."))
    if schedule := os.environ.get("PATCHED_SCHEDULE", "").split():
        _schedule_replace(schedule, role, barrier)
    from eyefold.cli.main import main as eyefold_main

    try:
        return eyefold_main(sys.argv[1:])
    finally:
        if schedule:
            (barrier / f"exit-{role}").touch()


if __name__ == "__main__":
    sys.exit(main())
