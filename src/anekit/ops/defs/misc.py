"""Constants, compile-time weight decompression, pooling and attention."""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from anekit.errors import ProgramError
from anekit.ops import composites
from anekit.ops.conv import conv_geometry
from anekit.ops.defs._util import errstate
from anekit.ops.groups import CONSTEXPR
from anekit.ops.limits import ATTENTION_SCORE_LIMIT
from anekit.ops.lowering import shape_of
from anekit.ops.registry import OpContext, cliff, lowers, register
from anekit.ops.spaces import NumpySpace


@register("const")
def const(ctx: OpContext, **_: Any) -> Any:
    return ctx.op.outputs[0].val


@register(*sorted(CONSTEXPR))
def constexpr(ctx: OpContext, **_: Any) -> Any:
    """Materialize a compressed weight with coremltools' own decompression (each op
    class's ``decompress``), on its inputs' values: constants, or the outputs of other
    constexpr ops (iOS18's joint compression: a palette that is itself quantized, a
    quantized weight that is also sparse), which coremltools' ``materialized_val_inference``
    leaves unread."""
    return decompressed(ctx.op)


def decompressed(op: Any) -> Any:
    """A constexpr op's value as coremltools defines its decompression."""
    decompress = getattr(type(op), "decompress", None)
    if decompress is None:
        return op.materialized_val_inference()
    names = inspect.signature(decompress).parameters
    return decompress(**{name: _constant_input(getattr(op, name, None)) for name in names})


def _constant_input(var: Any) -> Any:
    """The value of a constexpr op's input: a constant's, or a constexpr output's."""
    if var is None or var.val is not None:
        return None if var is None else var.val
    if var.op is None or var.op.op_type not in CONSTEXPR:
        raise ProgramError(f"{var.name!r} is neither a constant nor a constexpr op's output")
    values = decompressed(var.op)
    values = values if isinstance(values, tuple) else (values,)
    return next(value for out, value in zip(var.op.outputs, values, strict=True) if out is var)


# -- Core AI lowerings of compressed weights (anekit.package.coreai) ----------------------

#: Integer weights Core AI's ``dequantize`` takes as stored. coremltools holds 4-bit
#: data in int8/uint8 arrays, so per-channel int4 goes in as 8 bits (Core AI's 4-bit
#: constants read back wrong in coreai-core 1.0.0b3: issue 36).
_COREAI_QUANTIZED = frozenset({"int8", "uint8"})
#: Core AI's ``lut_to_dense`` wants a palette of 2^bits entries for its indices'
#: integer type; indices of fewer bits are widened to uint8 and the palette padded.
_COREAI_PALETTE = 256


@lowers(*sorted(CONSTEXPR), target="coreai")
def _constexpr_coreai(ai: Any, op: Any) -> Any:
    """A compressed weight: 8-bit per-channel (or per-tensor) quantization as Core AI's
    ``dequantize``, a palette of up to 256 entries per group as ``lut_to_dense`` (its
    indices as uint8), anything else (blockwise quantization, a float offset, sparse or
    joint compression, vector palettes) as the dense weight coremltools decompresses."""
    compact = _dequantized(ai, op) if op.op_type in _AFFINE else None
    if compact is None and op.op_type == "constexpr_lut_to_dense" and "shape" not in op.inputs:
        compact = _palettized(ai, op)  # iOS18's form (iOS16's packs its indices)
    return compact if compact is not None else ai.constant(decompressed(op))


#: The affine quantizations and their inputs: (data, scale, offset, axis or None).
_AFFINE = {
    "constexpr_blockwise_shift_scale": ("data", "scale", "offset", None),
    "constexpr_affine_dequantize": ("quantized_data", "scale", "zero_point", "axis"),
}


def _constant_inputs(op: Any, *names: str) -> list[Any] | None:
    """The constant values of ``op``'s inputs ``names`` (None where absent), or None when
    one of them is computed (joint compression)."""
    values = []
    for name in names:
        var = op.inputs.get(name)
        if var is not None and var.val is None:
            return None
        values.append(None if var is None else np.asarray(var.val))
    return values


def _dequantized(ai: Any, op: Any) -> Any:
    data_name, scale_name, offset_name, axis_name = _AFFINE[op.op_type]
    found = _constant_inputs(op, data_name, scale_name, offset_name)
    if found is None:
        return None
    data, scale, offset = found
    if data.dtype.name not in _COREAI_QUANTIZED:
        return None
    if offset is not None and offset.dtype.kind == "f":
        return None  # iOS18 allows a float offset; Core AI's offset1 is of the data's type
    if axis_name is not None:  # iOS16: a scalar or a vector along ``axis``
        axis = int(op.inputs[axis_name].val) % data.ndim
    else:  # iOS18: blocks; one block per channel along at most one axis
        wide = [a for a, size in enumerate(scale.shape) if size != 1]
        if len(wide) > 1 or (wide and scale.shape[wide[0]] != data.shape[wide[0]]):
            return None
        axis = wide[0] if wide else 0
    count = data.shape[axis]
    scale = np.broadcast_to(np.ravel(scale), (count,)) if scale.size == 1 else np.ravel(scale)
    zero = np.zeros(count, data.dtype) if offset is None else np.ravel(offset).astype(data.dtype)
    zero = np.broadcast_to(zero, (count,)) if zero.size == 1 else zero
    return ai.ai.dequantize(
        ai.constant(data),
        ai.constant(np.ascontiguousarray(scale)),
        ai.constant(np.ascontiguousarray(zero)),
        ai.constant(np.zeros(count, scale.dtype)),
        np.int32(axis),
    )


