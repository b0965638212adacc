"""The two spellings of an option that a message names: the library's and the command line's.

Messages are written once, naming options as :func:`eyefold.optimize` takes them
(``input_shapes``, ``relaxed=True``, ``upgrade=False``); the command line prints them
through :func:`cli_spelling`, which names its flags instead. A library caller is never
told of a flag it cannot pass, nor a command-line user of a keyword.
"""

from __future__ import annotations

__all__ = ["CLI_FLAGS", "cli_spelling"]

# Library spelling -> command-line spelling, for every option a message may name.
CLI_FLAGS: dict[str, str] = {
    "input_shapes": "--input-shape",
    "relaxed=True": "--relaxed",
    "upgrade=False": "--no-upgrade",
}


def cli_spelling(message: str) -> str:
    """``message`` with each option named by its command-line flag."""
    for keyword, flag in CLI_FLAGS.items():
        message = message.replace(keyword, flag)
    return message
