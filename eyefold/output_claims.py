"""Which input a batch output belongs to, claimed beside it so no other batch overwrites it.

Within one batch, :func:`eyefold.batch.plan_files` refuses two inputs with one output. The
shards of a zoo run by separate processes (a Slurm array, Dask or Ray workers) cannot see
each other's plans, and the onnx backend data alone has a hundred files named
``model.onnx``. So before a batch writes OUTPUT it claims it: the hidden file
``.<name>.eyefold-source`` beside OUTPUT holds the input's resolved path, and is created
atomically (a hard link that fails if the name exists; ``O_EXCL`` where the file system has
no hard links). A claim naming another input fails the later model alone; a claim naming
the same input is taken again, so a re-run writes where it wrote before. Claims stay after
the run: they are how the next shard, or the next run, knows whose output a file is.
"""

from __future__ import annotations

import errno
import os
import time

from eyefold.errors import ModelIOError
from eyefold.model_files.atomic_write import discard, open_temporary

__all__ = ["CLAIM_SUFFIX", "claim_output", "claim_path", "release_claim"]

CLAIM_SUFFIX = ".eyefold-source"

# A claim made with O_EXCL is empty for the moment between its creation and its write.
_EMPTY_CLAIM_RETRIES = 20
_EMPTY_CLAIM_WAIT_S = 0.05


def claim_path(output: str) -> str:
    """The claim file of ``output``: hidden, beside it."""
    folder, name = os.path.split(os.path.abspath(output))
    return os.path.join(folder, f".{name}{CLAIM_SUFFIX}")


def claim_output(output: str, source: str) -> None:
    """Claims ``output`` for the model file ``source`` (again, if it already holds it).

    Raises:
        ModelIOError: another input holds the claim, or it cannot be made.
    """
    claim = claim_path(output)
    owner = os.path.realpath(source)
    try:
        _create(claim, owner + "\n")
    except FileExistsError:
        holder = _holder(claim)
        if holder != owner:
            raise ModelIOError(
                f"cannot write {output}: it is already the output of {holder} (recorded"
                f" in {claim}; remove both files to write it again)"
            ) from None
    except OSError as error:
        raise ModelIOError(f"cannot write {claim}: {error.strerror or error}") from None


def release_claim(output: str, source: str) -> None:
    """Gives up ``source``'s claim on ``output`` when the output was never written.

    A model that failed, was interrupted or lost its worker leaves the name free for
    another input; a claim naming another input, or on a written output, stays.
    """
    claim = claim_path(output)
    if not os.path.exists(output) and _text(claim) == os.path.realpath(source):
        discard(claim)


def _create(claim: str, text: str) -> None:
    """Creates ``claim`` holding ``text``, whole or not at all; FileExistsError if taken."""
    temp_path, fd = open_temporary(claim)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        try:
            os.link(temp_path, claim)
            return
        except OSError as error:
            if error.errno == errno.EEXIST:
                raise
    finally:
        discard(temp_path)
    # No hard links here (some network and FUSE file systems): O_EXCL, then the text.
    fd = os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def _text(claim: str) -> str:
    """The input path a claim holds; empty when it is empty or gone."""
    try:
        with open(claim, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def _holder(claim: str) -> str:
    """The input an existing claim names (waiting out one being written)."""
    for _ in range(_EMPTY_CLAIM_RETRIES):
        if text := _text(claim):
            return text
        time.sleep(_EMPTY_CLAIM_WAIT_S)
    return "another input (its claim is empty)"
