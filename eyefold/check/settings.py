"""What the user asked of ``--check``: inputs, check shapes, tolerances, where to save.

Built once by the command line (or a library caller) and read by
:func:`eyefold.check.equivalence.check_equivalence`; the target runtime comes from the
pipeline's options, since the check runs the output where the run made it to run.
"""

from __future__ import annotations

import dataclasses

from eyefold.errors import EyefoldError

__all__ = ["CheckSettings", "parse_check_shape"]


@dataclasses.dataclass(frozen=True)
class CheckSettings:
    """How ``--check`` runs and compares the two models.

    Attributes:
        inputs_path: an ``.npz`` with one array per graph input (``--check-inputs``);
            None: random inputs.
        shapes: the shapes to check each named input at (``--check-shape``, repeatable:
            one check per shape); inputs not named get their symbolic dims sized.
        rtol: relative tolerance for floating outputs, instead of the default per type.
        atol: absolute tolerance for floating outputs, instead of the default per type.
        save_dir: folder to write each check's inputs and both models' outputs to, as
            ``.npz`` (``--check-save``); None: nothing is saved.
        target_runtime: the runtime the output is made to run on; the check runs it
            there when that runtime is installed.
    """

    inputs_path: str | None = None
    shapes: dict[str, list[list[int]]] = dataclasses.field(default_factory=dict)
    rtol: float | None = None
    atol: float | None = None
    save_dir: str | None = None
    target_runtime: str | None = None

    def __post_init__(self) -> None:
        if self.inputs_path is not None and self.shapes:
            raise EyefoldError("--check-shape and --check-inputs cannot be combined")
        for name, value in (("rtol", self.rtol), ("atol", self.atol)):
            if value is not None and not value >= 0:
                raise EyefoldError(f"check {name} must be a number >= 0, got {value!r}")


def parse_check_shape(text: str) -> tuple[str, list[int]]:
    """``NAME:D0,D1,...`` (non-negative integers) as (name, dims).

    Raises:
        EyefoldError: the text is not of that form.
    """
    name, colon, dims_text = text.rpartition(":")
    dims = [d.strip() for d in dims_text.split(",")] if dims_text.strip() else []
    if not colon or not name or not all(d.isdigit() for d in dims):
        raise EyefoldError(
            f"not a check shape: {text!r} (NAME:D0,D1,... with integer dims, e.g. x:1,3,5)"
        )
    return name, [int(d) for d in dims]
