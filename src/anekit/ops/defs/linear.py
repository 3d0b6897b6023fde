"""Matmul-like ops: ``matmul``, ``linear``, ``einsum``, ``conv``, ``conv_transpose``.

They multiply fp16-valued operands in float32 (BLAS) and the interpreter rounds
the result once: the ANE accumulates these in higher precision than it stores.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from anekit.ops import kernels
from anekit.ops.conv import conv_geometry
from anekit.ops.defs._util import errstate, out_shape, per_channel
from anekit.ops.groups import MATMUL_LIKE
from anekit.ops.limits import MATMUL_SATURATION
from anekit.ops.lowering import Lowering, NotLowerable, shape_of
from anekit.ops.registry import OpContext, cliff, lowers, register


def _is_float32(a: Any) -> bool:
    return np.asarray(a).dtype == np.float32


def _swap_last(a: Any) -> Any:
    return np.swapaxes(a, -1, -2) if np.ndim(a) >= 2 else a


@register("matmul")
def matmul(ctx: OpContext, x: Any, y: Any, transpose_x: Any, transpose_y: Any) -> Any:
    a = _swap_last(x) if transpose_x else x
    b = _swap_last(y) if transpose_y else y
    if not (_is_float32(a) and _is_float32(b)):
        return np.matmul(a, b)
    ctx.stored = ctx.numerics.fp16
    with errstate():
        return kernels.matmul(a, b, rounded=ctx.numerics.fp16)


@register("linear")
def linear(ctx: OpContext, x: Any, weight: Any, bias: Any) -> Any:
    x = np.asarray(x, np.float32)
    ctx.stored = ctx.numerics.fp16
    with errstate():
        # One 2-D GEMM over all leading axes; the bias is added before the one rounding.
        flat = x.reshape(-1, x.shape[-1])
        result = kernels.gemm_bt(
            flat, np.asarray(weight, np.float32), bias, rounded=ctx.numerics.fp16
        )
        return result.reshape(*x.shape[:-1], result.shape[-1])


@register("einsum")
def einsum(ctx: OpContext, values: Any, equation: Any) -> Any:
    with errstate():
        return np.einsum(str(equation), *values, optimize=True)


@register("conv")
def conv(
    ctx: OpContext,
    x: Any,
    weight: Any,
    bias: Any = None,
    *,
    strides: Any,
    pad_type: Any,
    pad: Any,
    dilations: Any,
    groups: Any,
) -> Any:
    x = np.asarray(x)
    weight = np.asarray(weight)
    spatial_rank = x.ndim - 2
    kernel = tuple(weight.shape[2:])
    stride, dilation, padding = conv_geometry(
        tuple(x.shape[2:]), kernel, strides, dilations, pad_type, pad
    )
    groups = int(groups)
    with errstate():
        unpadded = not any(a or b for a, b in padding)
        pointwise = all(k == 1 for k in kernel) and all(s == 1 for s in stride) and unpadded
        if pointwise and groups == 1:
            # The ANE's linear layer: one BLAS matmul over channels.
            flat = x.reshape(x.shape[0], x.shape[1], -1)
            result = kernels.matmul(weight.reshape(weight.shape[0], -1), flat).reshape(
                x.shape[0], weight.shape[0], *x.shape[2:]
            )
        else:
            padded = np.pad(x, [(0, 0), (0, 0), *padding])
            extents = tuple((k - 1) * d + 1 for k, d in zip(kernel, dilation, strict=True))
            windows = sliding_window_view(padded, extents, axis=tuple(range(2, x.ndim)))  # type: ignore[call-overload]
            strided = windows[(slice(None), slice(None), *(slice(None, None, s) for s in stride))]
            strided = strided[(Ellipsis, *(slice(None, None, d) for d in dilation))]
            # strided: (N, C_in, *out_spatial, *kernel)
            in_per_group = x.shape[1] // groups
            out_per_group = weight.shape[0] // groups
            parts = []
            kernel_axes = tuple(range(2 + spatial_rank, 2 + 2 * spatial_rank))
            for group in range(groups):
                patch = strided[:, group * in_per_group : (group + 1) * in_per_group]
                w = weight[group * out_per_group : (group + 1) * out_per_group]
                # contract channels and kernel positions
                contracted = np.tensordot(
                    patch, w, axes=([1, *kernel_axes], [1, *range(2, 2 + spatial_rank)])
                )
                parts.append(np.moveaxis(contracted, -1, 1))
            result = np.concatenate(parts, axis=1) if groups > 1 else parts[0]
        if bias is not None:
            result = result + per_channel(bias, x)
    return result


@register("conv_transpose")
def conv_transpose(
    ctx: OpContext,
    x: Any,
    weight: Any,
    bias: Any = None,
    output_shape: Any = None,
    *,
    pad: Any,
    pad_type: Any,
    strides: Any,
    dilations: Any,
    groups: Any,
) -> Any:
    x = np.asarray(x)
    weight = np.asarray(weight)  # (C_in, C_out / groups, *kernel)
    spatial_rank = x.ndim - 2
    kernel = tuple(weight.shape[2:])
    in_spatial = x.shape[2:]
    stride, dilation, _ = conv_geometry(in_spatial, kernel, strides, dilations)
    groups = int(groups)
    full = [
        (n - 1) * s + (k - 1) * d + 1
        for n, s, k, d in zip(in_spatial, stride, kernel, dilation, strict=True)
    ]
    in_per_group = x.shape[1] // groups
    out_per_group = weight.shape[1]
    result = np.zeros((x.shape[0], out_per_group * groups, *full), np.float32)
    with errstate():
        for group in range(groups):
            xs = x[:, group * in_per_group : (group + 1) * in_per_group]
            ws = weight[group * in_per_group : (group + 1) * in_per_group]
            channels = slice(group * out_per_group, (group + 1) * out_per_group)
            for offsets in itertools.product(*(range(k) for k in kernel)):
                contribution = np.tensordot(xs, ws[:, :, *offsets], axes=([1], [0]))
                target = tuple(
                    slice(o * d, o * d + (n - 1) * s + 1, s)
                    for o, d, n, s in zip(offsets, dilation, in_spatial, stride, strict=True)
                )
                result[:, channels, *target] += np.moveaxis(contribution, -1, 1)
    # MIL's type inference declares the size (output_shape, else from pad_type); the
    # full result is cropped from pad[2i] (custom), half the excess (same, the odd one
    # cropped at the end, as TF) or 0 (valid), and extended with zeros where the
    # declared size reaches past it (TF's output_shape, PyTorch's output_padding).
    declared = out_shape(ctx)
    wanted = list(declared[2:]) if declared else full
    if str(pad_type) == "custom":
        begins = [int(v) for v in np.asarray(pad).reshape(-1)[: 2 * spatial_rank : 2]]
    elif str(pad_type) == "same":
        begins = [max(f - w, 0) // 2 for f, w in zip(full, wanted, strict=True)]
    else:
        begins = [0] * spatial_rank
    widths = [(max(-b, 0), max(b + w - f, 0)) for b, w, f in zip(begins, wanted, full, strict=True)]
    result = np.pad(result, [(0, 0), (0, 0), *widths])
    crop = tuple(
        slice(b + lo, b + lo + w) for b, (lo, _), w in zip(begins, widths, wanted, strict=True)
    )
    result = result[(slice(None), slice(None), *crop)]
    if bias is not None:
        result = result + per_channel(bias, x)
    return result


# -- ONNX lowerings --------------------------------------------------------------


@lowers("matmul")
def _matmul(low: Lowering, op: Any) -> list[str]:
    x, y = low.float_value(op.x), low.float_value(op.y)
    if len(shape_of(op.x)) < 2 or len(shape_of(op.y)) < 2:
        raise NotLowerable("matmul of a rank-1 operand")

    def transposed(value: str, name: str, var: Any) -> str:
        if not bool(low.param(op, name)):
            return value
        rank = len(shape_of(var))
        return low.node("Transpose", value, perm=[*range(rank - 2), rank - 1, rank - 2])

    x, y = transposed(x, "transpose_x", op.x), transposed(y, "transpose_y", op.y)
    return [low.node("MatMul", x, y)]


def _weighted(low: Lowering, x: str, weight: np.ndarray, op: Any) -> list[str]:
    """The inputs of a Gemm or Conv: ``x``, the weight and the op's bias (unless it is
    absent) as stored."""
    inputs = [x, low.graph.constant(weight, np.float32)]
    bias = low.param(op, "bias")
    if bias is not None:
        stored = low.numerics.store(np.asarray(bias, np.float32), np.dtype(np.float32))
        inputs.append(low.graph.constant(np.asarray(stored), np.float32))
    return inputs


@lowers("linear")
def _linear(low: Lowering, op: Any) -> list[str]:
    x = low.float_value(op.x)
    shape = shape_of(op.x)
    inputs = _weighted(low, x, low.weight(op.weight), op)
    if len(shape) != 2:
        # One GEMM over all leading axes, bias fused, as the interpreter does.
        inputs[0] = low.node("Reshape", x, low.constant([-1, shape[-1]]))
    product = low.node("Gemm", *inputs, transB=1)
    if len(shape) != 2:
        product = low.node("Reshape", product, low.constant(list(shape_of(op.outputs[0]))))
    return [product]


# -- Core AI lowerings (anekit.package.coreai) -----------------------------------------


@lowers("matmul", target="coreai")
def _matmul_coreai(ai: Any, op: Any) -> Any:
    if len(shape_of(op.x)) < 2 or len(shape_of(op.y)) < 2:
        raise NotLowerable("matmul of a rank-1 operand")

    def transposed(var: Any, name: str) -> Any:
        value = ai.value(var)
        if not bool(ai.param(op, name)):
            return value
        rank = len(shape_of(var))
        return ai.ai.transpose(value, np.asarray([*range(rank - 2), rank - 1, rank - 2], np.uint32))

    x, y = transposed(op.x, "transpose_x"), transposed(op.y, "transpose_y")
    return ai.ai.broadcasting_batch_matmul(x, y)


@lowers("linear", target="coreai")
def _linear_coreai(ai: Any, op: Any) -> Any:
    weight = ai.value(op.weight)  # (out, in): a constant, or a dequantized weight
    product = ai.ai.broadcasting_batch_matmul(
        ai.value(op.x), ai.ai.transpose(weight, np.asarray([1, 0], np.uint32))
    )
    bias = op.inputs.get("bias")  # absent: MIL's default, zeros
    return product if bias is None else ai.ai.broadcasting_add(product, ai.value(bias))


@lowers("conv", target="coreai")
def _conv_coreai(ai: Any, op: Any) -> Any:
    """A 2-D convolution: its padding (Core AI's ``conv2d`` takes none) a ``pad`` of
    zeros before it, as MIL's ``pad_type`` defines it; the bias added after."""
    shape = shape_of(op.x)
    if len(shape) != 4:
        raise NotLowerable(f"a {len(shape) - 2}-D convolution (conv2d only)")
    arguments = {name: ai.param(op, name) for name in ("strides", "dilations", "pad_type", "pad")}
    strides, dilations, padding = conv_geometry(shape[2:], shape_of(op.weight)[2:], **arguments)
    x = ai.value(op.x)
    if any(begin or end for begin, end in padding):
        pads = [0, 0, 0, 0] + [size for pair in padding for size in pair]
        x = ai.ai.pad(x, np.asarray(pads, np.uint32), ai.scalar(0, op.x))
    groups = np.int32(ai.param(op, "groups"))
    result = ai.ai.conv2d(
        x, ai.value(op.weight), np.asarray(strides, np.int32), np.asarray(dilations, np.int32),
        groups,
    )  # fmt: skip
    if op.inputs.get("bias") is None:
        return result
    bias = ai.ai.reshape(ai.value(op.bias), np.asarray([1, shape_of(op.bias)[0], 1, 1], np.int32))
    return ai.ai.broadcasting_add(result, bias)


@lowers("conv")
def _conv(low: Lowering, op: Any) -> list[str]:
    x = low.float_value(op.x)
    weight = low.weight(op.weight)
    arguments = {name: low.param(op, name) for name in ("strides", "dilations", "pad_type", "pad")}
    strides, dilations, padding = conv_geometry(
        shape_of(op.x)[2:], tuple(weight.shape[2:]), **arguments
    )
    pads = [begin for begin, _ in padding] + [end for _, end in padding]
    groups = int(low.param(op, "groups"))
    inputs = _weighted(low, x, weight, op)
    conv = low.node("Conv", *inputs, strides=strides, dilations=dilations, pads=pads, group=groups)
    return [conv]


# -- numeric cliffs ------------------------------------------------------------------


@cliff(*MATMUL_LIKE, rule="ane.matmul_saturation")
def _matmul_saturation(op: Any, inputs: Mapping[str, Any], max_abs: float) -> list[str]:
    if max_abs <= MATMUL_SATURATION:
        return []
    return [
        f"output reaches {max_abs:.6g}, above {MATMUL_SATURATION:g} "
        "where ANE matmuls saturate to inf"
    ]
