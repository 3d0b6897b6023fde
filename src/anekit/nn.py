"""Neural-network helpers that work on NumPy arrays and trace to native MIL ops.

Each function computes with NumPy when given plain arrays (the fp32 reference)
and, when any argument is traced, emits the native MIL op where one exists
(``softmax``, ``layer_norm``, ``gelu``, ``silu``, ``erf``, ``conv``, ``linear``)
or its expansion into primitive ops otherwise (``rms_norm``; ``linear`` and
``conv1x1`` with traced weights). Computation happens in the dtype of ``x``;
weights given as arrays are cast to it, as in PyTorch modules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from anekit import dtypes
from anekit.errors import ShapeError, TraceError
from anekit.ops import composites
from anekit.ops.spaces import NumpySpace
from anekit.trace import primitives as P
from anekit.trace.context import current
from anekit.trace.indexing import gather
from anekit.trace.source import user_location
from anekit.trace.tracer import Tracer

__all__ = [
    "conv1x1",
    "conv2d",
    "embedding",
    "erf",
    "gelu",
    "layer_norm",
    "linear",
    "relu",
    "rms_norm",
    "sigmoid",
    "silu",
    "softmax",
]

Array = Any  # an ndarray or a Tracer


def _float_input(x: Any, what: str) -> Any:
    """``x`` as a floating array (tracer or ndarray); integers are refused."""
    if isinstance(x, Tracer):
        if not dtypes.is_float(x.dtype):
            raise TraceError(
                f"anekit.nn.{what} needs a float16 or float32 input, got {x.dtype}",
                location=user_location(),
            )
        return x
    array = np.asarray(x)
    if array.dtype.kind != "f":
        raise TypeError(f"anekit.nn.{what} needs a floating-point input, got {array.dtype}")
    return array


def _constant(value: Any, dtype: np.dtype[Any]) -> Any:
    """A weight cast to the compute dtype (a traced weight stays traced)."""
    if value is None or isinstance(value, Tracer):
        return value if value is None else P.cast(value, dtype)
    return np.asarray(value).astype(dtype, copy=False)


def _tracer_of(value: Any, dtype: np.dtype[Any]) -> Tracer:
    """A weight or input as a traced array; a constant becomes a ``const`` of ``dtype``."""
    if isinstance(value, Tracer):
        return value
    return P.constant(current(), value, dtype)


def _weight_inputs(x: Tracer, **weights: Any) -> dict[str, Any]:
    """MIL inputs: ``x`` and the given weights (all but ``None``) as constants of its dtype.

    The caller's arrays (not the dtype-cast copies) keep the user's names in MIL.
    """
    ctx = P.context_of([x])
    inputs = {"x": x._var}
    for name, value in weights.items():
        if value is not None:
            inputs[name] = ctx.constant(np.asarray(value), x.dtype)
    return inputs


def _check_bias(bias: Any, out_features: int, what: str) -> None:
    if bias is not None and tuple(bias.shape) != (out_features,):
        raise ShapeError(
            f"anekit.nn.{what}: bias must have shape ({out_features},), got {tuple(bias.shape)}",
            location=user_location(),
        )


# -- activations ----------------------------------------------------------------------


def softmax(x: Array, axis: int = -1) -> Array:
    """``exp(x) / sum(exp(x))`` along ``axis`` (max-subtracted); MIL ``softmax``."""
    x = _float_input(x, "softmax")
    if isinstance(x, Tracer):
        return P.unary("softmax", x, axis=P.normalize_axis(axis, x.ndim, "softmax"))
    result = composites.softmax(NumpySpace(dtype=x.dtype), x, axis % x.ndim)
    return np.asarray(result, x.dtype)


def silu(x: Array) -> Array:
    """``x * sigmoid(x)``; MIL ``silu``."""
    x = _float_input(x, "silu")
    if isinstance(x, Tracer):
        return P.unary("silu", x)
    return x * sigmoid(x)


def sigmoid(x: Array) -> Array:
    """``1 / (1 + exp(-x))``; MIL ``sigmoid``."""
    x = _float_input(x, "sigmoid")
    if isinstance(x, Tracer):
        return P.unary("sigmoid", x)
    with np.errstate(over="ignore"):
        return (1 / (1 + np.exp(-x))).astype(x.dtype, copy=False)


def relu(x: Array) -> Array:
    """``max(x, 0)``; MIL ``relu``."""
    x = _float_input(x, "relu")
    if isinstance(x, Tracer):
        return P.unary("relu", x)
    return np.maximum(x, 0).astype(x.dtype, copy=False)


def erf(x: Array) -> Array:
    """The error function; MIL ``erf``. The NumPy path uses SciPy's (in float64)."""
    from scipy.special import erf as scipy_erf

    x = _float_input(x, "erf")
    if isinstance(x, Tracer):
        return P.unary("erf", x)
    return np.asarray(scipy_erf(x.astype(np.float64))).astype(x.dtype)


