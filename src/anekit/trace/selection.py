"""Selection on tracers: ``np.where``, ``np.clip``, ``np.take``, ``np.round`` and
the ``*_like`` constructors (which return NumPy constants: only the shape matters)."""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from anekit import dtypes
from anekit.errors import ShapeError
from anekit.trace import primitives as P
from anekit.trace.indexing import gather
from anekit.trace.lowering import (
    as_tracer,
    data_dependent,
    finish,
    result_dtype,
    static_axis,
    static_int,
    tracer_arg,
    unsupported,
)
from anekit.trace.source import user_location
from anekit.trace.tracer import Tracer


def where(condition: Any, x: Any = None, y: Any = None) -> Tracer:
    if x is None and y is None:
        raise data_dependent("np.where(condition) with one argument")
    if x is None or y is None:
        raise ShapeError(
            "either both or neither of x and y should be given", location=user_location()
        )
    ctx = P.context_of((condition, x, y))
    P.check_operand(condition, "np.where")
    target = result_dtype([x, y], "np.where")
    if isinstance(condition, Tracer):
        cond = P.cast(condition, dtypes.BOOL)
    else:
        cond = as_tracer(ctx, np.asarray(condition).astype(bool), dtypes.BOOL)
    shapes = [P.shape_of(value) for value in (condition, x, y)]
    shape = P.broadcast_shapes(*shapes, what="np.where")
    a = as_tracer(ctx, x, target)
    b = as_tracer(ctx, y, target)
    if P.broadcast_shapes(a.shape, b.shape, what="np.where") != shape:
        # MIL's select infers its shape from a and b only (coremltools 9.0), so the
        # condition's shape must already be covered by one of them.
        a = P.broadcast_to(a, shape)
    result = P.emit("select", [condition, x, y], cond=cond._var, a=a._var, b=b._var)
    return P.expect(result, target, shape)


def clip(
    a: Any,
    a_min: Any = None,
    a_max: Any = None,
    out: Any = None,
    *,
    min: Any = None,
    max: Any = None,
    **kwargs: Any,
) -> Tracer:
    low = a_min if a_min is not None else min
    high = a_max if a_max is not None else max
    if low is None and high is None:
        raise ShapeError("clip: one of max or min must be given", location=user_location())
    if kwargs:
        raise unsupported(f"np.clip with {', '.join(kwargs)}=")
    t = tracer_arg(a, "np.clip")
    target = result_dtype([v for v in (t, low, high) if v is not None], "np.clip")
    t = P.cast(t, target)
    if (
        dtypes.is_float(target)
        and isinstance(low, numbers.Real)
        and isinstance(high, numbers.Real)
        and low < high
    ):
        return finish(P.unary("clip", t, alpha=target.type(low), beta=target.type(high)), out)
    result = t
    if low is not None:
        result = P.binary("maximum", result, low, target, target)
    if high is not None:
        result = P.binary("minimum", result, high, target, target)
    return finish(result, out)


def take(a: Any, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise") -> Tracer:
    t = tracer_arg(a, "np.take")
    if mode != "raise":
        raise unsupported(f"np.take(mode={mode!r})")
    if axis is None:
        t = P.reshape(t, (t.size,))
        axis = 0
    axis = P.normalize_axis(static_axis(axis, "np.take"), t.ndim, "np.take")
    return finish(gather(t, indices, axis), out)


def round_(a: Any, decimals: int = 0, out: Any = None) -> Tracer:
    t = tracer_arg(a, "np.round")
    decimals = static_int(decimals, "np.round: decimals")
    if not dtypes.is_float(t.dtype):
        if decimals >= 0:
            return finish(P.copy(t), out)
        raise unsupported("np.round of integers with negative decimals")
    if decimals == 0:
        return finish(P.unary("round", t), out)
    # NumPy's own algorithm: scale, round half to even, unscale.
    scale = 10.0**decimals
    scaled = P.binary("mul", t, scale, t.dtype, t.dtype)
    return finish(P.binary("real_div", P.unary("round", scaled), scale, t.dtype, t.dtype), out)


def full_like(
    a: Any,
    fill_value: Any,
    dtype: Any = None,
    order: str = "K",
    subok: bool = True,
    shape: Any = None,
) -> np.ndarray:
    """A constant: the result depends only on the static shape of ``a``."""
    t = tracer_arg(a, "np.full_like")
    if isinstance(fill_value, Tracer):
        raise unsupported("np.full_like with a traced fill value (use np.broadcast_to)")
    target = np.dtype(dtype) if dtype is not None else t.dtype
    return np.full(t.shape if shape is None else shape, fill_value, dtype=target)


def constant_like(fill: int) -> Callable[..., np.ndarray]:
    def like(
        a: Any, dtype: Any = None, order: str = "K", subok: bool = True, shape: Any = None
    ) -> np.ndarray:
        return full_like(a, fill, dtype=dtype, shape=shape)

    return like
