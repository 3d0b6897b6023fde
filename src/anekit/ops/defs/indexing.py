"""Scatter, sliding-window, sequence-reversal, slice-update and non-zero ops.

Semantics from coremltools' MIL definitions (``mil/ops/defs``): ``scatter_gather``
(iOS15/iOS17), ``tensor_transformation`` (iOS15/iOS18) and ``tensor_operation``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from anekit.ops.defs._util import axis_of, errstate, index_slices, wrap_indices
from anekit.ops.registry import OpContext, register

#: Scatter ``mode`` -> the ufunc combining ``data`` with each update, in index order.
_MODES = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "max": np.maximum,
    "min": np.minimum,
}


def _scatter(data: Any, where: tuple[Any, ...], updates: Any, mode: Any) -> np.ndarray:
    """``data`` with ``updates`` combined into ``data[where]`` by ``mode``; repeated
    indices apply in turn (add accumulates, update keeps one of them)."""
    out = np.array(data)
    if str(mode) == "update":
        out[where] = updates
        return out
    ufunc = _MODES[str(mode)]
    with errstate():
        if ufunc is np.divide and out.dtype.kind != "f":  # integer division truncates
            wide = out.astype(np.float64)
            ufunc.at(wide, where, updates)
            return np.trunc(wide).astype(out.dtype)
        ufunc.at(out, where, updates)
    return out


@register("scatter", "scatter_along_axis")
def scatter(
    ctx: OpContext,
    data: Any,
    indices: Any,
    updates: Any,
    validate_indices: Any = False,  # iOS15's scatter/scatter_along_axis lack it
    *,
    axis: Any,
    mode: Any,
) -> Any:
    """MIL ``scatter``: ``updates`` slices into ``data`` at ``indices`` along ``axis``;
    ``scatter_along_axis``: ``updates[p]`` into ``data`` at ``p`` with ``p[axis]``
    replaced by ``indices[p]``."""
    index = axis_of(axis, np.ndim(data))
    picked = wrap_indices(indices, np.shape(data)[index], validate_indices)
    if ctx.op.op_type == "scatter":
        return _scatter(data, (slice(None),) * index + (picked,), updates, mode)
    where = list(np.indices(np.shape(indices), sparse=True))
    where[index] = picked
    return _scatter(data, tuple(where), updates, mode)


@register("scatter_nd")
def scatter_nd(
    ctx: OpContext,
    data: Any,
    indices: Any,
    updates: Any,
    validate_indices: Any = False,  # iOS15's scatter_nd lacks it
    *,
    mode: Any,
) -> Any:
    """MIL ``scatter_nd``: ``updates[i...]`` into ``data[indices[i..., :]]``."""
    depth = np.shape(indices)[-1]
    picked = wrap_indices(indices, np.asarray(np.shape(data)[:depth]), validate_indices)
    return _scatter(data, tuple(np.moveaxis(picked, -1, 0)), updates, mode)


@register("non_zero")
def non_zero(ctx: OpContext, x: Any) -> Any:
    """MIL ``non_zero``: the (N, rank) indices of the non-zero elements, row-major order."""
    return np.argwhere(np.asarray(x)).astype(np.int32)


@register("sliding_windows")
def sliding_windows(ctx: OpContext, x: Any, axis: Any, size: Any, stride: Any) -> Any:
    """MIL ``sliding_windows``: windows of ``size`` every ``stride`` along ``axis``; the
    window axis follows ``axis``."""
    index, step, width = axis_of(axis, np.ndim(x)), int(stride), int(size)
    count = max((np.shape(x)[index] - width) // step + 1, 0)
    return np.take(x, np.arange(count)[:, None] * step + np.arange(width), axis=index)


@register("reverse_sequence")
def reverse_sequence(ctx: OpContext, x: Any, lengths: Any, seq_axis: Any, batch_axis: Any) -> Any:
    """MIL ``reverse_sequence``: for each ``b`` along ``batch_axis``, reverse the first
    ``lengths[b]`` elements along ``seq_axis``."""
    rank = np.ndim(x)
    seq, batch = axis_of(seq_axis, rank), axis_of(batch_axis, rank)
    if seq == batch:
        raise ValueError("reverse_sequence: seq_axis and batch_axis must differ")
    steps = np.arange(np.shape(x)[seq])
    counts = np.asarray(lengths).astype(np.int64).reshape(-1, 1)
    order = np.where(steps < counts, counts - 1 - steps, steps)  # (batch, seq)
    order = order.T if batch > seq else order
    order = np.expand_dims(order, tuple(a for a in range(rank) if a not in (seq, batch)))
    return np.take_along_axis(np.asarray(x), order, axis=seq)


@register("slice_update")
def slice_update(
    ctx: OpContext,
    x: Any,
    update: Any,
    begin: Any,
    end: Any,
    stride: Any = None,
    begin_mask: Any = None,
    end_mask: Any = None,
    squeeze_mask: Any = None,
) -> Any:
    """MIL ``slice_update`` (iOS18): ``x`` with the slice ``slice_by_index`` would take
    replaced by ``update``."""
    where = index_slices(np.shape(x), begin, end, stride, begin_mask, end_mask, squeeze_mask)
    out = np.array(x)
    out[where] = np.reshape(update, np.shape(out[where]))
    return out
