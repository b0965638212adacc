"""The command line as a user runs it: a fresh ``python -m eyefold`` process."""

from __future__ import annotations

import os
import subprocess
import sys


def run_eyefold(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``eyefold ARGS`` in a subprocess, without colour; never raises on its status."""
    return subprocess.run(
        [sys.executable, "-m", "eyefold", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "NO_COLOR": ""},
        check=False,
    )


def run_measured(args: list[str]) -> tuple[subprocess.CompletedProcess[str], int]:
    """Runs eyefold in a child process; returns it and the child's peak RSS in bytes.

    The peak is the child's ``VmHWM``, not its ``ru_maxrss``: Linux carries the RSS the
    forked pytest process had at ``exec`` into the child's ``ru_maxrss``, so late in a
    full run that would report pytest's own size.
    """
    code = (
        "import sys; from eyefold.cli import main; status = main(sys.argv[1:]);"
        " hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')];"
        " print('PEAK', hwm[0].split()[1], file=sys.stderr);"
        " sys.exit(status)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300
    )
    peak = [line for line in result.stderr.splitlines() if line.startswith("PEAK")]
    assert peak, result.stderr
    return result, int(peak[-1].split()[1]) * 1024
