"""How the command line prints log records: ``eyefold: warning: ...``, like its other lines.

Only the command line installs this (on the root logger, as ``logging.basicConfig`` did);
the library's loggers stay as they are, for a caller's own logging configuration.
"""

from __future__ import annotations

import logging

__all__ = ["CliFormatter", "configure_logging"]


class CliFormatter(logging.Formatter):
    """``eyefold: warning: message``; a record of another package names its logger too."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one of eyefold's stderr lines (a traceback follows, if any)."""
        message = record.getMessage()
        if record.name != "eyefold" and not record.name.startswith("eyefold."):
            message = f"{record.name}: {message}"
        line = f"eyefold: {record.levelname.lower()}: {message}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure_logging(level: int) -> None:
    """Sends log records of ``level`` and above to stderr in :class:`CliFormatter` lines."""
    handler = logging.StreamHandler()
    handler.setFormatter(CliFormatter())
    logging.basicConfig(level=level, handlers=[handler])
