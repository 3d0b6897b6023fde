"""Activation ops. ``softmax`` is a composite whose intermediates are stored like
activations (rounded to fp16 in ``ane`` mode, sum accumulated per the run's
option), which is how a fully masked row with -inf scores turns into NaN."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special

from anekit.ops import composites
from anekit.ops.spaces import NumpySpace
from anekit.sim import kernels
from anekit.sim.ops._util import axis_of, errstate, parallel
from anekit.sim.registry import OpContext, register


@register("relu")
def relu(ctx: OpContext, x: Any) -> Any:
    return np.maximum(x, 0)


@register("relu6")
def relu6(ctx: OpContext, x: Any) -> Any:
    return np.minimum(np.maximum(x, 0), 6)


@register("sigmoid")
def sigmoid(ctx: OpContext, x: Any) -> Any:
    return special.expit(x)


@register("silu")
def silu(ctx: OpContext, x: Any) -> Any:
    return parallel(lambda v: v * special.expit(v), x)


@register("gelu")
def gelu(ctx: OpContext, x: Any, mode: Any = "EXACT") -> Any:
    return composites.gelu(_space(ctx, rounding=False), np.asarray(x, np.float32), str(mode))


@register("softplus")
def softplus(ctx: OpContext, x: Any) -> Any:
    return np.logaddexp(np.float32(0), x)


@register("softsign")
def softsign(ctx: OpContext, x: Any) -> Any:
    return x / (1 + np.abs(x))


@register("elu")
def elu(ctx: OpContext, x: Any, alpha: Any) -> Any:
    with errstate():
        return np.where(x > 0, x, alpha * (np.exp(x) - 1))


@register("leaky_relu")
def leaky_relu(ctx: OpContext, x: Any, alpha: Any) -> Any:
    return np.where(x >= 0, x, alpha * x)


@register("clamped_relu")
def clamped_relu(ctx: OpContext, x: Any, alpha: Any, beta: Any) -> Any:
    return np.minimum(np.where(x >= 0, x, alpha * x), beta)


@register("linear_activation")
def linear_activation(ctx: OpContext, x: Any, alpha: Any, beta: Any) -> Any:
    return alpha * x + beta


@register("scaled_tanh")
def scaled_tanh(ctx: OpContext, x: Any, alpha: Any, beta: Any) -> Any:
    return alpha * np.tanh(beta * x)


@register("sigmoid_hard")
def sigmoid_hard(ctx: OpContext, x: Any, alpha: Any, beta: Any) -> Any:
    return np.minimum(np.maximum(alpha * x + beta, 0), 1)


@register("thresholded_relu")
def thresholded_relu(ctx: OpContext, x: Any, alpha: Any) -> Any:
    return np.where(x >= alpha, x, 0).astype(x.dtype)  # MIL: x if x >= alpha


def _per_channel(param: Any, x: Any) -> Any:
    return np.reshape(param, (1, -1) + (1,) * (np.ndim(x) - 2))


@register("prelu")
def prelu(ctx: OpContext, x: Any, alpha: Any) -> Any:
    return np.where(x >= 0, x, _per_channel(alpha, x) * x)


@register("softplus_parametric")
def softplus_parametric(ctx: OpContext, x: Any, alpha: Any, beta: Any) -> Any:
    return _per_channel(alpha, x) * np.logaddexp(np.float32(0), _per_channel(beta, x) * x)


@register("softmax")
def softmax(ctx: OpContext, x: Any, axis: Any) -> Any:
    numerics = ctx.numerics
    axis_index = axis_of(axis, np.ndim(x))
    fused = kernels.softmax(np.asarray(x, np.float32), axis_index, rounded=numerics.fp16)
    if fused is not None:
        ctx.stored = numerics.fp16
        return fused
    with errstate():
        return composites.softmax(_space(ctx, rounding=numerics.fp16), x, axis_index)


def _space(ctx: OpContext, *, rounding: bool) -> NumpySpace:
    """NumPy with the simulator's kernels; ``rounding``: store intermediates as fp16."""
    return NumpySpace(rounding=rounding, exp=lambda v: parallel(kernels.exp, v), erf=kernels.erf)
