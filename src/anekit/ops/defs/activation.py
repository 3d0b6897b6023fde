"""Activation ops. ``softmax`` is a composite whose intermediates are stored like
activations (rounded to fp16 in ``ane`` mode, sum accumulated per the run's
option), which is how a fully masked row with -inf scores turns into NaN."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy import special

from anekit.ops import composites, kernels
from anekit.ops.attention import oversized_scores
from anekit.ops.defs._util import axis_of, errstate, parallel, per_channel
from anekit.ops.lowering import Lowering, NotLowerable, shape_of
from anekit.ops.registry import OpContext, cliff, lowers, register
from anekit.ops.spaces import NumpySpace


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
def gelu(ctx: OpContext, x: Any, mode: Any) -> Any:
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


@register("prelu")
def prelu(ctx: OpContext, x: Any, alpha: Any) -> Any:
    return np.where(x >= 0, x, per_channel(alpha, x) * x)


@register("softplus_parametric")
def softplus_parametric(ctx: OpContext, x: Any, alpha: Any, beta: Any) -> Any:
    return per_channel(alpha, x) * np.logaddexp(np.float32(0), per_channel(beta, x) * x)


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


# -- ONNX lowerings --------------------------------------------------------------


@lowers("relu", "sigmoid")
def _relu_sigmoid(low: Lowering, op: Any) -> list[str]:
    onnx_op = "Relu" if op.op_type == "relu" else "Sigmoid"
    return [low.node(onnx_op, low.float_value(op.x))]


@lowers("silu")
def _silu(low: Lowering, op: Any) -> list[str]:
    x = low.float_value(op.x)
    return [low.node("Mul", x, low.node("Sigmoid", x))]


@lowers("gelu")
def _gelu(low: Lowering, op: Any) -> list[str]:
    mode = str(low.param(op, "mode"))
    if mode not in composites.GELU_MODES:
        raise NotLowerable(f"gelu mode {mode}")
    return [composites.gelu(low.space, low.float_value(op.x), mode)]


@lowers("softmax")
def _softmax(low: Lowering, op: Any) -> list[str]:
    axis = int(low.param(op, "axis")) % len(shape_of(op.x))
    return [composites.softmax(low.space, low.float_value(op.x), axis)]


# -- ONNX Runtime's fused operators (the exporter's target) ---------------------------


@lowers("gelu", target="onnx_fused")
def _gelu_fused(low: Lowering, op: Any) -> list[str]:
    """ONNX's Gelu (opset 20); the sigmoid approximation it lacks is spelled out."""
    mode = str(low.param(op, "mode"))
    if mode == "SIGMOID_APPROXIMATION":
        return _gelu(low, op)
    approximate = "tanh" if mode == "TANH_APPROXIMATION" else "none"
    return [low.node("Gelu", low.value(op.x), approximate=approximate)]


@lowers("softmax", target="onnx_fused")
def _softmax_fused(low: Lowering, op: Any) -> list[str]:
    axis = int(low.param(op, "axis")) % len(shape_of(op.x))
    return [low.node("Softmax", low.value(op.x), axis=axis)]


# -- Core AI lowerings (anekit.package.coreai) -----------------------------------------

#: MIL gelu mode -> Core AI gelu's ``approximate`` (None: the sigmoid approximation,
#: which Core AI lacks, spelled out).
_COREAI_GELU = dict(zip(composites.GELU_MODES, ("none", "tanh", None), strict=True))


@lowers("relu", "sigmoid", "silu", target="coreai")
def _activation_coreai(ai: Any, op: Any) -> Any:
    return getattr(ai.ai, op.op_type)(ai.value(op.x))


@lowers("gelu", target="coreai")
def _gelu_coreai(ai: Any, op: Any) -> Any:
    mode = str(ai.param(op, "mode"))
    if mode not in _COREAI_GELU:
        raise NotLowerable(f"gelu mode {mode}")
    if _COREAI_GELU[mode] is None:  # the sigmoid approximation: x * sigmoid(1.702 x)
        x = ai.value(op.x)
        return ai.ai.broadcasting_mul(
            x, ai.ai.sigmoid(ai.ai.broadcasting_mul(x, ai.scalar(composites.SIGMOID_SCALE, op.x)))
        )
    return ai.ai.gelu(ai.value(op.x), approximate=_COREAI_GELU[mode])


@lowers("softmax", target="coreai")
def _softmax_coreai(ai: Any, op: Any) -> Any:
    axis = int(ai.param(op, "axis")) % len(shape_of(op.x))
    return ai.ai.softmax(ai.value(op.x), np.int32(axis))


# -- numeric cliffs ------------------------------------------------------------------


@cliff("softmax", rule="attention.score_size")
def _score_size(op: Any, inputs: Mapping[str, Any], max_abs: float) -> list[str]:
    found = oversized_scores(op)
    if found is None:
        return []
    producer, elements = found
    shape = tuple(int(dim) for dim in producer.outputs[0].shape)
    return [
        f"scores from {producer.name} have {elements} elements per head (shape {shape}), "
        "at least 2^20"
    ]
