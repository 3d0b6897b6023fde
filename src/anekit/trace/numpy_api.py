"""NumPy's API on tracers: the NEP-13 and NEP-18 entry points and the function table.

:data:`FUNCTIONS` maps each supported NumPy function to its implementation (same
signature as NumPy's); ufuncs are handled in :mod:`anekit.trace.ufuncs`. Result
dtypes come from NumPy itself, then are canonicalized (float64 → float32, int64 →
int32), so broadcasting, NEP 50 Python-scalar rules and promotion match NumPy. A
function missing from the table raises
:class:`~anekit.errors.UnsupportedFunctionError`, never a guess.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from anekit.trace import contractions, layout, reductions, selection, ufuncs
from anekit.trace import primitives as P
from anekit.trace.lowering import data_dependent, numpy_name, store_out, tracer_arg, unsupported
from anekit.trace.tracer import Tracer


def handle_function(
    func: Any, types: tuple[type, ...], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """NEP-18 entry point: run ``func``'s lowering rule."""
    if not all(issubclass(kind, Tracer | np.ndarray) for kind in types):
        return NotImplemented
    rule = FUNCTIONS.get(func)
    if rule is None:
        if func in DATA_DEPENDENT:
            raise data_dependent(numpy_name(func))
        raise unsupported(numpy_name(func))
    return rule(*args, **kwargs)


def handle_ufunc(
    ufunc: np.ufunc, method: str, inputs: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """NEP-13 entry point: operators and ufunc calls on tracers."""
    for value in inputs:
        if not isinstance(value, Tracer | np.ndarray | np.generic | numbers.Number | list | tuple):
            return NotImplemented
    out = kwargs.pop("out", None)
    if kwargs.pop("where", True) is not True:
        raise unsupported(f"np.{ufunc.__name__}(..., where=...)")
    dtype = kwargs.pop("dtype", None)
    for key in ("casting", "order", "subok", "signature"):
        kwargs.pop(key, None)
    if method == "__call__":
        if kwargs:
            raise unsupported(f"np.{ufunc.__name__} with {', '.join(kwargs)}=")
        result = ufuncs.call_ufunc(ufunc, inputs, dtype)
    elif method == "reduce":
        result = ufuncs.reduce_ufunc(ufunc, inputs[0], dtype=dtype, **kwargs)
    else:
        raise unsupported(f"np.{ufunc.__name__}.{method}")
    if out is not None:
        targets = out if isinstance(out, tuple) else (out,)
        if len(targets) != 1:
            raise unsupported(f"np.{ufunc.__name__} with several out= arrays")
        return store_out(targets[0], result)
    return result


def shape(a: Any) -> tuple[int, ...]:
    return tracer_arg(a, "np.shape").shape


def ndim(a: Any) -> int:
    return tracer_arg(a, "np.ndim").ndim


def size(a: Any, axis: Any = None) -> int:
    t = tracer_arg(a, "np.size")
    return t.size if axis is None else t.shape[P.normalize_axis(axis, t.ndim, "np.size")]


def result_type(*arrays_and_dtypes: Any) -> np.dtype[Any]:
    values = [item.dtype if isinstance(item, Tracer) else item for item in arrays_and_dtypes]
    return np.result_type(*values)


#: Functions whose result shape depends on values: refused with DynamicShapeError.
DATA_DEPENDENT: frozenset[Any] = frozenset(
    {np.nonzero, np.argwhere, np.flatnonzero, np.unique, np.extract, np.compress}
    | {
        getattr(np, name)
        for name in ("unique_values", "unique_counts", "unique_inverse", "unique_all")
        if hasattr(np, name)
    }
)

#: NumPy function -> implementation on tracers (same signature as NumPy's).
FUNCTIONS: dict[Any, Callable[..., Any]] = {
    np.astype: layout.astype,
    np.copy: layout.copy,
    np.reshape: layout.reshape,
    np.ravel: layout.ravel,
    np.transpose: layout.transpose,
    np.swapaxes: layout.swapaxes,
    np.moveaxis: layout.moveaxis,
    np.expand_dims: layout.expand_dims,
    np.squeeze: layout.squeeze,
    np.broadcast_to: layout.broadcast_to,
    np.concatenate: layout.concatenate,
    np.stack: layout.stack,
    np.hstack: layout.hstack,
    np.vstack: layout.vstack,
    np.atleast_1d: layout.atleast_1d,
    np.atleast_2d: layout.atleast_2d,
    np.split: layout.split,
    np.array_split: layout.array_split,
    np.flip: layout.flip,
    np.tile: layout.tile,
    np.pad: layout.pad,
    np.sum: reductions.sum_,
    np.mean: reductions.mean,
    np.prod: reductions.prod,
    np.max: reductions.max_,
    np.amax: reductions.max_,
    np.min: reductions.min_,
    np.amin: reductions.min_,
    np.any: reductions.any_,
    np.all: reductions.all_,
    np.argmax: reductions.argmax,
    np.argmin: reductions.argmin,
    np.var: reductions.var,
    np.std: reductions.std,
    np.linalg.norm: reductions.norm,
    np.cumsum: reductions.cumsum,
    np.where: selection.where,
    np.clip: selection.clip,
    np.take: selection.take,
    np.round: selection.round_,
    np.around: selection.round_,
    np.zeros_like: selection.constant_like(0),
    np.ones_like: selection.constant_like(1),
    np.empty_like: selection.constant_like(0),
    np.full_like: selection.full_like,
    np.dot: contractions.dot,
    np.tensordot: contractions.tensordot,
    np.einsum: contractions.einsum_function,
    np.shape: shape,
    np.ndim: ndim,
    np.size: size,
    np.result_type: result_type,
}
