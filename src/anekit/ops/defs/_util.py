"""Small helpers shared by the op implementations."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

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


def out_shape(ctx: Any, index: int = 0) -> tuple[int, ...] | None:
    """The static shape MIL declares for output ``index``, if it is fully known."""
    shape = ctx.op.outputs[index].shape
    try:
        return tuple(int(dim) for dim in shape)
    except TypeError:
        return None


def broadcastable(param: np.ndarray, ndim: int, axes: tuple[int, ...]) -> np.ndarray:
    """A parameter over ``axes`` (layer_norm's gamma) reshaped to broadcast on rank ``ndim``."""
    shape = [1] * ndim
    for axis, size in zip(axes, np.shape(param), strict=True):
        shape[axis] = size
    return np.reshape(param, shape)


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
