"""Reductions. ``reduce_sum`` and ``reduce_mean`` (and the sums inside the norm
reductions) accumulate as the run's numerics say: pairwise in fp16 by default in
``ane`` mode, or in fp32."""

from __future__ import annotations

from typing import Any

import numpy as np

from anekit.sim.ops._util import axes_of, axis_of, errstate
from anekit.sim.registry import OpContext, register


def _count(x: Any, axes: tuple[int, ...]) -> int:
    return int(np.prod([np.shape(x)[axis] for axis in axes], dtype=np.int64))


@register("reduce_sum")
def reduce_sum(ctx: OpContext, x: Any, axes: Any = None, keep_dims: Any = False) -> Any:
    return ctx.numerics.sum(np.asarray(x), axes_of(axes, np.ndim(x)), bool(keep_dims))


@register("reduce_mean")
def reduce_mean(ctx: OpContext, x: Any, axes: Any = None, keep_dims: Any = False) -> Any:
    chosen = axes_of(axes, np.ndim(x))
    total = ctx.numerics.round(ctx.numerics.sum(np.asarray(x), chosen, bool(keep_dims)))
    with errstate():
        return total / np.float32(_count(x, chosen))


@register("reduce_max")
def reduce_max(ctx: OpContext, x: Any, axes: Any = None, keep_dims: Any = False) -> Any:
    return np.max(x, axis=axes_of(axes, np.ndim(x)), keepdims=bool(keep_dims))


@register("reduce_min")
def reduce_min(ctx: OpContext, x: Any, axes: Any = None, keep_dims: Any = False) -> Any:
    return np.min(x, axis=axes_of(axes, np.ndim(x)), keepdims=bool(keep_dims))


@register("reduce_prod")
def reduce_prod(ctx: OpContext, x: Any, axes: Any = None, keep_dims: Any = False) -> Any:
    with errstate():
        return np.prod(x, axis=axes_of(axes, np.ndim(x)), keepdims=bool(keep_dims))


@register("reduce_l1_norm")
def reduce_l1_norm(ctx: OpContext, x: Any, axes: Any = None, keep_dims: Any = False) -> Any:
    return ctx.numerics.sum(np.abs(x), axes_of(axes, np.ndim(x)), bool(keep_dims))


def _sum_squares(ctx: OpContext, x: Any, axes: Any, keep_dims: Any) -> Any:
    with errstate():
        squares = ctx.numerics.round(np.asarray(x) * x)
    return ctx.numerics.sum(squares, axes_of(axes, np.ndim(x)), bool(keep_dims))


@register("reduce_sum_square")
def reduce_sum_square(ctx: OpContext, x: Any, axes: Any = None, keep_dims: Any = False) -> Any:
    return _sum_squares(ctx, x, axes, keep_dims)


@register("reduce_l2_norm")
def reduce_l2_norm(ctx: OpContext, x: Any, axes: Any = None, keep_dims: Any = False) -> Any:
    with errstate():
        return np.sqrt(ctx.numerics.round(_sum_squares(ctx, x, axes, keep_dims)))


@register("reduce_log_sum")
def reduce_log_sum(ctx: OpContext, x: Any, axes: Any = None, keep_dims: Any = False) -> Any:
    with errstate():
        return np.log(
            ctx.numerics.round(
                ctx.numerics.sum(np.asarray(x), axes_of(axes, np.ndim(x)), bool(keep_dims))
            )
        )


@register("reduce_log_sum_exp")
def reduce_log_sum_exp(ctx: OpContext, x: Any, axes: Any = None, keep_dims: Any = False) -> Any:
    chosen = axes_of(axes, np.ndim(x))
    with errstate():
        peak = np.max(x, axis=chosen, keepdims=True)
        exps = ctx.numerics.round(np.exp(x - peak))
        total = ctx.numerics.round(ctx.numerics.sum(exps, chosen, True))
        result = np.log(total) + peak
    return result if keep_dims else np.squeeze(result, axis=chosen)


@register("reduce_argmax")
def reduce_argmax(
    ctx: OpContext, x: Any, axis: Any = -1, keep_dims: Any = False, output_dtype: Any = "int32"
) -> Any:
    index = axis_of(axis, np.ndim(x))
    result = np.argmax(x, axis=index).astype(np.dtype(str(output_dtype)))
    return np.expand_dims(result, index) if keep_dims else result


@register("reduce_argmin")
def reduce_argmin(
    ctx: OpContext, x: Any, axis: Any = -1, keep_dims: Any = False, output_dtype: Any = "int32"
) -> Any:
    index = axis_of(axis, np.ndim(x))
    result = np.argmin(x, axis=index).astype(np.dtype(str(output_dtype)))
    return np.expand_dims(result, index) if keep_dims else result


@register("cumsum")
def cumsum(
    ctx: OpContext, x: Any, axis: Any = 0, exclusive: Any = False, reverse: Any = False
) -> Any:
    index = axis_of(axis, np.ndim(x))
    values = np.flip(x, index) if reverse else np.asarray(x)
    with errstate():
        result = np.cumsum(values, axis=index, dtype=values.dtype)
    if exclusive:
        result = np.concatenate(
            [
                np.zeros_like(np.take(result, [0], axis=index)),
                np.take(result, range(result.shape[index] - 1), axis=index),
            ],
            axis=index,
        )
    return np.flip(result, index) if reverse else result
