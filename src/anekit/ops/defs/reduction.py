"""Reductions. ``reduce_sum`` and ``reduce_mean`` (and the sums inside the norm
reductions) accumulate as the run's numerics say: pairwise in fp16 by default in
``ane`` mode, or in fp32."""

from __future__ import annotations

from typing import Any

import numpy as np

from anekit._milgraph import numpy_dtype
from anekit.ops.defs._util import axes_of, axis_of, errstate
from anekit.ops.groups import SQUARING_REDUCTIONS
from anekit.ops.lowering import Lowering, onnx_type, shape_of
from anekit.ops.registry import OpContext, lowers, register


def _count(x: Any, axes: tuple[int, ...]) -> int:
    return int(np.prod([np.shape(x)[axis] for axis in axes], dtype=np.int64))


@register("reduce_sum")
def reduce_sum(ctx: OpContext, x: Any, axes: Any = None, *, keep_dims: Any) -> Any:
    return ctx.numerics.sum(np.asarray(x), axes_of(axes, np.ndim(x)), bool(keep_dims))


@register("reduce_mean")
def reduce_mean(ctx: OpContext, x: Any, axes: Any = None, *, keep_dims: Any) -> Any:
    chosen = axes_of(axes, np.ndim(x))
    total = ctx.numerics.round(ctx.numerics.sum(np.asarray(x), chosen, bool(keep_dims)))
    with errstate():
        return total / np.float32(_count(x, chosen))


@register("reduce_max")
def reduce_max(ctx: OpContext, x: Any, axes: Any = None, *, keep_dims: Any) -> Any:
    return np.max(x, axis=axes_of(axes, np.ndim(x)), keepdims=bool(keep_dims))


@register("reduce_min")
def reduce_min(ctx: OpContext, x: Any, axes: Any = None, *, keep_dims: Any) -> Any:
    return np.min(x, axis=axes_of(axes, np.ndim(x)), keepdims=bool(keep_dims))


@register("reduce_prod")
def reduce_prod(ctx: OpContext, x: Any, axes: Any = None, *, keep_dims: Any) -> Any:
    with errstate():
        return np.prod(x, axis=axes_of(axes, np.ndim(x)), keepdims=bool(keep_dims))


@register("reduce_l1_norm")
def reduce_l1_norm(ctx: OpContext, x: Any, axes: Any = None, *, keep_dims: Any) -> Any:
    return ctx.numerics.sum(np.abs(x), axes_of(axes, np.ndim(x)), bool(keep_dims))


def _sum_squares(ctx: OpContext, x: Any, axes: Any, keep_dims: Any) -> Any:
    with errstate():
        squares = ctx.numerics.round(np.asarray(x) * x)
    return ctx.numerics.sum(squares, axes_of(axes, np.ndim(x)), bool(keep_dims))


@register("reduce_sum_square")
def reduce_sum_square(ctx: OpContext, x: Any, axes: Any = None, *, keep_dims: Any) -> Any:
    return _sum_squares(ctx, x, axes, keep_dims)


@register("reduce_l2_norm")
def reduce_l2_norm(ctx: OpContext, x: Any, axes: Any = None, *, keep_dims: Any) -> Any:
    with errstate():
        return np.sqrt(ctx.numerics.round(_sum_squares(ctx, x, axes, keep_dims)))


@register("reduce_log_sum")
def reduce_log_sum(ctx: OpContext, x: Any, axes: Any = None, *, keep_dims: Any) -> Any:
    with errstate():
        total = ctx.numerics.sum(np.asarray(x), axes_of(axes, np.ndim(x)), bool(keep_dims))
        return np.log(ctx.numerics.round(total))


@register("reduce_log_sum_exp")
def reduce_log_sum_exp(ctx: OpContext, x: Any, axes: Any = None, *, keep_dims: Any) -> Any:
    chosen = axes_of(axes, np.ndim(x))
    with errstate():
        peak = np.max(x, axis=chosen, keepdims=True)
        exps = ctx.numerics.round(np.exp(x - peak))
        total = ctx.numerics.round(ctx.numerics.sum(exps, chosen, True))
        result = np.log(total) + peak
    return result if keep_dims else np.squeeze(result, axis=chosen)


