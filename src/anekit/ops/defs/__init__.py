"""Simulator op implementations; importing this package registers them all."""

from anekit.ops.defs import (
    activation,
    control,
    elementwise,
    image,
    indexing,
    linear,
    misc,
    normalization,
    random,
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
    "random",
    "recurrent",
    "reduction",
    "tensor",
]