def _palettized(ai: Any, op: Any) -> Any:
    found = _constant_inputs(op, "indices", "lut")
    if found is None:
        return None
    indices, lut = found
    if lut.shape[-1] != 1 or lut.shape[-2] > _COREAI_PALETTE:
        return None  # vector palettes, or more entries than uint8 indexes
    padding = [(0, 0)] * (lut.ndim - 2) + [(0, _COREAI_PALETTE - lut.shape[-2]), (0, 0)]
    return ai.ai.lut_to_dense(
        ai.constant(indices.astype(np.uint8)),
        ai.constant(np.pad(lut, padding)),
        np.int16(int(op.inputs["vector_axis"].val) if "vector_axis" in op.inputs else 0),
    )


@register("max_pool", "avg_pool", "l2_pool")
def pool(
    ctx: OpContext,
    x: Any,
    kernel_sizes: Any,
    strides: Any,
    pad_type: Any,
    pad: Any,
    exclude_padding_from_average: Any = False,  # max_pool and l2_pool have no such input
    *,
    ceil_mode: Any,
) -> Any:
    """The maximum, the average (over the window, or over its input positions with
    ``exclude_padding_from_average``) or the l2 norm (sqrt of the sum of squares, MIL
    iOS15 pool.py) of each window; padding adds nothing to any of them."""
    spatial = tuple(np.shape(x)[2:])
    kernel = tuple(int(k) for k in np.asarray(kernel_sizes).reshape(-1))
    stride, _, padding = conv_geometry(spatial, kernel, strides, None, pad_type, pad)
    if ceil_mode:
        padding = [
            (b, e + (s - (n + b + e - k) % s) % s)
            for (b, e), n, k, s in zip(padding, spatial, kernel, stride, strict=True)
        ]
    fill = -np.inf if ctx.op.op_type == "max_pool" else 0.0
    padded = np.pad(x, [(0, 0), (0, 0), *padding], constant_values=fill)
    step = tuple(slice(None, None, s) for s in stride)
    windows = sliding_window_view(padded, kernel, axis=tuple(range(2, np.ndim(x))))  # type: ignore[call-overload]
    windows = windows[:, :, *step]
    axes = tuple(range(-len(spatial), 0))
    if ctx.op.op_type == "max_pool":
        return windows.max(axis=axes)
    if ctx.op.op_type == "l2_pool":
        return np.sqrt(np.square(windows).sum(axis=axes))
    total = windows.sum(axis=axes)
    if exclude_padding_from_average:
        counts = sliding_window_view(np.pad(np.ones(spatial, np.float32), padding), kernel)
        return total / counts[step].sum(axis=axes)
    return total / np.prod(kernel)


@register("scaled_dot_product_attention")
def scaled_dot_product_attention(
    ctx: OpContext, query: Any, key: Any, value: Any, attn_mask: Any = None
) -> Any:
    """softmax(Q Kᵀ / sqrt(d) + mask) V, with intermediates stored as activations."""
    numerics = ctx.numerics
    with errstate():
        scores = numerics.round(np.matmul(query, np.swapaxes(key, -1, -2)))
        scores = numerics.round(scores / np.float32(math.sqrt(np.shape(query)[-1])))
        if attn_mask is not None:
            if np.asarray(attn_mask).dtype == np.bool_:
                scores = np.where(attn_mask, scores, -np.inf).astype(np.float32)
            else:
                scores = numerics.round(scores + attn_mask)
        space = NumpySpace(rounding=numerics.fp16)
        weights = space.store(composites.softmax(space, scores, np.ndim(scores) - 1))
        return np.matmul(weights, value)


# -- numeric cliffs ------------------------------------------------------------------


def _query_and_key(op: Any, values: Mapping[str, float]) -> dict[str, Any]:
    """Stand-ins of the shapes the score-size check reads (their values do not matter)."""
    return {
        "query": np.broadcast_to(np.float32(0), shape_of(op.query)),
        "key": np.broadcast_to(np.float32(0), shape_of(op.key)),
    }


@cliff("scaled_dot_product_attention", rule="attention.score_size", stand_in=_query_and_key)
def _sdpa_score_size(op: Any, inputs: Mapping[str, Any], max_abs: float) -> list[str]:
    if "query" not in inputs or "key" not in inputs:
        return []
    elements = int(np.shape(inputs["query"])[-2]) * int(np.shape(inputs["key"])[-2])
    if elements < ATTENTION_SCORE_LIMIT:
        return []
    return [f"per-head score tensor has {elements} elements, at least 2^20"]
