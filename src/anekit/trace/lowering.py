"""Shared helpers for the NumPy lowering rules: argument checks, constants as
tracers, NumPy's result dtypes, ``out=`` semantics and the standard errors."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from anekit.errors import (
    DynamicShapeError,
    InPlaceWriteError,
    ShapeError,
    TraceError,
    UnsupportedDtypeError,
    UnsupportedFunctionError,
)
from anekit.trace import primitives as P
from anekit.trace.source import user_location
from anekit.trace.tracer import Tracer

#: NumPy's "argument not given" sentinel, for keyword defaults such as ``initial=``.
NO_VALUE: Any = getattr(np, "_NoValue", None)


def numpy_name(func: Any) -> str:
    """``np.linalg.norm`` for ``numpy.linalg.norm``: how users write it."""
    module = getattr(func, "__module__", None) or "numpy"
    name = getattr(func, "__name__", repr(func))
    if module.startswith("numpy"):
        public = [part for part in module.split(".")[1:] if not part.startswith("_")]
        return ".".join(["np", *public, name])
    return f"{module}.{name}"


def unsupported(what: str) -> UnsupportedFunctionError:
    return UnsupportedFunctionError(
        f"{what} is not supported by anekit's tracer",
        location=user_location(),
        hint="see docs/tracing.md for what traces; compute it outside the traced "
        "function, or write it with supported operations",
    )


def data_dependent(what: str) -> DynamicShapeError:
    return DynamicShapeError(
        f"{what} on a traced array has a shape that depends on its values",
        location=user_location(),
        hint="ANE programs have static shapes: keep every element and mask the "
        "unwanted ones with np.where(mask, x, fill)",
    )


def store_out(target: Any, result: Tracer) -> Tracer:
    """NumPy's ``out=`` / in-place operator semantics on a traced array.

    Updating the Tracer object in place is exactly NumPy's behaviour for every
    reference to that object. Views are the exception: NumPy would update them too,
    so arrays that share memory with a view are refused.
    """
    if not isinstance(target, Tracer):
        raise InPlaceWriteError(
            "writing a traced result into a NumPy array (out= or an in-place operator)",
            location=user_location(),
            hint="assign the result to a new name instead",
        )
    P.context_of((target, result))
    if target._shared:
        raise InPlaceWriteError(
            "in-place update of an array that shares memory with a view (a slice, "
            "reshape, transpose, ...); NumPy would update the view too",
            location=user_location(),
            hint="write `x = x + y` instead of `x += y`, or take the view after the update",
        )
    shape = P.broadcast_shapes(result.shape, target.shape, what="in-place operation")
    if shape != target.shape:
        raise ShapeError(
            f"non-broadcastable output operand with shape {target.shape} doesn't match "
            f"the broadcast shape {shape}",
            location=user_location(),
        )
    result = P.broadcast_to(result, target.shape)
    if not np.can_cast(result.dtype, target.dtype, casting="same_kind"):
        raise UnsupportedDtypeError(
            f"cannot store a {result.dtype} result in a {target.dtype} array in place "
            "(NumPy's same_kind casting rule)",
            location=user_location(),
        )
    result = P.cast(result, target.dtype)
    target._var = result._var
    target._deps = result._deps
    return target


def as_tracer(ctx: Any, value: Any, dtype: np.dtype[Any]) -> Tracer:
    """``value`` as a traced array of ``dtype`` (constants become const ops)."""
    if isinstance(value, Tracer):
        return P.cast(value, dtype)
    return P.constant(ctx, value if isinstance(value, np.ndarray) else np.asarray(value), dtype)


def tracer_arg(value: Any, what: str) -> Tracer:
    """The array argument of a NumPy function, as a tracer of this trace."""
    P.check_operand(value, what)
    ctx = P.context_of([value])
    if isinstance(value, Tracer):
        return value
    array = np.asarray(value)
    return as_tracer(ctx, array, P.canonical(array.dtype, what))


def probe_dtype(func: Callable[..., Any], x: Tracer, what: str, dtype: Any = None) -> np.dtype[Any]:
    """The result dtype NumPy's ``func`` gives for ``x`` (and ``dtype=``), canonicalized."""
    kwargs = {"dtype": dtype} if dtype is not None else {}
    with np.errstate(all="ignore"):
        result = np.asarray(func(np.ones((1,), x.dtype), **kwargs)).dtype
    return P.canonical(result, what)


def finish(result: Tracer, out: Any) -> Tracer:
    return store_out(out, result) if out is not None else result


def static_int(value: Any, what: str) -> int:
    if isinstance(value, Tracer) or not isinstance(value, numbers.Integral):
        raise TraceError(
            f"{what} must be a static Python int, got {type(value).__name__}",
            location=user_location(),
            hint="shapes, axes and sizes are static; take them from x.shape",
        )
    return int(value)


def static_axis(axis: Any, what: str) -> Any:
    if isinstance(axis, Tracer):
        raise TraceError(
            f"{what}: axis must be static, got a traced array",
            location=user_location(),
            hint="axes are static; write them literally",
        )
    return axis


def result_dtype(values: Sequence[Any], what: str) -> np.dtype[Any]:
    for value in values:
        P.check_operand(value, what)
    given = [P.operand_dtype(value) for value in values]
    try:
        result = np.result_type(*[d if not isinstance(d, type) else d(0) for d in given])
    except TypeError as error:
        raise UnsupportedDtypeError(f"{what}: {error}", location=user_location()) from error
    return P.canonical(result, what)


def promoted(values: Sequence[Any], what: str) -> list[Tracer]:
    """``values`` as tracers of their common dtype (NumPy's ``result_type``)."""
    ctx = P.context_of(values)
    target = result_dtype(values, what)
    return [as_tracer(ctx, value, target) for value in values]
