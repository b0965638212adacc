"""Pin graph input shapes (``--input-shape``, ``input_shapes=``) as the first step."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

import onnx_ir as ir

from eyefold.core.input_shapes import InputShape, apply_input_shapes

__all__ = ["PinInputShapesPass", "PinInputShapesResult"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class PinInputShapesResult(ir.passes.PassResult):
    """The pass result, with the names of the inputs whose shape changed."""

    pinned: list[str] = dataclasses.field(default_factory=list)


class PinInputShapesPass(ir.passes.InPlacePass):
    """Sets the shapes of main-graph inputs before anything reads them.

    Pinning a symbolic dim to an integer lets every EyeLike whose shape follows from it
    fold. Mistakes (an unknown input, a wrong rank, a static dim that disagrees) raise
    ``InputShapeError``, which the command line reports as a usage error.

    Attributes:
        shapes: the shapes to pin, at most one per input.
    """

    def __init__(self, shapes: Sequence[InputShape]) -> None:
        super().__init__()
        self.shapes = tuple(shapes)

    def call(self, model: ir.Model) -> PinInputShapesResult:
        """Pins the shapes in place."""
        pinned = apply_input_shapes(model, self.shapes)
        logger.info("graph input shapes pinned: %s", pinned)
        return PinInputShapesResult(model, modified=bool(pinned), pinned=pinned)
