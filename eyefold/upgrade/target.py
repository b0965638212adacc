"""Which opsets an upgrade may target, and the ir_version each one needs."""

from __future__ import annotations

import onnx

from eyefold.errors import UpgradeError

__all__ = ["check_target_opset", "min_ir_version"]


def check_target_opset(
    target_opset: object,
    *,
    lowest: int,
    error: type[Exception] = UpgradeError,
    what: str = "target opset",
) -> int:
    """``target_opset`` if it is an int between ``lowest`` and the newest opset onnx knows.

    Raises:
        error: naming the value (as ``what``) and the valid range.
    """
    newest = onnx.defs.onnx_opset_version()
    if isinstance(target_opset, bool) or not isinstance(target_opset, int):
        raise error(f"{what} must be an int, got {target_opset!r}")
    if not lowest <= target_opset <= newest:
        raise error(
            f"{what} {target_opset} is outside {lowest}..{newest}, the opsets onnx knows"
        )
    return target_opset


def min_ir_version(opset: int) -> int:
    """The lowest ir_version that may import the default domain at ``opset``."""
    return onnx.helper.find_min_ir_version_for([onnx.helper.make_opsetid("", opset)])
