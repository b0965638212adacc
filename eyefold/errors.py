"""Errors eyefold raises for problems a user can fix, and its two internal signals.

Every :class:`EyefoldError` is printed by the CLI as one ``eyefold: error: ...`` line with
exit code 1. Anything else escaping the library is a bug in eyefold, not in the model.

Two types never escape it: :class:`WholeModelNeeded` (the file path hands the model to
the whole-model path, which gives the result or the precise error) and
:class:`WriteBackError` (a converted or rewritten body cannot be written back in place,
which sends the model down the same whole-model path).
"""

from __future__ import annotations

__all__ = [
    "CheckFailedError",
    "EyefoldError",
    "InvalidModelError",
    "ModelIOError",
    "SizeLimitError",
    "UnknownRuleError",
    "UnsupportedDtypeError",
    "UpgradeError",
    "WholeModelNeeded",
    "WriteBackError",
]


class EyefoldError(Exception):
    """Base class of the errors caused by the input or the options, not by eyefold."""


class InvalidModelError(EyefoldError):
    """The model breaks the ONNX spec in a way eyefold cannot work around."""


class UnsupportedDtypeError(InvalidModelError):
    """A data type EyeLike does not allow (or the kernel cannot produce)."""


class SizeLimitError(EyefoldError):
    """A tensor is larger than the limit it was checked against."""


class ModelIOError(EyefoldError):
    """A model file cannot be read or written."""


class UpgradeError(EyefoldError):
    """The opset upgrade failed or produced an invalid model."""


class CheckFailedError(EyefoldError):
    """The optimized model does not reproduce the original's outputs."""


class UnknownRuleError(EyefoldError):
    """A rule name that is not in the registry, or a relaxed rule without opting in."""


class WholeModelNeeded(Exception):  # noqa: N818  (a signal, not an error)
    """The file path cannot stand for the whole model here; the whole-model path runs.

    Attributes:
        reason: why, in words (the report's ``whole_model`` key and step name say it).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class WriteBackError(Exception):
    """A converted or rewritten body cannot be written back onto the model it came from."""