def gelu(x: Array, approximate: Literal["none", "tanh"] = "none") -> Array:
    """GELU: exact ``x * Φ(x)`` (``approximate="none"``) or the tanh form.

    MIL ``gelu`` with mode ``EXACT`` or ``TANH_APPROXIMATION``. The names follow
    ``torch.nn.functional.gelu``.
    """
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    x = _float_input(x, "gelu")
    mode = "EXACT" if approximate == "none" else "TANH_APPROXIMATION"
    if isinstance(x, Tracer):
        return P.unary("gelu", x, mode=mode)
    wide = NumpySpace(dtype=np.float64)
    return np.asarray(composites.gelu(wide, x.astype(np.float64), mode)).astype(x.dtype)


# -- normalization --------------------------------------------------------------------


def _norm_axes(x: Any, axis: int | Sequence[int], what: str, **params: Any) -> tuple[int, ...]:
    """The normalized axes of ``x``; each weight in ``params`` must have their shape."""
    if isinstance(x, Tracer):
        axes = P.normalize_axes(axis, x.ndim, what)
    else:
        items = (axis,) if isinstance(axis, int) else tuple(axis)
        axes = tuple(sorted(item % x.ndim for item in items))
    expected = tuple(x.shape[axis] for axis in axes)
    for name, param in params.items():
        if param is not None and tuple(P.shape_of(param)) != expected:
            raise ShapeError(
                f"anekit.nn.{what}: {name} must have shape {expected} (the normalized axes of "
                f"x {tuple(x.shape)}), got {tuple(P.shape_of(param))}",
                location=user_location(),
            )
    return axes


def _param_view(param: Any, x: Any, axes: tuple[int, ...]) -> Any:
    """A weight of the normalized axes' shape, reshaped to broadcast against ``x``."""
    shape = [x.shape[axis] if axis in axes else 1 for axis in range(x.ndim)]
    if isinstance(param, Tracer):
        return P.reshape(param, shape)
    return np.asarray(param).reshape(shape)


