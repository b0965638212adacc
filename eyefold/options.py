"""``PipelineOptions``: every option of an eyefold run, defined and validated in one place.

The command line builds one from its arguments, ``eyefold.optimize`` from its keywords, and
``eyefold.passes.default_pipeline`` takes one; the pipeline's steps are derived from it
(:func:`eyefold.pipeline.pipeline_steps`), so no option is interpreted twice.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TypeAlias

from eyefold.core.limits import DEFAULT_SIZE_LIMIT_BYTES
from eyefold.errors import EyefoldError
from eyefold.runtime.installed import SUPPORTED_RUNTIMES

if TYPE_CHECKING:
    from eyefold.core.input_shapes import InputShape
    from eyefold.upgrade.target import UpgradeTarget

__all__ = [
    "DEFAULT_SIZE_LIMIT_BYTES",
    "DEFAULT_TARGET_OPSET",
    "LOWERED_RUNTIMES",
    "TARGET_RUNTIMES",
    "InputShapesArg",
    "PipelineOptions",
]

DEFAULT_TARGET_OPSET = 22
# Target runtimes whose EyeLike nodes are lowered (LowerEyeLikePass) rather than legalized:
# TensorRT's parser takes EyeLike only with static input dims, and folding has already
# turned those into constants.
LOWERED_RUNTIMES = ("tensorrt",)
# Every runtime ``target_runtime`` accepts, in the order the command line lists them.
TARGET_RUNTIMES = (*SUPPORTED_RUNTIMES, *LOWERED_RUNTIMES)

# What ``input_shapes`` accepts: {"x": [1, 3, "n"]}, ["x:1,3,n"], or InputShape objects.
InputShapesArg: TypeAlias = "Mapping[str, Sequence[int | str]] | Sequence[InputShape | str]"


def _input_shapes(value: InputShapesArg | None) -> tuple[InputShape, ...]:
    from eyefold.core.input_shapes import (
        InputShape,
        InputShapeError,
        input_shape_from,
        parse_input_shape,
    )

    if value is None:
        return ()
    if isinstance(value, str):
        raise EyefoldError("input_shapes must be a mapping or a sequence, not a string")
    if isinstance(value, Mapping):
        return tuple(input_shape_from(name, dims) for name, dims in value.items())
    shapes = []
    for item in value:
        if isinstance(item, InputShape):
            shapes.append(input_shape_from(item.name, item.dims))
        elif isinstance(item, str):
            shapes.append(parse_input_shape(item))
        else:
            raise InputShapeError(
                f"input_shapes: expected 'NAME:D0,D1,...' strings or InputShape, got {item!r}"
            )
    return tuple(shapes)


@dataclasses.dataclass(frozen=True)
class PipelineOptions:
    """What one eyefold run does; validated when built.

    Attributes:
        target_opset: default-domain opset to upgrade to (raised, never lowered; with
            ``target_runtime="onnxruntime"``, capped to what the installed release loads).
        upgrade: whether to upgrade the opset.
        fold: whether to fold static EyeLike nodes into constants.
        size_limit: largest folded output, in bytes.
        input_shapes: graph input shapes to pin before anything else, e.g.
            ``{"x": [1, 3, "n"]}`` or ``["x:1,3,n"]`` (stored as ``InputShape`` tuples).
        target_runtime: ``"onnxruntime"``, ``"openvino"``, ``"tract"`` or ``"tvm"``:
            rewrite the EyeLike nodes left that this runtime cannot run into a form it
            runs (None: leave them, and only say which would not run on onnxruntime);
            ``"tensorrt"`` lowers every EyeLike left into primitive ops (its parser needs
            static input dims).
        lower_eyelike: lower every EyeLike left after folding into primitive ops
            (Range, Equal, Cast...), whatever the target runtime.
        rules: rewrite rules to run, by name; None runs every exact rule (and the relaxed
            ones with ``relaxed``), an empty sequence none.
        relaxed: also allow rules exact only up to IEEE special values (inf, NaN, -0.0).

    Raises:
        EyefoldError: an option out of range; ``UnknownRuleError`` for a rule name that
            is unknown, or relaxed without ``relaxed``; ``InputShapeError`` for a
            malformed input shape.
    """

    target_opset: int = DEFAULT_TARGET_OPSET
    upgrade: bool = True
    fold: bool = True
    size_limit: int = DEFAULT_SIZE_LIMIT_BYTES
    input_shapes: tuple[InputShape, ...] = ()
    target_runtime: str | None = None
    rules: tuple[str, ...] | None = None
    relaxed: bool = False
    lower_eyelike: bool = False

    @functools.cached_property
    def upgrade_target(self) -> UpgradeTarget:
        """The opset the upgrade raises to.

        ``target_opset``, capped with ``target_runtime="onnxruntime"`` to what the
        installed release loads.
        """
        from eyefold.upgrade.target import upgrade_target

        runtime = self.target_runtime
        if runtime != "onnxruntime":  # the only runtime whose limits are known by version
            return upgrade_target(self.target_opset, runtime, None)
        from eyefold.runtime.installed import installed_version

        return upgrade_target(self.target_opset, runtime, installed_version(runtime))

    @property
    def lowers(self) -> bool:
        """Whether the run lowers the EyeLike nodes left (asked, or for TensorRT)."""
        return self.lower_eyelike or self.target_runtime in LOWERED_RUNTIMES

    def __post_init__(self) -> None:
        # Imported here, so that the command line reads the defaults above without
        # importing onnx-ir (``eyefold --help`` imports nothing heavy).
        from eyefold.core.eyelike_types import EYELIKE_MIN_OPSET
        from eyefold.rule_registry import select_rules
        from eyefold.upgrade.target import check_target_opset

        size = self.size_limit
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise EyefoldError(f"size_limit must be a non-negative int of bytes, got {size!r}")
        check_target_opset(
            self.target_opset,
            lowest=EYELIKE_MIN_OPSET,
            error=EyefoldError,
            what="target_opset",
        )
        runtime = self.target_runtime
        if runtime is not None and runtime not in TARGET_RUNTIMES:
            raise EyefoldError(
                f"unknown target runtime {runtime!r}; supported: {', '.join(TARGET_RUNTIMES)}"
            )
        object.__setattr__(self, "input_shapes", _input_shapes(self.input_shapes))
        if self.rules is not None:
            if isinstance(self.rules, str):
                raise EyefoldError("rules must be a sequence of rule names, not a string")
            object.__setattr__(self, "rules", tuple(self.rules))
        select_rules(self.rules, relaxed=self.relaxed)  # raises UnknownRuleError
