"""``np.dot``, ``np.tensordot`` and ``np.einsum`` on tracers, lowered to ``matmul``."""

from __future__ import annotations

import math
import numbers
from typing import Any

from anekit.errors import ShapeError
from anekit.trace import primitives as P
from anekit.trace.einsum import einsum
from anekit.trace.lowering import (
    as_tracer,
    finish,
    result_dtype,
    unsupported,
)
from anekit.trace.source import user_location
from anekit.trace.tracer import Tracer


def dot(a: Any, b: Any, out: Any = None) -> Tracer:
    ctx = P.context_of((a, b))
    target = result_dtype([a, b], "np.dot")
    x, y = as_tracer(ctx, a, target), as_tracer(ctx, b, target)
    if x.ndim == 0 or y.ndim == 0:
        result = P.binary("mul", x, y, target, target)
    elif y.ndim <= 2:
        result = P.matmul(x, y)
    else:
        result = tensordot(x, y, axes=([x.ndim - 1], [y.ndim - 2]))
    return finish(result, out)


def tensordot(a: Any, b: Any, axes: Any = 2) -> Tracer:
    ctx = P.context_of((a, b))
    target = result_dtype([a, b], "np.tensordot")
    x, y = as_tracer(ctx, a, target), as_tracer(ctx, b, target)
    if isinstance(axes, numbers.Integral):
        count = int(axes)
        axes_a = list(range(x.ndim - count, x.ndim))
        axes_b = list(range(count))
    else:
        first, second = axes
        axes_a = [int(first)] if isinstance(first, numbers.Integral) else list(first)
        axes_b = [int(second)] if isinstance(second, numbers.Integral) else list(second)
    axes_a = [P.normalize_axis(axis, x.ndim, "np.tensordot") for axis in axes_a]
    axes_b = [P.normalize_axis(axis, y.ndim, "np.tensordot") for axis in axes_b]
    if len(axes_a) != len(axes_b) or any(
        x.shape[i] != y.shape[j] for i, j in zip(axes_a, axes_b, strict=True)
    ):
        raise ShapeError("tensordot: shape-mismatch for sum", location=user_location())
    free_a = [i for i in range(x.ndim) if i not in axes_a]
    free_b = [j for j in range(y.ndim) if j not in axes_b]
    contracted = math.prod(x.shape[i] for i in axes_a)
    left = P.reshape(
        P.transpose(x, free_a + axes_a), (math.prod(x.shape[i] for i in free_a), contracted)
    )
    right = P.reshape(
        P.transpose(y, axes_b + free_b), (contracted, math.prod(y.shape[j] for j in free_b))
    )
    product = P.matmul(left, right)
    return P.reshape(product, [x.shape[i] for i in free_a] + [y.shape[j] for j in free_b])


def einsum_function(
    subscripts: str, *operands: Any, out: Any = None, optimize: Any = False, **kwargs: Any
) -> Tracer:
    if (
        kwargs.pop("dtype", None) is not None
        or kwargs.pop("casting", "safe") != "safe"
        or kwargs.pop("order", "K") != "K"
    ):
        raise unsupported("np.einsum with dtype=, casting= or order=")
    if not isinstance(subscripts, str):
        raise unsupported("np.einsum in the interleaved (operand, sublist) form")
    ctx = P.context_of(operands)
    target = result_dtype(list(operands), "np.einsum")
    tracers = [as_tracer(ctx, operand, target) for operand in operands]
    return finish(einsum(subscripts, tracers), out)
