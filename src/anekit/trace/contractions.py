"""``np.dot``, ``np.tensordot`` and ``np.einsum`` on tracers, lowered to ``matmul``."""

from __future__ import annotations

import math
import numbers
from typing import Any

from anekit.errors import ShapeError
from anekit.trace import primitives as P
from anekit.trace.einsum import einsum
from anekit.trace.lowering import finish, promoted, unsupported
from anekit.trace.source import user_location
from anekit.trace.tracer import Tracer


def dot(a: Any, b: Any, out: Any = None) -> Tracer:
    x, y = promoted((a, b), "np.dot")
    if x.ndim == 0 or y.ndim == 0:
        result = P.binary("mul", x, y, x.dtype, x.dtype)
    elif y.ndim <= 2:
        result = P.matmul(x, y)
    else:
        result = tensordot(x, y, axes=([x.ndim - 1], [y.ndim - 2]))
    return finish(result, out)


def tensordot(a: Any, b: Any, axes: Any = 2) -> Tracer:
    x, y = promoted((a, b), "np.tensordot")
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
    rows = math.prod(x.shape[i] for i in free_a)
    contracted = math.prod(x.shape[i] for i in axes_a)
    cols = math.prod(y.shape[j] for j in free_b)
    left = P.reshape(P.transpose(x, free_a + axes_a), (rows, contracted))
    right = P.reshape(P.transpose(y, axes_b + free_b), (contracted, cols))
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
    return finish(einsum(subscripts, promoted(operands, "np.einsum")), out)
