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