def layer_norm(
    x: Array,
    weight: Array | None = None,
    bias: Array | None = None,
    *,
    axis: int | Sequence[int] = -1,
    eps: float = 1e-5,
) -> Array:
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over ``axis``; MIL ``layer_norm``.

    ``weight`` and ``bias`` have the shape of the normalized axes.
    """
    x = _float_input(x, "layer_norm")
    axes = _norm_axes(x, axis, "layer_norm", weight=weight, bias=bias)
    gamma, beta = _constant(weight, x.dtype), _constant(bias, x.dtype)
    if isinstance(x, Tracer) and not P.any_tracer((gamma, beta)):
        inputs = _weight_inputs(x, gamma=weight, beta=bias)
        result = P.emit("layer_norm", [x], **inputs, axes=list(axes), epsilon=x.dtype.type(eps))
        return P.expect(result, x.dtype, x.shape)
    space = NumpySpace(dtype=x.dtype)
    count = int(np.prod([x.shape[axis] for axis in axes], dtype=np.int64))
    normalized, _ = composites.normalize(space, x, axes, count, eps)
    gamma_view = None if gamma is None else _param_view(gamma, x, axes)
    beta_view = None if beta is None else _param_view(beta, x, axes)
    return np.asarray(composites.affine(space, normalized, gamma_view, beta_view), x.dtype)


def rms_norm(
    x: Array,
    weight: Array | None = None,
    *,
    axis: int | Sequence[int] = -1,
    eps: float = 1e-6,
) -> Array:
    """``x / sqrt(mean(x²) + eps) * weight`` over ``axis``.

    MIL has no RMSNorm op: traced, this is ``mul``, ``reduce_mean``, ``rsqrt``
    (with ``eps`` as its epsilon) and ``mul``.
    """
    x = _float_input(x, "rms_norm")
    axes = _norm_axes(x, axis, "rms_norm", weight=weight)
    gamma = _constant(weight, x.dtype)
    if isinstance(x, Tracer):
        squares = P.binary("mul", x, x, x.dtype, x.dtype)
        mean_square = P.reduce("reduce_mean", squares, axes, True)
        scale = P.unary("rsqrt", mean_square, epsilon=x.dtype.type(eps))
        result = P.binary("mul", x, scale, x.dtype, x.dtype)
        if gamma is not None:
            gamma_view = _tracer_of(_param_view(gamma, x, axes), x.dtype)
            result = P.binary("mul", result, gamma_view, x.dtype, x.dtype)
        return result
    mean_square = np.mean(x * x, axis=axes, keepdims=True)
    result = x / np.sqrt(mean_square + x.dtype.type(eps))
    if gamma is not None:
        result = result * _param_view(gamma, x, axes)
    return result


# -- lookups ------------------------------------------------------------------------


def embedding(ids: Array, table: Array) -> Array:
    """``table[ids]``: rows of ``table`` picked by integer ``ids``; MIL ``gather``.

    NumPy does not let a traced index reach a constant table (``table[ids]`` asks
    for the concrete index), so traced code spells the lookup this way. Note that
    ``gather`` does not run on the ANE: anekit's models do lookups on the host.
    """
    if not P.any_tracer((ids, table)):
        return np.asarray(table)[np.asarray(ids)]
    ctx = P.context_of([ids, table])
    if not isinstance(table, Tracer):
        array = np.asarray(table)
        table = P.constant(ctx, array, P.canonical(array.dtype, "embedding"))
    return gather(table, ids, 0)


# -- linear layers -------------------------------------------------------------------


def linear(x: Array, weight: Array, bias: Array | None = None) -> Array:
    """``x @ weight.T + bias`` with ``weight`` of shape (out, in), as ``torch.nn.Linear``.

    Traced with a constant weight and ``x`` of rank 1 to 3 this is MIL ``linear``;
    otherwise ``matmul`` and ``add``.
    """
    x = _float_input(x, "linear")
    w = _constant(weight, x.dtype)
    b = _constant(bias, x.dtype)
    if w.ndim != 2 or w.shape[1] != x.shape[-1]:
        raise ShapeError(
            f"anekit.nn.linear: weight must have shape (out, {x.shape[-1]}), got {tuple(w.shape)}",
            location=user_location(),
        )
    _check_bias(b, w.shape[0], "linear")
    if isinstance(x, Tracer) and not P.any_tracer((w, b)) and 1 <= x.ndim <= 3:
        inputs = _weight_inputs(x, weight=weight, bias=bias)
        return P.expect(P.emit("linear", [x], **inputs), x.dtype, (*x.shape[:-1], w.shape[0]))
    if P.any_tracer((x, w, b)):
        P.context_of([x, w, b])
        tx = _tracer_of(x, x.dtype)
        product = P.matmul(tx, P.transpose(_tracer_of(w, x.dtype), (1, 0)))
        if b is None:
            return product
        return P.binary("add", product, _tracer_of(b, x.dtype), product.dtype, product.dtype)
    result = x @ w.T
    return result if b is None else result + b


def conv1x1(x: Array, weight: Array, bias: Array | None = None) -> Array:
    """A 1×1 convolution over (B, C, H, W), the ANE's linear layer on (B, C, 1, S).

    ``weight`` is (C_out, C_in) or (C_out, C_in, 1, 1). Traced with a constant
    weight this is MIL ``conv``; with a traced weight, ``matmul`` over channels.
    """
    x = _float_input(x, "conv1x1")
    w = _constant(weight, x.dtype)
    b = _constant(bias, x.dtype)
    if x.ndim != 4:
        raise ShapeError(
            f"anekit.nn.conv1x1: x must be (B, C, H, W), got shape {tuple(x.shape)}",
            location=user_location(),
        )
    if w.ndim == 4:
        if tuple(w.shape[2:]) != (1, 1):
            raise ShapeError(
                f"anekit.nn.conv1x1: weight must be (C_out, C_in, 1, 1), got {tuple(w.shape)}",
                location=user_location(),
            )
        w = w.reshape(w.shape[0], w.shape[1])
    if w.ndim != 2 or w.shape[1] != x.shape[1]:
        raise ShapeError(
            f"anekit.nn.conv1x1: weight must be (C_out, {x.shape[1]}), got {tuple(w.shape)}",
            location=user_location(),
        )
    _check_bias(b, w.shape[0], "conv1x1")
    batch, _, height, width = x.shape
    out_channels = w.shape[0]
    if isinstance(x, Tracer) and not P.any_tracer((w, b)):
        kernel = np.asarray(weight)
        kernel = kernel if kernel.ndim == 4 else kernel[:, :, None, None]
        inputs = _weight_inputs(x, weight=kernel, bias=bias)
        conv = P.emit(
            "conv", [x], **inputs, strides=[1, 1], pad_type="valid", dilations=[1, 1], groups=1
        )
        return P.expect(conv, x.dtype, (batch, out_channels, height, width))
    if P.any_tracer((x, w, b)):
        P.context_of([x, w, b])
        flat = P.reshape(_tracer_of(x, x.dtype), (batch, x.shape[1], height * width))
        product = P.matmul(_tracer_of(w, x.dtype), flat)
        result = P.reshape(product, (batch, out_channels, height, width))
        if b is None:
            return result
        bias_view = P.reshape(_tracer_of(b, x.dtype), (1, out_channels, 1, 1))
        return P.binary("add", result, bias_view, result.dtype, result.dtype)
    rows = np.asarray(x).reshape(batch, x.shape[1], height * width)
    result = np.matmul(w, rows).reshape(batch, out_channels, height, width)
    return result if b is None else result + b.reshape(1, -1, 1, 1)


def conv2d(
    x: Array,
    weight: Any,
    bias: Any = None,
    *,
    stride: tuple[int, int] = (1, 1),
    padding: tuple[int, int] = (0, 0),
) -> Array:
    """A 2-D convolution over (B, C, H, W) with a constant ``weight`` (C_out, C_in, kH,
    kW): MIL ``conv`` (custom padding ``padding`` = (pad H, pad W) on both sides,
    ``stride``), which the ANE runs. On (B, C, 1, T) with a (1, k) kernel it is the
    ANE form of a 1-D convolution (Whisper's front end)."""
    x = _float_input(x, "conv2d")
    if P.any_tracer((weight, bias)):
        raise TraceError("anekit.nn.conv2d: weight and bias must be constants (NumPy arrays)")
    kernel = np.asarray(weight)
    if x.ndim != 4 or kernel.ndim != 4 or kernel.shape[1] != x.shape[1]:
        raise ShapeError(
            f"anekit.nn.conv2d: x (B, C, H, W) and weight (C_out, {x.shape[1]}, kH, kW) "
            f"expected, got {tuple(x.shape)} and {tuple(kernel.shape)}",
            location=user_location(),
        )
    _check_bias(_constant(bias, x.dtype), kernel.shape[0], "conv2d")
    (sh, sw), (ph, pw) = stride, padding
    _, _, height, width = x.shape
    out_h = (height + 2 * ph - kernel.shape[2]) // sh + 1
    out_w = (width + 2 * pw - kernel.shape[3]) // sw + 1
    if isinstance(x, Tracer):
        inputs = _weight_inputs(x, weight=kernel, bias=bias)
        conv = P.emit(
            "conv", [x], **inputs, strides=[sh, sw], pad_type="custom",
            pad=[ph, ph, pw, pw], dilations=[1, 1], groups=1,
        )  # fmt: skip
        return P.expect(conv, x.dtype, (x.shape[0], kernel.shape[0], out_h, out_w))
    padded = np.pad(np.asarray(x), ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    window = (1, 1, int(kernel.shape[2]), int(kernel.shape[3]))
    windows = np.lib.stride_tricks.sliding_window_view(padded, window)[:, :, :, :, 0, 0]
    windows = windows[:, :, ::sh, ::sw][:, :, :out_h, :out_w]  # (B, C, H', W', kH, kW)
    result = np.einsum("bchwij,ocij->bohw", windows, kernel.astype(x.dtype), optimize=True)
    result = result.astype(x.dtype, copy=False)
    return result if bias is None else result + np.asarray(bias, x.dtype).reshape(1, -1, 1, 1)
