"""Errors eyefold raises for problems a user can fix, and its two internal signals.

Every :class:`EyefoldError` is printed by the CLI as one ``eyefold: error: ...`` line with
exit code 1. Anything else escaping the library is a bug in eyefold, not in the model.

Two types never escape it: :class:`WholeModelNeeded` (the file path hands the model to
the whole-model path, which gives the result or the precise error), of one of the few
kinds :class:`FallbackKind` names, and :class:`WriteBackError` (a converted or rewritten body
cannot be written back in place, which sends the model down the same whole-model path).
"""

from __future__ import annotations

import enum

__all__ = [
    "CheckFailedError",
    "EyefoldError",
    "FallbackKind",
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


class FallbackKind(enum.Enum):
    """Why the file path hands a model to the whole-model path, as it matters to the user.

    Each :class:`WholeModelNeeded` is of one kind; its reason names the case in words.
    None is an error: the whole-model path gives the result, or the precise error.

    - ``OUT_OF_REACH``: what the passes act on lies where the neighbourhood cannot reach:
      an EyeLike or an identity-shaped constant in a subgraph, an EyeLike in a model-local
      function (or a function holding subgraphs), a node holding subgraphs among the nodes
      the passes change, a Mul mask whose data side the diagonal rules read.
    - ``INDIVISIBLE_GRAPH``: the main graph, valid ONNX or not, is not one the file path
      takes apart as it is: a name defined twice, or read but never defined; an
      initializer that is also a graph input; sparse initializers (whether an upgrade on
      the proto or the scan meets them first); a neighbourhood onnx-ir cannot read.
    - ``WHOLE_MODEL_OPTION``: an option works on the whole model (pinned input shapes).
    - ``UPGRADE``: the opset upgrade on the proto cannot do what the onnx-ir upgrade does
      (an EyeLike in a scope older than opset 9, a conversion onnx's checker refuses or
      the write-back cannot place), which then runs instead.
    - ``WRITE_BACK``: the neighbourhood's result cannot be written back into the proto (it
      would not be in order, a name a pass made up is taken, or its new tensors pass
      :data:`eyefold.proto_path.SPLICED_TENSOR_LIMIT_BYTES`, the most the file path adds
      to a model). The only kind found after the neighbourhood's steps ran, when its
      objects are worth collecting.
    """

    OUT_OF_REACH = "out of reach"
    INDIVISIBLE_GRAPH = "indivisible graph"
    WHOLE_MODEL_OPTION = "whole-model option"
    UPGRADE = "upgrade"
    WRITE_BACK = "write-back"


class WholeModelNeeded(Exception):  # noqa: N818  (a signal, not an error)
    """The file path cannot stand for the whole model here; the whole-model path runs.

    Attributes:
        kind: which of the few ways out it is (the report never says it: its steps name
            the reason).
        reason: why, in words (the report's ``whole_model`` key and step name say it).
    """

    def __init__(self, kind: FallbackKind, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


class WriteBackError(Exception):
    """A converted or rewritten body cannot be written back onto the model it came from."""
