"""Normalizations, as composites whose intermediates are stored like activations.

In ``ane`` mode every intermediate (mean, centred values, their squares, the sum
of the squares, the variance) is rounded to fp16, so the variance overflows when a
deviation from the mean exceeds 256 (256² = 65536 > 65504) or the sum of squared
deviations over the normalized axes exceeds 65504 (384 channels with an RMS
deviation above 13), as semlith reports (shared/seeds/000: "the sum of squares
stays in range" was the fix); the op notes it (rule ``sim.internal_overflow``).
Internal sums accumulate in fp32 and are rounded once (:mod:`anekit.ops.composites`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from anekit.ops import composites
from anekit.ops.defs._util import axes_of, broadcastable, errstate
from anekit.ops.lowering import Lowering, shape_of
from anekit.ops.registry import OpContext, lowers, register
from anekit.ops.spaces import NumpySpace


def _normalize(
    ctx: OpContext, x: Any, axes: tuple[int, ...], epsilon: Any, gamma: Any, beta: Any
) -> Any:
    """``x`` normalized over ``axes``, scaled by ``gamma`` and shifted by ``beta`` (shaped to
    broadcast; None: none); notes an fp16 overflow of the variance."""
    count = int(np.prod([np.shape(x)[axis] for axis in axes], dtype=np.int64))
    space = NumpySpace(rounding=ctx.numerics.fp16)
    with errstate():
        result, variance = composites.normalize(space, x, axes, count, epsilon)
        result = composites.affine(space, result, gamma, beta)
    if ctx.numerics.fp16 and not np.isfinite(variance).all() and np.isfinite(x).all():
        ctx.note(
            "sim.internal_overflow",
            f"{ctx.op.op_type}: the variance overflowed fp16 (a squared deviation, or their sum "
            "over the normalized axes, above 65504); its output is wrong",
        )
    return result


@register("layer_norm")
def layer_norm(
    ctx: OpContext, x: Any, axes: Any, epsilon: Any, gamma: Any = None, beta: Any = None
) -> Any:
    rank = np.ndim(x)
    chosen = axes_of(axes, rank)
    scale, shift = broadcastable(gamma, rank, chosen), broadcastable(beta, rank, chosen)
    return _normalize(ctx, x, chosen, epsilon, scale, shift)


@register("instance_norm")
def instance_norm(ctx: OpContext, x: Any, epsilon: Any, gamma: Any = None, beta: Any = None) -> Any:
    scale, shift = broadcastable(gamma, np.ndim(x), (1,)), broadcastable(beta, np.ndim(x), (1,))
    return _normalize(ctx, x, tuple(range(2, np.ndim(x))), epsilon, scale, shift)


@register("batch_norm")
def batch_norm(
    ctx: OpContext,
    x: Any,
    mean: Any,
    variance: Any,
    epsilon: Any,
    gamma: Any = None,
    beta: Any = None,
) -> Any:
    with errstate():
        scale = 1.0 / np.sqrt(variance + epsilon)
        if gamma is not None:
            scale = scale * gamma
        shift = -mean * scale if beta is None else beta - mean * scale
        return x * broadcastable(scale, np.ndim(x), (1,)) + broadcastable(shift, np.ndim(x), (1,))


@register("l2_norm")
def l2_norm(ctx: OpContext, x: Any, epsilon: Any) -> Any:
    # MIL normalizes over the last three axes (rank-3 inputs: over all of them).
    axes = tuple(range(max(np.ndim(x) - 3, 0), np.ndim(x)))
    space = NumpySpace(rounding=ctx.numerics.fp16)
    with errstate():
        squares = space.store(space.mul(x, x))
        total = space.store(space.sum(squares, axes))
        return x / np.sqrt(total + epsilon)


@register("local_response_norm")
def local_response_norm(ctx: OpContext, x: Any, size: Any, alpha: Any, beta: Any, k: Any) -> Any:
    # Over channels (axis 1): x / (k + alpha/size * sum of squares in a window)^beta.
    half = int(size) // 2
    squares = np.asarray(x) * x
    padded = np.pad(squares, [(0, 0), (half, int(size) - 1 - half)] + [(0, 0)] * (np.ndim(x) - 2))
    window = sum(padded[:, i : i + np.shape(x)[1]] for i in range(int(size)))
    with errstate():
        return x / np.power(k + alpha / int(size) * window, beta)


# -- ONNX lowerings --------------------------------------------------------------


@lowers("layer_norm")
def _layer_norm(low: Lowering, op: Any) -> list[str]:
    x = low.float_value(op.x)
    shape = shape_of(op.x)
    axes = low.axes(op, len(shape))
    count = int(np.prod([shape[axis] for axis in axes], dtype=np.int64))
    epsilon = float(low.param(op, "epsilon"))
    result, variance = composites.normalize(low.space, x, axes, count, epsilon)
    param_shape = [shape[axis] if axis in axes else 1 for axis in range(len(shape))]

    def param(var: Any) -> str | None:
        if var is None:
            return None
        return low.graph.constant(low.weight(var).reshape(param_shape), np.float32)

    low.probe = {"variance": low.node("ReduceSum", variance, keepdims=0)}
    return [composites.affine(low.space, result, param(op.gamma), param(op.beta))]


@lowers("layer_norm", target="onnx_fused")
def _layer_norm_fused(low: Lowering, op: Any) -> list[str]:
    """ONNX's LayerNormalization, when the op normalizes the trailing axes."""
    shape = shape_of(op.x)
    axes = list(low.axes(op, len(shape)))
    if axes != list(range(axes[0], len(shape))):
        return _layer_norm(low, op)  # not the trailing axes: spelled out
    size = [shape[axis] for axis in axes]
    # ONNX needs a scale and a bias where MIL's are absent: the identity ones.
    gamma = low.const(op.gamma) if op.gamma is not None else np.ones(size)
    beta = low.const(op.beta) if op.beta is not None else np.zeros(size)
    return [
        low.node(
            "LayerNormalization",
            low.value(op.x),
            low.graph.constant(np.asarray(gamma, np.float32).reshape(size), np.float32),
            low.graph.constant(np.asarray(beta, np.float32).reshape(size), np.float32),
            axis=axes[0],
            epsilon=float(low.param(op, "epsilon")),
        )
    ]


# -- Core AI lowerings (anekit.package.coreai) -----------------------------------------


@lowers("layer_norm", target="coreai")
def _layer_norm_coreai(ai: Any, op: Any) -> Any:
    """Spelled out (Core AI has no layer_norm op): the composite every other path runs,
    in the op's own dtype."""
    from anekit._milgraph import numpy_dtype
    from anekit.ops.spaces import CoreAISpace

    shape = shape_of(op.x)
    axes = axes_of(ai.param(op, "axes"), len(shape))
    count = int(np.prod([shape[axis] for axis in axes], dtype=np.int64))
    space = CoreAISpace(ai, numpy_dtype(op.x))
    epsilon = float(ai.param(op, "epsilon"))
    result, _ = composites.normalize(space, ai.value(op.x), axes, count, epsilon)
    param_shape = np.asarray([shape[a] if a in axes else 1 for a in range(len(shape))], np.int32)

    def param(var: Any) -> Any:
        return None if var is None else ai.ai.reshape(ai.value(var), param_shape)

    gamma, beta = param(op.inputs.get("gamma")), param(op.inputs.get("beta"))
    return composites.affine(space, result, gamma, beta)
