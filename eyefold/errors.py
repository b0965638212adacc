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
    "PathClashError",
    "SizeLimitError",
    "UnknownRuleError",
    "UnsupportedDtypeError",
    "UpgradeError",
    "WholeModelNeeded",
    "WriteBackError",
    "error_text",
    "one_line",
]


def one_line(message: str) -> str:
    """The whole message on one line, whatever names a hostile file holds.

    Whitespace runs (line breaks too) become one space; other control characters are
    escaped. Messages from onnx, onnxruntime and the converters often continue after a
    line break (onnx's checker prints the offending node there), so every message eyefold
    passes on is flattened, never cut at its first line.
    """
    flat = " ".join(message.split())
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in flat)


def error_text(error: BaseException) -> str:
    """``error``'s message on one line, or its type's name when it has none."""
    return one_line(str(error)) or type(error).__name__


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


class PathClashError(EyefoldError):
    """Two paths of a run name one file: a usage error (exit 2), found before any work.

    A write there would destroy what the run reads or writes elsewhere.
    """


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
        after_steps: raised once the neighbourhood's steps ran, so its tensors exist and
            are worth collecting before the whole model is read; most reasons are found
            before anything is extracted.
    """

    def __init__(self, reason: str, *, after_steps: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.after_steps = after_steps


class WriteBackError(Exception):
    """A converted or rewritten body cannot be written back onto the model it came from."""
