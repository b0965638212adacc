"""Progress lines on stderr for long steps, which library code drives and people read."""

from __future__ import annotations

import sys
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """Progress lines on stderr, shown only when it is a terminal.

    Calling the object replaces the current progress line; :meth:`done` ends it.
    """

    def __init__(self, stream: TextIO | None = None, *, enabled: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self._open = False

    def __call__(self, message: str) -> None:
        """Shows ``message`` as the current progress line."""
        if self.enabled:
            self.stream.write(f"\r\x1b[K{message}")
            self.stream.flush()
            self._open = True

    def clear(self) -> None:
        """Erases the progress line (for steps too quick to be worth a line)."""
        if self.enabled and self._open:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._open = False

    def done(self, message: str | None = None) -> None:
        """Ends the progress line, with a last message if given."""
        if not self.enabled:
            return
        if message is not None:
            self(message)
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False