@register("reduce_argmax", "reduce_argmin")
def reduce_arg(
    ctx: OpContext,
    x: Any,
    axis: Any,
    keep_dims: Any,
    output_dtype: Any = "int32",  # iOS15's reduce_argmax/argmin have no output_dtype
) -> Any:
    index = axis_of(axis, np.ndim(x))
    find = np.argmax if ctx.op.op_type == "reduce_argmax" else np.argmin
    result = find(x, axis=index).astype(np.dtype(str(output_dtype)))
    return np.expand_dims(result, index) if keep_dims else result


@register("cumsum")
def cumsum(ctx: OpContext, x: Any, axis: Any, exclusive: Any, reverse: Any) -> Any:
    index = axis_of(axis, np.ndim(x))
    values = np.flip(x, index) if reverse else np.asarray(x)
    with errstate():
        result = np.cumsum(values, axis=index, dtype=values.dtype)
    if exclusive:
        head = np.zeros_like(np.take(result, [0], axis=index))
        body = np.take(result, range(result.shape[index] - 1), axis=index)
        result = np.concatenate([head, body], axis=index)
    return np.flip(result, index) if reverse else result


# -- ONNX lowerings --------------------------------------------------------------


@lowers("reduce_sum", "reduce_mean", "reduce_sum_square", "reduce_l2_norm", "reduce_l1_norm")
def _reduce_sums(low: Lowering, op: Any) -> list[str]:
    x = low.float_value(op.x)
    shape = shape_of(op.x)
    axes = low.axes(op, len(shape))
    keep = low.keepdims(op)
    if op.op_type in SQUARING_REDUCTIONS:
        x = low.store(low.node("Mul", x, x))
    elif op.op_type == "reduce_l1_norm":
        x = low.node("Abs", x)
    total = low.sum(x, shape, axes, keep)
    if op.op_type == "reduce_mean":
        count = int(np.prod([shape[axis] for axis in axes], dtype=np.int64))
        return [low.node("Div", low.store(total), low.scalar(count))]
    if op.op_type == "reduce_l2_norm":
        return [low.node("Sqrt", low.store(total))]
    return [total]


@lowers("reduce_max", "reduce_min", "reduce_prod")
def _reduce_other(low: Lowering, op: Any) -> list[str]:
    rank = len(shape_of(op.x))
    onnx_op = {"reduce_max": "ReduceMax", "reduce_min": "ReduceMin", "reduce_prod": "ReduceProd"}
    axes = low.axes(op, rank)
    return [low.graph.reduce(onnx_op[op.op_type], low.value(op.x), axes, low.keepdims(op))]


@lowers("reduce_argmax", "reduce_argmin")
def _argmax(low: Lowering, op: Any) -> list[str]:
    rank = len(shape_of(op.x))
    axis = int(low.param(op, "axis")) % rank
    keep = int(low.keepdims(op))
    onnx_op = "ArgMax" if op.op_type == "reduce_argmax" else "ArgMin"
    index = low.node(onnx_op, low.value(op.x), axis=axis, keepdims=keep)
    target = numpy_dtype(op.outputs[0])
    cast = onnx_type(np.dtype(np.int32) if target is None else target)
    return [low.node("Cast", index, to=cast)]


# -- Core AI lowerings (anekit.package.coreai) -----------------------------------------

_COREAI_REDUCE = {
    "reduce_sum": "reduce_sum",
    "reduce_mean": "reduce_mean",
    "reduce_max": "reduce_max",
    "reduce_min": "reduce_min",
    "reduce_prod": "reduce_product",
    "reduce_sum_square": "reduce_sum",
    "reduce_l1_norm": "reduce_sum",
    "reduce_l2_norm": "reduce_sum",
}


@lowers(*_COREAI_REDUCE, target="coreai")
def _reduce_coreai(ai: Any, op: Any) -> Any:
    """Core AI's reductions keep the reduced axes; without ``keep_dims`` the result is
    reshaped to the op's output shape."""
    x = ai.value(op.x)
    if op.op_type in SQUARING_REDUCTIONS:
        x = ai.ai.broadcasting_mul(x, x)
    elif op.op_type == "reduce_l1_norm":
        x = ai.ai.abs_(x)
    axes = axes_of(ai.param(op, "axes"), len(shape_of(op.x)))
    result = getattr(ai.ai, _COREAI_REDUCE[op.op_type])(x, np.asarray(axes, np.int32))
    if op.op_type == "reduce_l2_norm":
        result = ai.ai.sqrt(result)
    if bool(ai.param(op, "keep_dims")):
        return result
    return ai.ai.reshape(result, np.asarray(shape_of(op.outputs[0]), np.int32))
