"""The math of MIL's composite ops, written once against an array space.

A :class:`Space` is an array namespace: NumPy arrays computed now
(:class:`~anekit.ops.spaces.NumpySpace`: the interpreter, and the reference path of
:mod:`anekit.nn`) or ONNX graph values (:class:`~anekit.ops.spaces.GraphSpace`: the
simulator's compiled engine and its kernels). ``store`` is where the ANE keeps an
intermediate: rounded to fp16 in ``ane`` numerics, unchanged otherwise; the ``sum``
inside a composite accumulates in fp32 (ane-knowledge.md §2.1 rule 1). Nothing else
differs between the spaces, so the interpreter, the compiled engine and the kernels
compute the same values.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

#: GELU's constants (Hendrycks and Gimpel; MIL ``gelu`` modes).
SQRT_HALF = math.sqrt(0.5)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
TANH_CUBIC = 0.044715
SIGMOID_SCALE = 1.702
GELU_MODES = ("EXACT", "TANH_APPROXIMATION", "SIGMOID_APPROXIMATION")


class Space(Protocol):
    """The operations the composites use; values are whatever the space holds."""

    def store(self, x: Any) -> Any:
        """``x`` as the ANE stores an intermediate (fp16 in ``ane`` numerics)."""
        ...

    def const(self, value: float) -> Any:
        """A float scalar."""
        ...

    def add(self, x: Any, y: Any) -> Any: ...
    def sub(self, x: Any, y: Any) -> Any: ...
    def mul(self, x: Any, y: Any) -> Any: ...
    def div(self, x: Any, y: Any) -> Any: ...
    def exp(self, x: Any) -> Any: ...
    def erf(self, x: Any) -> Any: ...
    def tanh(self, x: Any) -> Any: ...
    def sigmoid(self, x: Any) -> Any: ...
    def sqrt(self, x: Any) -> Any: ...

    def max(self, x: Any, axes: tuple[int, ...]) -> Any:
        """The maximum over ``axes``, kept as size-1 axes."""
        ...

    def sum(self, x: Any, axes: tuple[int, ...]) -> Any:
        """The sum over ``axes`` (kept), accumulated in fp32."""
        ...

    def pair_sums(self, x: Any) -> Any:
        """Neighbours in each row added in fp32: (rows, n) -> (rows, n/2), n even."""
        ...

    def pad_last(self, x: Any) -> Any:
        """One zero appended to each row: (rows, n) -> (rows, n + 1)."""
        ...


def softmax(space: Space, x: Any, axis: int) -> Any:
    """MIL ``softmax`` along ``axis``: the maximum subtracted, exp, the sum, divided; every
    intermediate stored (so a row of -inf scores gives NaN, as on the ANE)."""
    shifted = space.store(space.sub(x, space.max(x, (axis,))))
    exps = space.store(space.exp(shifted))
    total = space.store(space.sum(exps, (axis,)))
    return space.div(exps, total)


def gelu(space: Space, x: Any, mode: str = "EXACT") -> Any:
    """MIL ``gelu``: ``EXACT`` x·Φ(x), ``TANH_APPROXIMATION`` or ``SIGMOID_APPROXIMATION``;
    computed in fp32 and stored once (its intermediates are not)."""
    if mode == "EXACT":
        inner = space.add(space.erf(space.mul(x, space.const(SQRT_HALF))), space.const(1.0))
    elif mode == "TANH_APPROXIMATION":
        cubic = space.add(space.mul(space.mul(x, x), space.const(TANH_CUBIC)), space.const(1.0))
        scaled = space.mul(space.mul(cubic, x), space.const(SQRT_2_OVER_PI))
        inner = space.add(space.tanh(scaled), space.const(1.0))
    elif mode == "SIGMOID_APPROXIMATION":
        return space.mul(x, space.sigmoid(space.mul(x, space.const(SIGMOID_SCALE))))
    else:
        raise ValueError(f"gelu: unknown mode {mode!r}; MIL's are {', '.join(GELU_MODES)}")
    return space.mul(space.mul(inner, x), space.const(0.5))


def normalize(
    space: Space, x: Any, axes: tuple[int, ...], count: int, epsilon: float
) -> tuple[Any, Any]:
    """``(x - mean) / sqrt(variance + epsilon)`` over ``axes`` (``count`` elements) and the
    variance, every intermediate stored: in fp16 the variance overflows when a squared
    deviation, or their sum, exceeds 65504 (what layer_norm, instance_norm and
    ``anekit.passes``' fp16-safe norms are about)."""
    size = space.const(float(count))
    mean = space.store(space.div(space.store(space.sum(x, axes)), size))
    centred = space.store(space.sub(x, mean))
    squares = space.store(space.mul(centred, centred))
    variance = space.store(space.div(space.store(space.sum(squares, axes)), size))
    scale = space.store(space.sqrt(space.store(space.add(variance, space.const(epsilon)))))
    return space.store(space.div(centred, scale)), variance


def affine(space: Space, x: Any, gamma: Any = None, beta: Any = None) -> Any:
    """``x * gamma + beta`` after a normalization (the product stored)."""
    if gamma is not None:
        x = space.store(space.mul(x, gamma))
    if beta is not None:
        x = space.add(x, beta)
    return x


def pairwise_sum(space: Space, x: Any, count: int) -> Any:
    """The sum of each row of ``x`` (rows, ``count``), as (rows, 1), with every partial sum
    stored, neighbours combined pairwise: how an fp16 reduction accumulates."""
    level, size = space.store(x), count
    while size > 1:
        if size % 2:
            level, size = space.pad_last(level), size + 1
        level, size = space.store(space.pair_sums(level)), size // 2
    return level


__all__ = ["GELU_MODES", "Space", "affine", "gelu", "normalize", "pairwise_sum", "softmax"]
