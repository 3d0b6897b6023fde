"""Small helpers shared by the op implementations."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from coremltools.converters.mil.mil.ops.defs._utils import solve_slice_by_index_slice

#: Arrays smaller than this run single-threaded: splitting costs more than it saves.
PARALLEL_MIN_SIZE = 1 << 17


def axes_of(axes: Any, ndim: int) -> tuple[int, ...]:
    """MIL ``axes`` (None means all) as sorted non-negative ints."""
    if axes is None:
        return tuple(range(ndim))
    items = np.atleast_1d(np.asarray(axes)).tolist()
    return tuple(sorted(int(axis) % ndim for axis in items)) if ndim else ()


def axis_of(axis: Any, ndim: int) -> int:
    return int(axis) % ndim if ndim else 0


def wrap_indices(indices: Any, size: Any, validate: Any = False) -> np.ndarray:
    """Indices as int64, negatives wrapped as in iOS15 MIL.

    iOS17 MIL calls negative indices out of bounds: with ``validate_indices`` any index
    outside ``[0, size)`` is an error; without it, out-of-bound behaviour is undefined.
    """
    array = np.asarray(indices).astype(np.int64)
    if validate and np.any((array < 0) | (array >= size)):
        raise IndexError(f"indices out of bounds [0, {size}) with validate_indices")
    return np.where(array < 0, array + size, array)


def index_slices(shape: Any, begin: Any, end: Any, stride: Any, *masks: Any) -> tuple[Any, ...]:
    """The slices MIL's ``slice_by_index`` (and ``slice_update``) takes of a tensor of
    ``shape``; ``masks`` are begin, end and squeeze masks, None their defaults (a squeezed
    axis keeps its one element here)."""
    steps = None if stride is None else [int(step) for step in np.ravel(stride)]
    return tuple(solve_slice_by_index_slice(shape, np.ravel(begin), np.ravel(end), steps, *masks))


def out_shape(ctx: Any, index: int = 0) -> tuple[int, ...] | None:
    """The static shape MIL declares for output ``index``, if it is fully known."""
    shape = ctx.op.outputs[index].shape
    try:
        return tuple(int(dim) for dim in shape)
    except TypeError:
        return None


def broadcastable(param: Any, ndim: int, axes: tuple[int, ...]) -> Any:
    """A parameter over ``axes`` (layer_norm's gamma) reshaped to broadcast on rank ``ndim``
    (None, an absent one, stays None)."""
    if param is None:
        return None
    shape = [1] * ndim
    for axis, size in zip(axes, np.shape(param), strict=True):
        shape[axis] = size
    return np.reshape(param, shape)


def per_channel(param: Any, x: Any) -> Any:
    """A per-channel parameter (a bias, prelu's alpha) shaped to broadcast on axis 1 of
    ``x`` (N, C, ...)."""
    return np.reshape(param, (1, -1) + (1,) * (np.ndim(x) - 2))


def errstate() -> Any:
    """Silence NumPy's overflow and invalid-value warnings: they are the point here."""
    return np.errstate(all="ignore")


@functools.cache
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(
        max_workers=max(os.cpu_count() or 1, 1), thread_name_prefix="anekit-sim"
    )


def parallel(function: Callable[[np.ndarray], np.ndarray], x: Any) -> np.ndarray:
    """``function(x)`` for an elementwise float32 function, on all cores for large ``x``.

    NumPy and SciPy ufuncs release the GIL, so contiguous chunks run in parallel.
    """
    array = np.asarray(x)
    workers = os.cpu_count() or 1
    if array.size < PARALLEL_MIN_SIZE or workers == 1:
        return np.asarray(function(array))
    flat = np.ascontiguousarray(array).reshape(-1)
    out = np.empty(flat.shape, np.float32)
    bounds = np.linspace(0, flat.size, workers + 1).astype(np.int64)

    def work(index: int) -> None:
        start, stop = bounds[index], bounds[index + 1]
        with np.errstate(all="ignore"):
            out[start:stop] = function(flat[start:stop])

    list(_pool().map(work, range(workers)))
    return out.reshape(array.shape)
