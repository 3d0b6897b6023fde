"""Simulator op implementations; importing this package registers them all."""

from anekit.sim.ops import (
    activation,
    control,
    elementwise,
    image,
    indexing,
    linear,
    misc,
    normalization,
    recurrent,
    reduction,
    tensor,
)

__all__ = [
    "activation",
    "control",
    "elementwise",
    "image",
    "indexing",
    "linear",
    "misc",
    "normalization",
    "recurrent",
    "reduction",
    "tensor",
]
