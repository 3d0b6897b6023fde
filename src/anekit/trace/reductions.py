"""Reductions on tracers (``np.sum``, ``np.mean``, ``np.var``, ``np.argmax``, ...).

Result dtypes come from NumPy on probe arrays (``sum`` of int32 is int64 there,
so int32 here); the input is cast to it before the MIL ``reduce_*`` op.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from anekit import dtypes
from anekit.trace import primitives as P
from anekit.trace.lowering import (
    NO_VALUE,
    finish,
    probe_dtype,
    static_axis,
    tracer_arg,
    unsupported,
)
from anekit.trace.tracer import Tracer


def _reduction(
    op_type: str,
    numpy_func: Callable[..., Any],
    what: str,
    /,
    a: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    keepdims: bool = False,
    **extra: Any,
) -> Tracer:
    """A MIL ``reduce_*`` with NumPy's signature (``np.sum``'s) after the bound arguments."""
    for key, value in extra.items():
        if key == "initial" and value is not NO_VALUE:
            raise unsupported(f"{what}(..., initial=...)")
        if key == "where" and value is not True:
            raise unsupported(f"{what}(..., where=...)")
    t = tracer_arg(a, what)
    axes = P.normalize_axes(static_axis(axis, what), t.ndim, what)
    result_dtype = probe_dtype(numpy_func, t, what, dtype)
    compute = result_dtype if result_dtype != dtypes.BOOL else t.dtype
    source = P.cast(t, compute)
    result = P.reduce(op_type, source, axes, keepdims)
    return finish(P.cast(result, result_dtype), out)


sum_: partial[Tracer] = partial(_reduction, "reduce_sum", np.sum, "np.sum")
mean: partial[Tracer] = partial(_reduction, "reduce_mean", np.mean, "np.mean")
prod: partial[Tracer] = partial(_reduction, "reduce_prod", np.prod, "np.prod")


def max_(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, **extra: Any) -> Tracer:
    return _reduction("reduce_max", np.max, "np.max", a, axis, None, out, keepdims, **extra)


def min_(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, **extra: Any) -> Tracer:
    return _reduction("reduce_min", np.min, "np.min", a, axis, None, out, keepdims, **extra)


def _logical_reduction(
    op_type: str, a: Any, axis: Any, out: Any, keepdims: bool, what: str, extra: dict[str, Any]
) -> Tracer:
    if extra.get("where", True) is not True:
        raise unsupported(f"{what}(..., where=...)")
    t = tracer_arg(a, what)
    axes = P.normalize_axes(static_axis(axis, what), t.ndim, what)
    as_int = P.cast(P.cast(t, dtypes.BOOL), dtypes.INT32)
    result = P.reduce(op_type, as_int, axes, keepdims)
    return finish(P.cast(result, dtypes.BOOL), out)


def any_(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, **extra: Any) -> Tracer:
    return _logical_reduction("reduce_max", a, axis, out, keepdims, "np.any", extra)


def all_(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, **extra: Any) -> Tracer:
    return _logical_reduction("reduce_min", a, axis, out, keepdims, "np.all", extra)


def _arg_reduction(op_type: str, a: Any, axis: Any, out: Any, keepdims: bool, what: str) -> Tracer:
    t = tracer_arg(a, what)
    if axis is None:
        flat = P.reshape(t, (t.size,))
        result = P.emit(op_type, [flat], x=flat._var, axis=0, keep_dims=False)
        if keepdims:
            result = P.reshape(result, (1,) * t.ndim)
    else:
        axis_index = P.normalize_axis(static_axis(axis, what), t.ndim, what)
        result = P.emit(op_type, [t], x=t._var, axis=axis_index, keep_dims=bool(keepdims))
    return finish(P.expect(result, dtypes.INT32), out)


def argmax(a: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False) -> Tracer:
    return _arg_reduction("reduce_argmax", a, axis, out, keepdims, "np.argmax")


def argmin(a: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False) -> Tracer:
    return _arg_reduction("reduce_argmin", a, axis, out, keepdims, "np.argmin")


def var(
    a: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    ddof: float = 0,
    keepdims: bool = False,
    **extra: Any,
) -> Tracer:
    if extra.get("where", True) is not True or extra.get("mean", NO_VALUE) is not NO_VALUE:
        raise unsupported("np.var with where= or mean=")
    if extra.get("correction", NO_VALUE) is not NO_VALUE:
        ddof = extra["correction"]
    t = tracer_arg(a, "np.var")
    axes = P.normalize_axes(static_axis(axis, "np.var"), t.ndim, "np.var")
    result_dtype = probe_dtype(np.var, t, "np.var", dtype)
    x = P.cast(t, result_dtype)
    centred = P.binary("sub", x, P.reduce("reduce_mean", x, axes, True), result_dtype, result_dtype)
    squares = P.binary("mul", centred, centred, result_dtype, result_dtype)
    count = math.prod(t.shape[i] for i in axes)
    total = P.reduce("reduce_sum", squares, axes, keepdims)
    divisor = max(count - ddof, 0)
    result = P.binary("real_div", total, float(divisor), result_dtype, result_dtype)
    return finish(result, out)


def std(
    a: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    ddof: float = 0,
    keepdims: bool = False,
    **extra: Any,
) -> Tracer:
    variance = var(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims, **extra)
    return finish(P.unary("sqrt", variance), out)


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Tracer:
    """``np.linalg.norm`` for the norms MIL can spell: the 2-norm (vector, or Frobenius
    over two axes or all of them) as ``sqrt(sum(x * x))``, and the vector 1- and
    inf-norms. ``fp16_safe_norm`` makes the 2-norm's squares safe in fp16."""
    what = "np.linalg.norm"
    t = tracer_arg(x, what)
    axis = static_axis(axis, what)
    axes = P.normalize_axes(axis, t.ndim, what)
    vector = len(axes) == 1 and (axis is not None or t.ndim == 1)
    two_norm = ord is None or (ord == 2 and vector) or (ord == "fro" and len(axes) == 2)
    if not two_norm and not (vector and ord in (1, np.inf, -np.inf)):
        shape = "vector" if vector else f"{len(axes)}-axis"
        raise unsupported(f"{what} with ord={ord!r} for a {shape} norm")
    result_dtype = probe_dtype(np.linalg.norm, t, what)
    t = P.cast(t, result_dtype)
    if two_norm:
        squares = P.binary("mul", t, t, result_dtype, result_dtype)
        return P.unary("sqrt", P.reduce("reduce_sum", squares, axes, keepdims))
    magnitude = P.unary("abs", t)
    op_type = {1: "reduce_sum", np.inf: "reduce_max", -np.inf: "reduce_min"}[ord]
    return P.reduce(op_type, magnitude, axes, keepdims)


def cumsum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Tracer:
    t = tracer_arg(a, "np.cumsum")
    result_dtype = probe_dtype(np.cumsum, t, "np.cumsum", dtype)
    t = P.cast(t, result_dtype)
    if axis is None:
        t = P.reshape(t, (t.size,))
        axis = 0
    axis = P.normalize_axis(static_axis(axis, "np.cumsum"), t.ndim, "np.cumsum")
    result = P.emit("cumsum", [t], x=t._var, axis=axis, exclusive=False, reverse=False)
    return finish(result, out)
