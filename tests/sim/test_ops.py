"""Per-op unit tests of the MIL simulator against NumPy references.

Every row of ``RECORDS`` is one MIL op on concrete inputs, built by ``sim.run_op``
into a one-op program and simulated. It is checked twice:

- with ``numerics="fp32"`` against a float64 NumPy reference (tolerance per row);
- with ``numerics="ane"`` (rows whose result is one rounding of the exact value:
  elementwise, matmul-like, layout ops) against the reference computed from the
  fp16-rounded inputs and rounded to fp16 itself, within one fp16 ulp.

The references are written from MIL's op documentation (coremltools'
``mil/ops/defs``), independently of the simulator's code. Rows marked ``xfail``
document simulator bugs: they state MIL's behaviour and fail until it is fixed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any
from unittest import mock

import numpy as np
import pytest

from anekit import sim
from anekit.sim import interpreter
from oprows import image, indexing, recurrent, space
from oprows.image import (  # noqa: F401  (the tests of image.py and space.py run here)
    test_affine_modes_coremltools_refuses_to_build,
    test_affine_padding_value_pads_when_called_directly,
    test_affine_simulator_refuses_other_modes,
)
from oprows.space import (  # noqa: F401
    test_block_shape_of_length_one_coremltools_refuses_to_build,
    test_invalid_geometry_is_a_program_error,
    test_one_block_axis_is_tensorflows_when_called_directly,
    test_space_to_batch_of_a_size_the_block_does_not_divide_is_a_program_error,
    test_space_to_batch_then_batch_to_space_is_identity,
)
from oprows.table import (
    ACCUM,
    F16,
    F32,
    I32,
    TRANS,
    Gen,
    OpRecord,
    Ref,
    bools,
    const,
    divisors,
    f16,
    f32,
    fixed,
    halves,
    int_divisors,
    ints,
    normal,
    op_record,
    shape_tag,
    small,
    uniform,
)
from oprows.windows import paddings, pool

RECORDS: list[OpRecord] = []

# --- 1. elementwise binary ---------------------------------------------------

BROADCAST_SHAPES: list[tuple[tuple[int, ...], tuple[int, ...]]] = [
    ((3, 4), (3, 4)),
    ((3, 1, 4), (2, 4)),
    ((5,), (2, 3, 5)),
    ((1,), (2, 3)),
    ((2, 3), (1,)),
    ((4, 1), (1, 5)),
    ((1, 1), (1, 1)),
    ((1, 2, 1, 3, 1), (2, 1, 3, 1, 4)),
]

FLOAT_BINARY: list[tuple[str, Ref]] = [
    ("add", np.add),
    ("sub", np.subtract),
    ("mul", np.multiply),
    ("maximum", np.maximum),
    ("minimum", np.minimum),
]
for _op, _ref in FLOAT_BINARY:
    for _sx, _sy in BROADCAST_SHAPES:
        RECORDS.append(
            op_record(_op, _ref, normal(*_sx), normal(*_sy), tag="f32-" + shape_tag(_sx, _sy))
        )

for _sx, _sy in BROADCAST_SHAPES[:6]:
    _tag = shape_tag(_sx, _sy)
    RECORDS += [
        op_record(
            "real_div",
            np.true_divide,
            normal(*_sx),
            uniform(0.5, 2.0, *_sy),
            tag="f32-" + _tag,
        ),
        op_record("floor_div", np.floor_divide, halves(*_sx), divisors(*_sy), tag="f32-" + _tag),
        op_record("mod", np.mod, halves(*_sx), divisors(*_sy), tag="f32-" + _tag),
        op_record(
            "pow",
            np.power,
            uniform(0.5, 2.0, *_sx),
            uniform(-2, 2, *_sy),
            tag="f32-" + _tag,
            **TRANS,
        ),
    ]

RECORDS += [
    op_record("real_div", np.true_divide, normal(2, 3), fixed([-0.25]), tag="negative-scalar"),
    op_record(
        "mod",
        np.mod,
        fixed([-3.5, 3.5, -3.5, 3.5, 0.0]),
        fixed([2.0, -2.0, -2.0, 2.0, 3.0]),
        tag="signs-follow-divisor",
    ),
    op_record(
        "floor_div",
        np.floor_divide,
        fixed([-7.0, 7.0, -7.0, 6.0]),
        fixed([2.0, -2.0, -2.0, 3.0]),
        tag="rounds-down",
    ),
    op_record(
        "pow", np.power, fixed([2.0, -2.0, 0.0, 9.0]), fixed([3.0, 2.0, 0.0, 0.5]), tag="exact"
    ),
]

INT_BINARY: list[tuple[str, Ref, Gen]] = [
    ("add", np.add, ints(-50, 50, 2, 3)),
    ("sub", np.subtract, ints(-50, 50, 2, 3)),
    ("mul", np.multiply, ints(-50, 50, 2, 3)),
    ("maximum", np.maximum, ints(-50, 50, 2, 3)),
    ("minimum", np.minimum, ints(-50, 50, 2, 3)),
    ("floor_div", np.floor_divide, int_divisors(2, 3)),
    ("mod", np.mod, int_divisors(2, 3)),
]
for _op, _ref, _gen in INT_BINARY:
    RECORDS.append(op_record(_op, _ref, ints(-50, 50, 4, 1, 3), _gen, tag="i32-4x1x3_2x3"))
RECORDS.append(op_record("pow", np.power, ints(-4, 5, 2, 3), ints(0, 4, 3), tag="i32-2x3_3"))

COMPARISONS: list[tuple[str, Ref]] = [
    ("equal", np.equal),
    ("not_equal", np.not_equal),
    ("greater", np.greater),
    ("greater_equal", np.greater_equal),
    ("less", np.less),
    ("less_equal", np.less_equal),
]
for _op, _ref in COMPARISONS:
    RECORDS += [
        op_record(_op, _ref, small(3, 4), small(3, 4), tag="f32-ties"),
        op_record(_op, _ref, small(3, 1, 4), small(2, 4), tag="f32-3x1x4_2x4"),
        op_record(_op, _ref, small(1), small(2, 3), tag="f32-1_2x3"),
        op_record(_op, _ref, ints(-2, 3, 5), ints(-2, 3, 2, 3, 5), tag="i32-5_2x3x5"),
    ]

for _op, _ref in [
    ("logical_and", np.logical_and),
    ("logical_or", np.logical_or),
    ("logical_xor", np.logical_xor),
]:
    RECORDS += [
        op_record(_op, _ref, bools(3, 4), bools(3, 4), tag="3x4"),
        op_record(_op, _ref, bools(3, 1, 4), bools(2, 4), tag="3x1x4_2x4"),
        op_record(_op, _ref, bools(1), bools(2, 3), tag="1_2x3"),
        op_record(
            _op,
            _ref,
            fixed([True, True, False, False], bool),
            fixed([True, False, True, False], bool),
            tag="truth-table",
        ),
    ]

# --- 2. elementwise unary and activations -------------------------------------


def _vectorized(function: Callable[[float], float]) -> Ref:
    return lambda x: np.vectorize(function, otypes=[np.float64])(x)


def _sigmoid(x: Any) -> Any:
    return 1.0 / (1.0 + np.exp(-x))


def _softmax(x: Any, axis: int = -1) -> Any:
    shifted = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return shifted / np.sum(shifted, axis=axis, keepdims=True)


def _per_channel(param: Any, x: Any) -> Any:
    return np.reshape(param, (1, -1) + (1,) * (np.ndim(x) - 2))


def _gelu(x: Any, mode: str = "EXACT") -> Any:
    if mode == "TANH_APPROXIMATION":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    if mode == "SIGMOID_APPROXIMATION":
        return x * _sigmoid(1.702 * x)
    return x * 0.5 * (1 + _vectorized(math.erf)(x / math.sqrt(2)))


UNARY: list[tuple[str, Ref, Gen]] = [
    ("abs", np.abs, normal(3, 4)),
    ("exp", np.exp, normal(3, 4, scale=2)),
    ("exp2", np.exp2, normal(3, 4, scale=2)),
    ("sqrt", np.sqrt, uniform(0, 9, 3, 4)),
    ("square", np.square, normal(3, 4, scale=3)),
    ("tanh", np.tanh, normal(3, 4, scale=2)),
    ("sin", np.sin, normal(3, 4, scale=3)),
    ("cos", np.cos, normal(3, 4, scale=3)),
    ("tan", np.tan, uniform(-1.3, 1.3, 3, 4)),
    ("asin", np.arcsin, uniform(-0.99, 0.99, 3, 4)),
    ("acos", np.arccos, uniform(-0.99, 0.99, 3, 4)),
    ("atan", np.arctan, normal(3, 4, scale=3)),
    ("sinh", np.sinh, normal(3, 4, scale=2)),
    ("cosh", np.cosh, normal(3, 4, scale=2)),
    ("atanh", np.arctanh, uniform(-0.95, 0.95, 3, 4)),
    ("floor", np.floor, normal(3, 4, scale=4)),
    ("ceil", np.ceil, normal(3, 4, scale=4)),
    ("round", np.rint, normal(3, 4, scale=4)),
    ("sign", np.sign, small(3, 4)),
    ("erf", _vectorized(math.erf), normal(3, 4, scale=1.5)),
    ("relu", lambda x: np.maximum(x, 0), normal(3, 4)),
    ("relu6", lambda x: np.clip(x, 0, 6), normal(3, 4, scale=5)),
    ("sigmoid", _sigmoid, normal(3, 4, scale=3)),
    ("silu", lambda x: x * _sigmoid(x), normal(3, 4, scale=3)),
    ("softplus", lambda x: np.log1p(np.exp(x)), normal(3, 4, scale=3)),
    ("softsign", lambda x: x / (1 + np.abs(x)), normal(3, 4, scale=3)),
    ("identity", lambda x: x, normal(3, 4)),
]
for _op, _ref, _gen in UNARY:
    RECORDS.append(op_record(_op, _ref, _gen, tag="3x4", **TRANS))

RECORDS += [
    # edge shapes: size-1 dims, rank 1, rank 5
    op_record("exp", np.exp, normal(1), tag="1", **TRANS),
    op_record("tanh", np.tanh, normal(2, 1, 3, 1, 2), tag="rank5", **TRANS),
    op_record("relu", lambda x: np.maximum(x, 0), normal(1, 1, 1, 1, 1), tag="1x1x1x1x1"),
    op_record("sqrt", np.sqrt, uniform(0, 4, 7), tag="rank1", **TRANS),
    op_record("abs", np.abs, ints(-9, 9, 2, 3), tag="i32"),
    op_record("sign", np.sign, ints(-3, 3, 6), tag="i32"),
    op_record("square", np.square, ints(-9, 9, 2, 3), tag="i32"),
    op_record(
        "round",
        np.rint,
        fixed([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49, 2.51]),
        tag="ties-to-even",
    ),
    op_record("sign", np.sign, fixed([-2.0, -0.0, 0.0, 3.0]), tag="zeros"),
    op_record("floor", np.floor, fixed([-1.5, -1.0, -0.5, 0.5, 1.0]), tag="exact"),
    op_record("ceil", np.ceil, fixed([-1.5, -1.0, -0.5, 0.5, 1.0]), tag="exact"),
    op_record("logical_not", np.logical_not, bools(3, 4), tag="3x4"),
    # ops with epsilon
    op_record(
        "log",
        lambda x, epsilon=1e-45: np.log(x + epsilon),
        uniform(0.05, 5, 3, 4),
        tag="default-eps",
        **TRANS,
    ),
    op_record(
        "log",
        lambda x, epsilon: np.log(x + epsilon),
        uniform(0, 5, 3, 4),
        tag="eps",
        epsilon=F32(0.01),
        **TRANS,
    ),
    op_record(
        "rsqrt",
        lambda x, epsilon: 1 / np.sqrt(x + epsilon),
        uniform(0, 5, 3, 4),
        tag="eps",
        epsilon=F32(0.05),
        **TRANS,
    ),
    op_record(
        "rsqrt",
        lambda x, epsilon=1e-12: 1 / np.sqrt(x + epsilon),
        uniform(0.1, 5, 3, 4),
        tag="default-eps",
        **TRANS,
    ),
    op_record(
        "inverse",
        lambda x, epsilon: 1 / (x + epsilon),
        uniform(0.5, 3, 3, 4),
        tag="eps",
        epsilon=F32(0.25),
    ),
    op_record(
        "inverse",
        lambda x, epsilon=1e-4: 1 / (x + epsilon),
        fixed([-2.0, -0.5, 0.5, 4.0]),
        tag="default-eps",
    ),
    op_record(
        "threshold",
        lambda x, alpha: np.maximum(x, alpha),
        normal(3, 4),
        tag="alpha",
        alpha=F32(0.25),
    ),
    op_record(
        "clip",
        lambda x, alpha, beta: np.clip(x, alpha, beta),
        normal(3, 4, scale=2),
        tag="alpha-beta",
        alpha=F32(-0.5),
        beta=F32(1.25),
    ),
    # casts
    op_record(
        "cast",
        lambda x, dtype: np.trunc(x).astype(I32),
        normal(3, 4, scale=5),
        tag="fp32-to-int32-truncates",
        dtype="int32",
    ),
    op_record(
        "cast",
        lambda x, dtype: x,
        normal(3, 4, scale=5),
        tag="fp32-to-fp16",
        dtype="fp16",
    ),
    op_record(
        "cast",
        lambda x, dtype: x != 0,
        small(3, 4),
        tag="fp32-to-bool",
        dtype="bool",
    ),
    op_record(
        "cast",
        lambda x, dtype: x.astype(np.float64),
        ints(-100, 100, 3, 4),
        tag="int32-to-fp32",
        dtype="fp32",
    ),
    op_record(
        "cast",
        lambda x, dtype: x != 0,
        ints(-2, 3, 3, 4),
        tag="int32-to-bool",
        dtype="bool",
    ),
    op_record(
        "cast",
        lambda x, dtype: x.astype(I32),
        bools(3, 4),
        tag="bool-to-int32",
        dtype="int32",
    ),
    # activations with parameters
    op_record(
        "elu",
        lambda x, alpha: np.where(x > 0, x, alpha * (np.exp(x) - 1)),
        normal(3, 4, scale=2),
        alpha=F32(0.7),
        **TRANS,
    ),
    op_record(
        "leaky_relu",
        lambda x, alpha: np.where(x >= 0, x, alpha * x),
        normal(3, 4, scale=2),
        alpha=F32(0.1),
    ),
    op_record("gelu", _gelu, normal(3, 4, scale=2), tag="default", **TRANS),
    op_record("gelu", _gelu, normal(3, 4, scale=2), tag="EXACT", mode="EXACT", **TRANS),
    op_record(
        "gelu",
        _gelu,
        normal(3, 4, scale=2),
        tag="TANH_APPROXIMATION",
        mode="TANH_APPROXIMATION",
        **TRANS,
    ),
    op_record(
        "gelu",
        _gelu,
        normal(3, 4, scale=2),
        tag="SIGMOID_APPROXIMATION",
        mode="SIGMOID_APPROXIMATION",
        **TRANS,
    ),
    op_record(
        "linear_activation",
        lambda x, alpha, beta: alpha * x + beta,
        normal(3, 4),
        alpha=F32(-1.5),
        beta=F32(0.25),
    ),
    op_record(
        "scaled_tanh",
        lambda x, alpha, beta: alpha * np.tanh(beta * x),
        normal(3, 4),
        alpha=F32(1.5),
        beta=F32(0.75),
        **TRANS,
    ),
    op_record(
        "sigmoid_hard",
        lambda x, alpha, beta: np.clip(alpha * x + beta, 0, 1),
        normal(3, 4, scale=3),
        alpha=F32(0.2),
        beta=F32(0.5),
    ),
    op_record(
        "thresholded_relu",
        lambda x, alpha: np.where(x >= alpha, x, 0),
        normal(3, 4),
        tag="random",
        alpha=F32(0.3),
    ),
    op_record(
        "thresholded_relu",
        lambda x, alpha: np.where(x >= alpha, x, 0),
        fixed([0.5, 1.0, 2.0]),
        tag="x-equals-alpha",
        alpha=F32(1.0),
    ),
    op_record(
        "clamped_relu",
        lambda x, alpha, beta: np.minimum(np.where(x >= 0, x, alpha * x), beta),
        normal(3, 4, scale=4),
        alpha=F32(0.1),
        beta=F32(2.5),
    ),
    op_record(
        "prelu",
        lambda x, alpha: np.where(x > 0, x, _per_channel(alpha, x) * x),
        normal(2, 3, 4, 5),
        tag="rank4",
        alpha=f32([0.1, 0.2, 0.3]),
    ),
    op_record(
        "prelu",
        lambda x, alpha: np.where(x > 0, x, _per_channel(alpha, x) * x),
        normal(1, 2, 5),
        tag="rank3-uniform-alpha",  # rank 3 and 5 need equal alphas (MIL)
        alpha=f32([0.25, 0.25]),
    ),
    op_record(
        "softplus_parametric",
        lambda x, alpha, beta: _per_channel(alpha, x) * np.log1p(np.exp(_per_channel(beta, x) * x)),
        normal(2, 3, 4, 2),
        alpha=f32([0.5, 1.0, 2.0]),
        beta=f32([1.0, 0.5, 2.0]),
        **TRANS,
    ),
    # softmax: a composite (intermediates rounded in ane mode)
    op_record("softmax", _softmax, normal(3, 5, scale=3), tag="default-axis", ane=False, **TRANS),
    op_record(
        "softmax", _softmax, normal(2, 3, 4, scale=3), tag="axis0", axis=0, ane=False, **TRANS
    ),
    op_record(
        "softmax", _softmax, normal(2, 3, 4, scale=3), tag="axis-2", axis=-2, ane=False, **TRANS
    ),
    op_record("softmax", _softmax, normal(6, scale=3), tag="rank1", axis=0, ane=False, **TRANS),
    op_record(
        "softmax",
        _softmax,
        normal(2, 1, 3, 1, 4, scale=3),
        tag="rank5",
        axis=-1,
        ane=False,
        **TRANS,
    ),
]

# --- 3. reductions ----------------------------------------------------------


def _axes(axes: Any) -> tuple[int, ...] | None:
    return None if axes is None else tuple(int(a) for a in axes)


def _reduction(function: Callable[..., Any]) -> Ref:
    def ref(x: Any, axes: Any = None, keep_dims: bool = False) -> Any:
        result = np.asarray(function(x, axis=_axes(axes), keepdims=keep_dims))
        return result.astype(x.dtype) if x.dtype.kind == "i" else result

    return ref


def _l2(x: Any, axis: Any, keepdims: bool) -> Any:
    return np.sqrt(np.sum(x * x, axis=axis, keepdims=keepdims))


def _log_sum_exp(x: Any, axis: Any, keepdims: bool) -> Any:
    return np.log(np.sum(np.exp(x), axis=axis, keepdims=keepdims))


REDUCTIONS: list[tuple[str, Callable[..., Any], Callable[..., Gen], bool, dict[str, Any]]] = [
    ("reduce_sum", np.sum, normal, False, ACCUM),
    ("reduce_mean", np.mean, normal, False, ACCUM),
    ("reduce_max", np.max, normal, True, {}),
    ("reduce_min", np.min, normal, True, {}),
    ("reduce_prod", np.prod, lambda *s: uniform(0.5, 1.5, *s), True, ACCUM),
    (
        "reduce_l1_norm",
        lambda x, axis, keepdims: np.sum(np.abs(x), axis=axis, keepdims=keepdims),
        normal,
        False,
        ACCUM,
    ),
    ("reduce_l2_norm", _l2, normal, False, ACCUM),
    (
        "reduce_sum_square",
        lambda x, axis, keepdims: np.sum(x * x, axis=axis, keepdims=keepdims),
        normal,
        False,
        ACCUM,
    ),
    (
        "reduce_log_sum",
        lambda x, axis, keepdims: np.log(np.sum(x, axis=axis, keepdims=keepdims)),
        lambda *s: uniform(0.5, 2, *s),
        False,
        ACCUM,
    ),
    ("reduce_log_sum_exp", _log_sum_exp, normal, False, ACCUM),
]
REDUCTION_AXES: list[tuple[tuple[int, ...], list[int] | None, bool]] = [
    ((2, 3, 4), [1], False),
    ((2, 3, 4), [-1], True),
    ((2, 3, 4), [0, 2], False),
    ((2, 3, 4), [-3, -2], True),
    ((2, 3, 4), None, False),
    ((2, 3, 4), None, True),
    ((7,), [0], False),
    ((2, 1, 3, 1, 2), [1, -1], True),
]
for _op, _function, _make, _ane, _tol in REDUCTIONS:
    for _shape, _axes_value, _keep in REDUCTION_AXES:
        _attrs: dict[str, Any] = {"keep_dims": _keep}
        if _axes_value is not None:
            _attrs["axes"] = _axes_value
        RECORDS.append(
            op_record(
                _op,
                _reduction(_function),
                _make(*_shape),
                tag=f"{shape_tag(_shape)}-axes{_axes_value}-keep{_keep}".replace(" ", ""),
                ane=_ane,
                **_tol,
                **_attrs,
            )
        )

RECORDS += [
    op_record("reduce_sum", _reduction(np.sum), ints(-9, 9, 2, 3), tag="i32", axes=[1]),
    op_record("reduce_max", _reduction(np.max), ints(-9, 9, 2, 3), tag="i32", axes=[0]),
    op_record("reduce_min", _reduction(np.min), ints(-9, 9, 2, 3), tag="i32", axes=[-1]),
    op_record("reduce_prod", _reduction(np.prod), ints(-3, 4, 2, 3), tag="i32", axes=[1]),
]


def _arg(function: Callable[..., Any]) -> Ref:
    def ref(x: Any, axis: int = -1, keep_dims: bool = False) -> Any:
        result = function(x, axis=axis)
        return (np.expand_dims(result, axis) if keep_dims else result).astype(I32)

    return ref


for _op, _function in [("reduce_argmax", np.argmax), ("reduce_argmin", np.argmin)]:
    RECORDS += [
        op_record(_op, _arg(_function), normal(3, 4, 5), tag="default"),
        op_record(_op, _arg(_function), normal(3, 4, 5), tag="axis0", axis=0),
        op_record(_op, _arg(_function), normal(3, 4, 5), tag="axis1-keep", axis=1, keep_dims=True),
        op_record(_op, _arg(_function), normal(3, 4, 5), tag="axis-2", axis=-2),
        op_record(_op, _arg(_function), normal(6), tag="rank1", axis=0),
        op_record(_op, _arg(_function), ints(-50, 50, 3, 4), tag="i32", axis=1, keep_dims=True),
    ]


def _cumsum(x: Any, axis: int = 0, exclusive: bool = False, reverse: bool = False) -> Any:
    """Cumulative sum as a product with a triangular 0/1 matrix along ``axis``."""
    n = x.shape[axis]
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    # output i sums inputs j before it (after it when reversed), itself unless exclusive
    offset = (j - i) if reverse else (i - j)
    mask = offset > 0 if exclusive else offset >= 0
    moved = np.moveaxis(x, axis, 0)
    result = np.tensordot(mask.astype(x.dtype), moved, axes=1)
    return np.moveaxis(result, 0, axis).astype(x.dtype)


for _exclusive, _reverse in itertools.product([False, True], repeat=2):
    _tag = f"exclusive{_exclusive}-reverse{_reverse}"
    RECORDS += [
        op_record(
            "cumsum",
            _cumsum,
            normal(3, 4),
            tag=f"axis-1-{_tag}",
            axis=-1,
            exclusive=_exclusive,
            reverse=_reverse,
            **ACCUM,
        ),
        op_record(
            "cumsum",
            _cumsum,
            normal(3, 4, 2),
            tag=f"axis0-{_tag}",
            axis=0,
            exclusive=_exclusive,
            reverse=_reverse,
            **ACCUM,
        ),
    ]
RECORDS += [
    op_record("cumsum", _cumsum, normal(5), tag="rank1-default", **ACCUM),
    op_record("cumsum", _cumsum, ints(-9, 9, 3, 4), tag="i32", axis=1, exclusive=True),
]

# --- 4. matmul, linear, einsum, conv, conv_transpose ----------------------------


def _matmul(x: Any, y: Any, transpose_x: bool = False, transpose_y: bool = False) -> Any:
    if transpose_x:
        x = np.swapaxes(x, -1, -2)
    if transpose_y:
        y = np.swapaxes(y, -1, -2)
    return np.matmul(x, y)


MATMUL_CASES: list[tuple[str, tuple[int, ...], tuple[int, ...], dict[str, Any]]] = [
    ("2d", (3, 4), (4, 5), {}),
    ("transpose_x", (4, 3), (4, 5), {"transpose_x": True}),
    ("transpose_y", (3, 4), (5, 4), {"transpose_y": True}),
    ("transpose-both", (4, 3), (5, 4), {"transpose_x": True, "transpose_y": True}),
    ("batched", (2, 3, 4), (2, 4, 5), {}),
    ("broadcast-batch", (2, 1, 3, 4), (5, 4, 6), {}),
    ("broadcast-batch-transpose_y", (1, 3, 4), (2, 6, 4), {"transpose_y": True}),
    # (coremltools' type inference mishandles a rank-1 y and a rank-1 x with batched y)
    ("vector-matrix", (4,), (4, 5), {}),
    ("vector-matrix-batch1", (4,), (1, 4, 5), {}),
    ("size1", (1, 1, 4), (4, 1), {}),
    ("rank5", (1, 2, 1, 3, 4), (2, 1, 4, 2), {}),
]
for _tag, _sx, _sy, _flags in MATMUL_CASES:
    RECORDS.append(
        op_record("matmul", _matmul, normal(*_sx), normal(*_sy), tag=_tag, **ACCUM, **_flags)
    )


def _linear(x: Any, weight: Any, bias: Any = None) -> Any:
    result = np.matmul(x, weight.T)
    return result if bias is None else result + bias


RECORDS += [
    op_record(
        "linear", _linear, normal(2, 3, 4), tag="bias", weight=const(5, 4), bias=const(5), **ACCUM
    ),
    op_record("linear", _linear, normal(3, 4), tag="no-bias", weight=const(6, 4), **ACCUM),
    op_record(
        "linear", _linear, normal(4), tag="rank1", weight=const(2, 4), bias=const(2), **ACCUM
    ),
    op_record("linear", _linear, normal(1, 1, 1, 1, 4), tag="rank5", weight=const(3, 4), **ACCUM),
]


def _einsum(values: Sequence[Any], equation: str) -> Any:
    """MIL's einsum: a matmul over axes -3 (contracted: x's last) and -1, batched over the rest."""
    x, y = values
    # x: [*B, C, H, W], y: [*B, W, H, U] -> [*B, C, H, U]; move H in front of the matrices.
    product = np.matmul(np.swapaxes(x, -3, -2), np.swapaxes(y, -3, -2))  # [*B, H, C, U]
    return np.swapaxes(product, -3, -2)


RECORDS += [
    op_record(
        "einsum",
        _einsum,
        tag="rank4",
        values=(const(2, 3, 4, 5), const(2, 5, 4, 6)),
        equation="nchw,nwhu->nchu",
        **ACCUM,
    ),
    op_record(
        "einsum",
        _einsum,
        tag="rank4-broadcast-n-h",
        values=(const(2, 3, 1, 5), const(1, 5, 4, 6)),
        equation="nchw,nwhu->nchu",
        **ACCUM,
    ),
    op_record(
        "einsum",
        _einsum,
        tag="rank4-renamed-labels",
        values=(const(1, 2, 3, 4), const(1, 4, 3, 2)),
        equation="abcd,adce->abce",
        **ACCUM,
    ),
    op_record(
        "einsum",
        _einsum,
        tag="rank3",
        values=(const(3, 4, 5), const(5, 4, 2)),
        equation="chw,whr->chr",
        **ACCUM,
    ),
]


def _conv(
    x: Any,
    weight: Any,
    bias: Any = None,
    strides: Any = None,
    pad_type: str = "valid",
    pad: Any = None,
    dilations: Any = None,
    groups: int = 1,
) -> Any:
    """Direct-loop convolution: out[n, o, p] = sum_{c in group, k} x[n, c, p*s + k*d] w[o, c, k]."""
    x, weight = np.asarray(x, np.float64), np.asarray(weight, np.float64)
    spatial, kernel = x.shape[2:], weight.shape[2:]
    rank = len(spatial)
    s = list(strides) if strides is not None else [1] * rank
    d = list(dilations) if dilations is not None else [1] * rank
    padding = paddings(pad_type, pad, spatial, kernel, s, d)
    padded = np.pad(x, [(0, 0), (0, 0), *padding])
    out_spatial = [
        (n + lo + hi - (k - 1) * dd - 1) // ss + 1
        for n, (lo, hi), k, ss, dd in zip(spatial, padding, kernel, s, d, strict=True)
    ]
    c_out, c_per_group = weight.shape[:2]
    out_per_group = c_out // groups
    out = np.zeros((x.shape[0], c_out, *out_spatial))
    for o in range(c_out):
        group = o // out_per_group
        channels = slice(group * c_per_group, (group + 1) * c_per_group)
        for position in np.ndindex(*out_spatial):
            for offset in np.ndindex(*kernel):
                index = tuple(
                    p * ss + k * dd for p, k, ss, dd in zip(position, offset, s, d, strict=True)
                )
                out[(slice(None), o, *position)] += (
                    padded[(slice(None), channels, *index)] @ weight[(o, slice(None), *offset)]
                )
    if bias is not None:
        out += np.reshape(bias, (1, -1) + (1,) * rank)
    return out


CONV_CASES: list[tuple[str, tuple[int, ...], tuple[int, ...], dict[str, Any]]] = [
    ("1x1", (2, 3, 4, 5), (6, 3, 1, 1), {}),
    ("1x1-bias", (1, 3, 4, 5), (6, 3, 1, 1), {"bias": const(6)}),
    ("1x1-stride2", (1, 3, 5, 5), (4, 3, 1, 1), {"strides": [2, 2]}),
    ("1x1-groups3", (1, 3, 4, 4), (6, 1, 1, 1), {"groups": 3}),
    ("3x3-valid", (1, 2, 5, 6), (4, 2, 3, 3), {"pad_type": "valid"}),
    ("3x3-same", (2, 2, 5, 6), (4, 2, 3, 3), {"pad_type": "same"}),
    ("3x3-same-stride2-odd", (1, 2, 7, 7), (3, 2, 3, 3), {"pad_type": "same", "strides": [2, 2]}),
    ("3x3-same-stride2-even", (1, 2, 6, 6), (3, 2, 3, 3), {"pad_type": "same", "strides": [2, 2]}),
    ("2x2-same", (1, 2, 5, 5), (3, 2, 2, 2), {"pad_type": "same"}),
    ("2x2-same_lower", (1, 2, 5, 5), (3, 2, 2, 2), {"pad_type": "same_lower"}),
    ("3x3-custom", (1, 2, 5, 6), (3, 2, 3, 3), {"pad_type": "custom", "pad": [1, 0, 2, 1]}),
    ("3x3-strides-2-1", (1, 2, 7, 6), (3, 2, 3, 3), {"strides": [2, 1]}),
    ("3x3-groups2", (1, 4, 5, 5), (6, 2, 3, 3), {"groups": 2, "bias": const(6)}),
    ("3x3-depthwise", (2, 4, 5, 5), (4, 1, 3, 3), {"groups": 4, "pad_type": "same"}),
    ("1d-same-stride2", (2, 3, 8), (4, 3, 3), {"pad_type": "same", "strides": [2]}),
    ("3d-valid", (1, 2, 4, 4, 3), (3, 2, 2, 2, 2), {}),
    ("size1-spatial", (1, 3, 1, 1), (2, 3, 1, 1), {}),
]
for _tag, _sx, _sw, _attrs in CONV_CASES:
    RECORDS.append(
        op_record("conv", _conv, normal(*_sx), normal(*_sw), tag=_tag, **ACCUM, **_attrs)
    )
RECORDS += [
    # dilated kernels must be const (MIL doc)
    op_record(
        "conv",
        _conv,
        normal(1, 2, 7, 7),
        tag="3x3-dilations2",
        weight=const(3, 2, 3, 3),
        dilations=[2, 2],
        **ACCUM,
    ),
    op_record(
        "conv",
        _conv,
        normal(1, 2, 7, 8),
        tag="3x3-dilations-same-stride",
        weight=const(3, 2, 3, 3),
        dilations=[2, 1],
        strides=[1, 2],
        pad_type="same",
        **ACCUM,
    ),
]


def _conv_transpose(
    x: Any,
    weight: Any,
    bias: Any = None,
    pad: Any = None,
    output_shape: Any = None,
    pad_type: str = "valid",
    strides: Any = None,
    dilations: Any = None,
    groups: int = 1,
) -> Any:
    """Scatter-add: each input element adds x[n, c, p] * w[c, :, k] at output p*s + k*d."""
    x, weight = np.asarray(x, np.float64), np.asarray(weight, np.float64)
    spatial, kernel = x.shape[2:], weight.shape[2:]
    rank = len(spatial)
    s = list(strides) if strides is not None else [1] * rank
    d = list(dilations) if dilations is not None else [1] * rank
    full = [
        (n - 1) * ss + (k - 1) * dd + 1 for n, k, ss, dd in zip(spatial, kernel, s, d, strict=True)
    ]
    c_in, out_per_group = weight.shape[:2]
    in_per_group = c_in // groups
    out = np.zeros((x.shape[0], out_per_group * groups, *full))
    for c in range(c_in):
        group = c // in_per_group
        outs = slice(group * out_per_group, (group + 1) * out_per_group)
        for position in np.ndindex(*spatial):
            for offset in np.ndindex(*kernel):
                index = tuple(
                    p * ss + k * dd for p, k, ss, dd in zip(position, offset, s, d, strict=True)
                )
                out[(slice(None), outs, *index)] += np.outer(
                    x[(slice(None), c, *position)], weight[(c, slice(None), *offset)]
                )
    if pad_type == "custom":
        flat = [int(p) for p in pad]
        crop = [(flat[2 * i], full[i] - flat[2 * i + 1]) for i in range(rank)]
    elif pad_type == "same":
        wanted = (
            [n * ss for n, ss in zip(spatial, s, strict=True)]
            if output_shape is None
            else [int(o) for o in output_shape[2:]]
        )
        crop = [((f - w) // 2, (f - w) // 2 + w) for f, w in zip(full, wanted, strict=True)]
    else:
        crop = [(0, f) for f in full]
    out = out[(slice(None), slice(None), *(slice(lo, hi) for lo, hi in crop))]
    if bias is not None:
        out += np.reshape(bias, (1, -1) + (1,) * rank)
    return out


CONV_TRANSPOSE_CASES: list[tuple[str, tuple[int, ...], np.ndarray, dict[str, Any]]] = [
    ("3x3-valid", (1, 2, 3, 3), const(2, 3, 3, 3), {}),
    ("3x3-stride2-bias", (2, 2, 3, 4), const(2, 3, 3, 3), {"strides": [2, 2], "bias": const(3)}),
    (
        "3x3-stride2-custom",
        (1, 2, 3, 3),
        const(2, 2, 3, 3),
        {"strides": [2, 2], "pad_type": "custom", "pad": [1, 1, 0, 2]},
    ),
    ("3x3-same", (1, 2, 4, 4), const(2, 3, 3, 3), {"pad_type": "same"}),
    ("4x4-same-stride2", (1, 2, 3, 3), const(2, 1, 4, 4), {"pad_type": "same", "strides": [2, 2]}),
    (
        "3x3-same-stride2-output_shape",
        (1, 2, 3, 3),
        const(2, 3, 3, 3),
        {"pad_type": "same", "strides": [2, 2], "output_shape": [1, 3, 5, 5]},
    ),
    ("2x2-groups2", (1, 4, 3, 3), const(4, 1, 2, 2), {"groups": 2, "strides": [2, 2]}),
    ("3x3-dilations2", (1, 1, 3, 3), const(1, 2, 3, 3), {"dilations": [2, 2]}),
    ("1d-stride3", (2, 3, 4), const(3, 2, 2), {"strides": [3]}),
]
for _tag, _sx, _weight, _attrs in CONV_TRANSPOSE_CASES:
    RECORDS.append(
        op_record(
            "conv_transpose",
            _conv_transpose,
            normal(*_sx),
            tag=_tag,
            weight=_weight,
            **ACCUM,
            **_attrs,
        )
    )


# --- 5. normalization ---------------------------------------------------------


def _standardize(x: Any, axes: tuple[int, ...], epsilon: float) -> Any:
    mean = np.mean(x, axis=axes, keepdims=True)
    variance = np.mean((x - mean) ** 2, axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon)


def _layer_norm(
    x: Any, axes: Any, gamma: Any = None, beta: Any = None, epsilon: float = 1e-5
) -> Any:
    chosen = tuple(sorted(int(a) % x.ndim for a in axes))
    shape = [x.shape[a] if a in chosen else 1 for a in range(x.ndim)]
    result = _standardize(x, chosen, epsilon)
    if gamma is not None:
        result = result * np.reshape(gamma, shape)
    if beta is not None:
        result = result + np.reshape(beta, shape)
    return result


def _instance_norm(x: Any, gamma: Any = None, beta: Any = None, epsilon: float = 1e-5) -> Any:
    result = _standardize(x, tuple(range(2, x.ndim)), epsilon)
    if gamma is not None:
        result = result * _per_channel(gamma, x)
    if beta is not None:
        result = result + _per_channel(beta, x)
    return result


def _batch_norm(
    x: Any, mean: Any, variance: Any, gamma: Any = None, beta: Any = None, epsilon: float = 1e-5
) -> Any:
    result = (x - _per_channel(mean, x)) / np.sqrt(_per_channel(variance, x) + epsilon)
    if gamma is not None:
        result = result * _per_channel(gamma, x)
    if beta is not None:
        result = result + _per_channel(beta, x)
    return result


def _l2_norm(x: Any, epsilon: float = 1e-6) -> Any:
    return x / np.sqrt(np.sum(x * x, axis=(-3, -2, -1), keepdims=True) + epsilon)


def _local_response_norm(
    x: Any, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0
) -> Any:
    """x_c / (k + alpha / size * sum of x_j^2 over channels j within size // 2 of c)^beta."""
    out = np.empty_like(x)
    channels = x.shape[1]
    for c in range(channels):
        window = x[:, max(c - size // 2, 0) : min(c + size // 2 + 1, channels)]
        out[:, c] = x[:, c] / (k + alpha / size * np.sum(window**2, axis=1)) ** beta
    return out


NORM: dict[str, Any] = {"rtol": 1e-5, "atol": 1e-5, "ane": False}
RECORDS += [
    op_record(
        "layer_norm",
        _layer_norm,
        normal(2, 3, 8, scale=2, shift=1),
        tag="last-axis-gamma-beta",
        axes=[-1],
        gamma=const(8),
        beta=const(8),
        epsilon=F32(1e-5),
        **NORM,
    ),
    op_record(
        "layer_norm",
        _layer_norm,
        normal(2, 3, 4, scale=2, shift=-1),
        tag="two-axes-gamma",
        axes=[1, 2],
        gamma=const(3, 4),
        **NORM,
    ),
    op_record(
        "layer_norm",
        _layer_norm,
        normal(2, 3, 4, scale=3),
        tag="first-axis-large-eps",
        axes=[0],
        epsilon=F32(0.5),
        **NORM,
    ),
    op_record("layer_norm", _layer_norm, normal(9, shift=5), tag="rank1", axes=[0], **NORM),
    op_record(
        "layer_norm",
        _layer_norm,
        normal(1, 2, 1, 3, 4),
        tag="rank5",
        axes=[-2, -1],
        gamma=const(3, 4),
        beta=const(3, 4),
        **NORM,
    ),
    op_record(
        "instance_norm",
        _instance_norm,
        normal(2, 3, 4, 5, scale=2, shift=1),
        tag="rank4-gamma-beta",
        gamma=const(3),
        beta=const(3),
        epsilon=F32(1e-3),
        **NORM,
    ),
    op_record("instance_norm", _instance_norm, normal(2, 3, 6, shift=-2), tag="rank3", **NORM),
    op_record(
        "batch_norm",
        _batch_norm,
        normal(2, 3, 4, 5),
        tag="rank4-gamma-beta",
        mean=const(3),
        variance=np.abs(const(3)) + F32(0.5),
        gamma=const(3),
        beta=const(3),
        epsilon=F32(1e-3),
        **ACCUM,
    ),
    op_record(
        "batch_norm",
        _batch_norm,
        normal(2, 4, 6),
        tag="rank3",
        mean=const(4),
        variance=np.abs(const(4)) + F32(0.5),
        **ACCUM,
    ),
    op_record(
        "batch_norm",
        _batch_norm,
        normal(1, 2, 3, 2, 2),
        tag="rank5",
        mean=const(2),
        variance=np.abs(const(2)) + F32(0.5),
        beta=const(2),
        **ACCUM,
    ),
    op_record("l2_norm", _l2_norm, normal(2, 3, 4), tag="rank3", **NORM),
    op_record("l2_norm", _l2_norm, normal(2, 2, 3, 4), tag="rank4", **NORM),
    op_record(
        "l2_norm", _l2_norm, normal(2, 2, 1, 3, 2), tag="rank5-eps", epsilon=F32(0.5), **NORM
    ),
    op_record(
        "local_response_norm",
        _local_response_norm,
        normal(2, 5, 3, 3, scale=3),
        tag="size3",
        size=3,
        **ACCUM,
    ),
    op_record(
        "local_response_norm",
        _local_response_norm,
        normal(1, 6, 4, scale=3),
        tag="size5-params",
        size=5,
        alpha=F32(0.01),
        beta=F32(0.5),
        k=F32(2.0),
        **ACCUM,
    ),
]

# --- 6. tensor ops ------------------------------------------------------------


def _slice(
    x: Any,
    begin: Any,
    end: Any,
    stride: Any = None,
    begin_mask: Any = None,
    end_mask: Any = None,
    squeeze_mask: Any = None,
) -> Any:
    """MIL slice_by_index as a Python index: masks drop begin/end, squeeze picks one element."""
    index: list[Any] = []
    for axis in range(x.ndim):
        if squeeze_mask is not None and squeeze_mask[axis]:
            index.append(int(begin[axis]))
            continue
        start = None if begin_mask is not None and begin_mask[axis] else int(begin[axis])
        stop = None if end_mask is not None and end_mask[axis] else int(end[axis])
        index.append(slice(start, stop, 1 if stride is None else int(stride[axis])))
    return x[tuple(index)]


def _slice_by_size(x: Any, begin: Any, size: Any) -> Any:
    return x[
        tuple(
            slice(int(b), None if int(s) == -1 else int(b) + int(s))
            for b, s in zip(begin, size, strict=True)
        )
    ]


def _interleave(values: Sequence[Any], axis: int, interleave: bool) -> Any:
    """Concat with interleave: out[k * i + j] = values[j][i] along ``axis``."""
    assert interleave
    count = len(values)
    moved = [np.moveaxis(v, axis, 0) for v in values]
    out = np.empty((moved[0].shape[0] * count, *moved[0].shape[1:]), moved[0].dtype)
    for j, value in enumerate(moved):
        out[j::count] = value
    return np.moveaxis(out, 0, axis)


def _split_sizes(x: Any, split_sizes: Any, axis: int) -> tuple[Any, ...]:
    parts = []
    start = 0
    for size in split_sizes:
        parts.append(np.take(x, range(start, start + int(size)), axis=axis))
        start += int(size)
    return tuple(parts)


def _pad(x: Any, pad: Any, mode: str = "constant", constant_val: float = 0.0) -> Any:
    count = len(pad) // 2
    widths = [(0, 0)] * (x.ndim - count) + [
        (int(pad[2 * i]), int(pad[2 * i + 1])) for i in range(count)
    ]
    if mode == "constant":
        return np.pad(x, widths, constant_values=constant_val)
    if mode == "reflect":
        return np.pad(x, widths, mode="reflect")
    assert mode == "replicate"
    return np.pad(x, widths, mode="edge")


def _gather_batched(x: Any, indices: Any, axis: int, batch_dims: int) -> Any:
    assert batch_dims == 1
    return np.stack([np.take(x[b], indices[b], axis=axis - 1) for b in range(x.shape[0])])


def _one_hot(
    indices: Any,
    one_hot_vector_size: int,
    axis: int = -1,
    on_value: Any = 1,
    off_value: Any = 0,
) -> Any:
    encoded = np.arange(one_hot_vector_size) == np.asarray(indices)[..., None]
    result = np.where(encoded, on_value, off_value)
    result = result.astype(I32) if isinstance(on_value, int) else result
    return np.moveaxis(result, -1, axis)


def _band_part(x: Any, lower: int = -1, upper: int = -1) -> Any:
    """Keep x[..., i, j] where (lower < 0 or i - j <= lower) and (upper < 0 or j - i <= upper)."""
    result = x
    if lower >= 0:
        result = np.triu(result, -lower)
    if upper >= 0:
        result = np.tril(result, upper)
    return result


def _topk(x: Any, k: int = 1, axis: int = -1, ascending: bool = False, **_: Any) -> tuple[Any, Any]:
    order = np.argsort(x if ascending else -x, axis=axis, kind="stable")
    order = np.take(order, range(k), axis=axis)
    return np.take_along_axis(x, order, axis=axis), order.astype(I32)


def _argsort(x: Any, axis: int = -1, ascending: bool = False) -> Any:
    return np.argsort(x if ascending else -x, axis=axis, kind="stable").astype(I32)


def _depth_to_space(x: Any, block_size: int) -> Any:
    """TensorFlow's DepthToSpace (DCR) in NCHW: out[c, h*b+i, w*b+j] = x[(i*b+j)*C + c, h, w]."""
    b = block_size
    n, channels, h, w = x.shape
    c = channels // (b * b)
    out = np.empty((n, c, h * b, w * b), x.dtype)
    for i, j in itertools.product(range(b), repeat=2):
        out[:, :, i::b, j::b] = x[:, (i * b + j) * c : (i * b + j + 1) * c]
    return out


def _space_to_depth(x: Any, block_size: int) -> Any:
    b = block_size
    n, c, h, w = x.shape
    out = np.empty((n, c * b * b, h // b, w // b), x.dtype)
    for i, j in itertools.product(range(b), repeat=2):
        out[:, (i * b + j) * c : (i * b + j + 1) * c] = x[:, :, i::b, j::b]
    return out


def _pixel_shuffle(x: Any, upscale_factor: int) -> Any:
    """PyTorch's PixelShuffle (CRD): out[c, h*b+i, w*b+j] = x[c*b*b + i*b + j, h, w]."""
    b = upscale_factor
    n, channels, h, w = x.shape
    out = np.empty((n, channels // (b * b), h * b, w * b), x.dtype)
    for i, j in itertools.product(range(b), repeat=2):
        out[:, :, i::b, j::b] = x[:, i * b + j :: b * b]
    return out


def _pixel_unshuffle(x: Any, downscale_factor: Any) -> Any:
    b = int(downscale_factor)
    n, c, h, w = x.shape
    out = np.empty((n, c * b * b, h // b, w // b), x.dtype)
    for i, j in itertools.product(range(b), repeat=2):
        out[:, i * b + j :: b * b] = x[:, :, i::b, j::b]
    return out


def _upsample(x: Any, scale_factor_height: float = 1, scale_factor_width: float = 1) -> Any:
    """Output pixel (i, j) copies input pixel (floor(i / sh), floor(j / sw))."""
    height = math.floor(x.shape[-2] * scale_factor_height)
    width = math.floor(x.shape[-1] * scale_factor_width)
    rows = [math.floor(i / scale_factor_height) for i in range(height)]
    cols = [math.floor(j / scale_factor_width) for j in range(width)]
    return x[..., rows, :][..., cols]


def _max_pool(x: Any, **attrs: Any) -> Any:
    return pool(x, kind="max", **attrs)


def _avg_pool(x: Any, **attrs: Any) -> Any:
    return pool(x, kind="avg", **attrs)


def _sdpa(query: Any, key: Any, value: Any, attn_mask: Any = None) -> Any:
    scores = np.matmul(query, np.swapaxes(key, -1, -2)) / math.sqrt(query.shape[-1])
    if attn_mask is not None:
        if attn_mask.dtype == bool:
            scores = np.where(attn_mask, scores, -np.inf)
        else:
            scores = scores + attn_mask
    return np.matmul(_softmax(scores, axis=-1), value)


def _quantize(
    input: Any, scale: Any, output_dtype: str, zero_point: Any = None, axis: Any = None
) -> Any:
    dtype = np.dtype(output_dtype)
    info = np.iinfo(dtype)
    shape = [1] * input.ndim
    if axis is not None:
        shape[axis] = -1
    zero = 0 if zero_point is None else np.reshape(zero_point, shape).astype(np.float64)
    values = np.rint(input / np.reshape(scale, shape)) + zero
    return np.clip(values, info.min, info.max).astype(dtype)


def _dequantize(input: Any, scale: Any, zero_point: Any = None, axis: Any = None) -> Any:
    shape = [1] * input.ndim
    if axis is not None:
        shape[axis] = -1
    zero = 0 if zero_point is None else np.reshape(zero_point, shape).astype(np.float64)
    return (input.astype(np.float64) - zero) * np.reshape(scale, shape)


def _reshape_zeros(x: Any, shape: Any) -> Any:
    """iOS 17 reshape: each 0 copies the input dim at the same position counted from the right."""
    dims = [int(d) for d in shape]
    for i in range(1, len(dims) + 1):
        if dims[-i] == 0:
            dims[-i] = x.shape[-i] if i <= x.ndim else 1
    return np.reshape(x, dims)


X345 = normal(3, 4, 5)
RECORDS += [
    # reshape / transpose / expand_dims / squeeze / flatten2d
    op_record("reshape", _reshape_zeros, X345, tag="infer", shape=[5, -1]),
    op_record("reshape", _reshape_zeros, normal(2, 3, 2), tag="zeros-right-aligned", shape=[0, -1]),
    op_record("reshape", _reshape_zeros, normal(2, 3, 4), tag="zero-last", shape=[-1, 3, 0]),
    op_record("reshape", _reshape_zeros, normal(1, 2, 1, 3, 2), tag="rank5-to-rank1", shape=[12]),
    op_record(
        "reshape", _reshape_zeros, ints(0, 9, 6), tag="i32-rank1-to-rank5", shape=[1, 2, 1, 3, 1]
    ),
    op_record("transpose", lambda x, perm: np.transpose(x, perm), normal(3, 4), perm=[1, 0]),
    op_record(
        "transpose",
        lambda x, perm: np.transpose(x, perm),
        normal(2, 1, 3, 4, 2),
        tag="rank5",
        perm=[4, 2, 0, 3, 1],
    ),
    op_record(
        "transpose",
        lambda x, perm: np.transpose(x, perm),
        X345,
        tag="negative-perm",
        perm=[-1, 0, 1],
    ),
    op_record(
        "expand_dims",
        lambda x, axes: np.expand_dims(x, tuple(axes)),
        normal(2, 3),
        tag="front-and-back",
        axes=[0, -1],
    ),
    op_record(
        "expand_dims",
        lambda x, axes: np.expand_dims(x, tuple(axes)),
        normal(4),
        tag="rank1-middle",
        axes=[1],
    ),
    op_record(
        "expand_dims",
        lambda x, axes: np.expand_dims(x, tuple(axes)),
        normal(2, 3),
        tag="to-rank5",
        axes=[1, -2, 0],
    ),
    op_record("squeeze", lambda x: np.squeeze(x), normal(1, 3, 1, 2), tag="all"),
    op_record(
        "squeeze",
        lambda x, axes: np.squeeze(x, tuple(axes)),
        normal(1, 3, 1, 2, 1),
        tag="negative-axes",
        axes=[0, -1],
    ),
    op_record(
        "squeeze",
        lambda x, axes: np.squeeze(x, 1),
        normal(2, 1, 3),
        tag="ignores-non-1-axes",
        axes=[0, 1],
    ),
    op_record(
        "flatten2d",
        lambda x: x.reshape(x.shape[0], -1),
        normal(2, 3, 4),
        tag="default-axis",
    ),
    op_record(
        "flatten2d",
        lambda x, axis: x.reshape(int(np.prod(x.shape[:axis])), -1),
        normal(2, 3, 4),
        tag="axis0",
        axis=0,
    ),
    op_record(
        "flatten2d",
        lambda x, axis: x.reshape(int(np.prod(x.shape[:axis])), -1),
        normal(2, 3, 4),
        tag="axis2",
        axis=2,
    ),
    op_record(
        "flatten2d",
        lambda x, axis: x.reshape(int(np.prod(x.shape[:axis])), -1),
        normal(2, 3, 2),
        tag="negative-axis",
        axis=-1,
    ),
    op_record(
        "reshape_like",
        lambda x, ref_tensors, begins, ends, end_masks: x.reshape(3, 4),
        normal(2, 6),
        ref_tensors=(np.zeros((3, 5), F32), np.zeros((2, 4), F32)),
        begins=(0, 1),
        ends=(1, 2),
        end_masks=(False, True),
    ),
    op_record("shape", lambda x: np.array(x.shape, I32), normal(2, 1, 3, 4, 5), tag="rank5"),
    # concat / stack / split
    op_record(
        "concat",
        lambda values, axis: np.concatenate(values, axis),
        values=(const(2, 3), const(4, 3), const(1, 3)),
        axis=0,
    ),
    op_record(
        "concat",
        lambda values, axis: np.concatenate(values, axis),
        tag="negative-axis",
        values=(const(2, 1, 3), const(2, 1, 2)),
        axis=-1,
    ),
    op_record(
        "concat",
        _interleave,
        tag="interleave-axis0",
        values=(const(2, 3), const(2, 3), const(2, 3)),
        axis=0,
        interleave=True,
    ),
    op_record(
        "concat",
        _interleave,
        tag="interleave-axis-1",
        values=(const(2, 2), const(2, 2)),
        axis=-1,
        interleave=True,
    ),
    op_record(
        "concat",
        lambda values, axis: np.concatenate(values, axis),
        tag="i32",
        values=(np.arange(3, dtype=I32), np.arange(2, dtype=I32)),
        axis=0,
    ),
    op_record(
        "stack",
        lambda values, axis: np.stack(values, axis),
        tag="axis0",
        values=(const(2, 3), const(2, 3)),
        axis=0,
    ),
    op_record(
        "stack",
        lambda values, axis: np.stack(values, axis),
        tag="axis-1",
        values=(const(2, 3), const(2, 3), const(2, 3)),
        axis=-1,
    ),
    op_record(
        "split",
        lambda x, num_splits, axis: tuple(np.split(x, num_splits, axis)),
        normal(4, 6),
        tag="num_splits",
        num_splits=3,
        axis=1,
    ),
    op_record(
        "split",
        lambda x, split_sizes, axis: _split_sizes(x, split_sizes, axis),
        normal(5, 2),
        tag="split_sizes",
        split_sizes=[1, 3, 1],
        axis=0,
    ),
    op_record(
        "split",
        lambda x, split_sizes, axis: _split_sizes(x, split_sizes, axis),
        normal(2, 3, 7),
        tag="split_sizes-negative-axis",
        split_sizes=[4, 3],
        axis=-1,
    ),
    # slicing
    op_record(
        "slice_by_index",
        _slice,
        X345,
        tag="plain",
        begin=[1, 0, 1],
        end=[3, 4, 5],
        stride=[1, 2, 2],
    ),
    op_record(
        "slice_by_index",
        _slice,
        X345,
        tag="negative-stride",
        begin=[0, -1, 4],
        end=[3, 0, 0],
        stride=[1, -1, -2],
        end_mask=[False, True, False],
    ),
    op_record(
        "slice_by_index",
        _slice,
        X345,
        tag="masks",
        begin=[2, 1, 3],
        end=[0, 3, 0],
        begin_mask=[True, False, True],
        end_mask=[True, False, True],
    ),
    op_record(
        "slice_by_index",
        _slice,
        X345,
        tag="squeeze_mask",
        begin=[1, 0, -2],
        end=[2, 4, -1],
        squeeze_mask=[True, False, True],
    ),
    op_record(
        "slice_by_index",
        _slice,
        normal(8),
        tag="rank1-negative-begin",
        begin=[-5],
        end=[-1],
    ),
    op_record("slice_by_size", _slice_by_size, normal(4, 5), tag="size", begin=[1, 2], size=[2, 3]),
    op_record(
        "slice_by_size", _slice_by_size, normal(4, 5), tag="size-minus1", begin=[1, 0], size=[-1, 2]
    ),
    op_record(
        "slice_by_size", _slice_by_size, ints(0, 9, 6), tag="i32-rank1", begin=[2], size=[-1]
    ),
    # tile / reverse / pad
    op_record("tile", lambda x, reps: np.tile(x, reps), normal(2, 1, 3), reps=[2, 3, 1]),
    op_record("tile", lambda x, reps: np.tile(x, reps), ints(0, 9, 3), tag="i32-rank1", reps=[3]),
    op_record("reverse", lambda x, axes: np.flip(x, tuple(axes)), X345, tag="axes", axes=[0, -1]),
    op_record("reverse", lambda x: np.flip(x), normal(2, 3), tag="all"),
    op_record(
        "pad", _pad, normal(2, 3), tag="constant-last-dim", pad=[1, 2], constant_val=F32(1.5)
    ),
    op_record("pad", _pad, normal(2, 3, 4), tag="constant-two-dims", pad=[1, 0, 2, 1]),
    op_record("pad", _pad, normal(2, 4, 5), tag="reflect", pad=[1, 3, 2, 2], mode="reflect"),
    op_record("pad", _pad, normal(1, 2, 3, 3), tag="replicate", pad=[2, 0, 1, 3], mode="replicate"),
    op_record("pad", _pad, normal(5), tag="rank1-reflect", pad=[4, 1], mode="reflect"),
    # gather family
    op_record(
        "gather",
        lambda x, indices: np.take(x, indices, axis=0),
        normal(4, 5),
        fixed([[0, -1], [2, 1]], I32),
        tag="negative-indices",
    ),
    op_record(
        "gather",
        lambda x, indices, axis: np.take(x, indices, axis=axis),
        normal(3, 4, 5),
        fixed([-2, 0, 4, 4], I32),
        tag="axis-1",
        axis=-1,
    ),
    op_record(
        "gather",
        lambda x, indices, axis: np.take(x, indices, axis=axis),
        ints(0, 99, 4, 3),
        fixed([3, 0], I32),
        tag="i32-axis0",
        axis=0,
    ),
    op_record(
        "gather",
        _gather_batched,
        normal(2, 3, 4),
        fixed([[0, 2], [1, -1]], I32),
        tag="batch_dims",
        axis=1,
        batch_dims=1,
    ),
    op_record(
        "gather_along_axis",
        lambda x, indices, axis: np.take_along_axis(x, indices, axis),
        normal(3, 4),
        fixed([[0, -1], [3, 1], [2, 2]], I32),
        tag="axis1",
        axis=1,
    ),
    op_record(
        "gather_along_axis",
        lambda x, indices, axis: np.take_along_axis(x, indices, axis),
        normal(3, 4),
        fixed([[0, 2, 1, -1]], I32),
        tag="axis0",
        axis=0,
    ),
    op_record(
        "gather_nd",
        lambda x, indices: x[tuple(np.moveaxis(indices, -1, 0))],
        normal(2, 3, 4),
        fixed([[0, 2], [1, -1], [1, 0]], I32),
        tag="partial",
    ),
    op_record(
        "gather_nd",
        lambda x, indices: x[tuple(np.moveaxis(indices, -1, 0))],
        normal(2, 3, 4),
        fixed([[[0, 2, 3]], [[1, -3, -1]]], I32),
        tag="full",
    ),
    op_record(
        "select",
        np.where,
        bools(3, 1),
        normal(3, 4),
        normal(1, 4),
        tag="broadcast-cond",
    ),
    op_record("select", np.where, bools(2, 3), ints(0, 9, 2, 3), ints(-9, 0, 3), tag="i32"),
    # creation
    op_record(
        "fill",
        lambda shape, value: np.full(shape, value),
        tag="float",
        shape=np.array([2, 3], I32),
        value=F32(1.5),
    ),
    op_record(
        "fill",
        lambda shape, value: np.full(shape, value, I32),
        tag="i32",
        shape=np.array([1, 2, 1, 3, 1], I32),
        value=np.int32(-4),
    ),
    op_record(
        "fill_like",
        lambda ref_tensor, value: np.full(ref_tensor.shape, value),
        normal(2, 1, 3),
        value=F32(-0.5),
    ),
    op_record(
        "range_1d",
        lambda start, end, step: np.arange(start, end, step),
        tag="float",
        start=F32(0.5),
        end=F32(3.0),
        step=F32(0.75),
    ),
    op_record(
        "range_1d",
        lambda start, end, step: np.arange(start, end, step, dtype=I32),
        tag="i32-negative-step",
        start=np.int32(5),
        end=np.int32(-3),
        step=np.int32(-2),
    ),
    op_record("one_hot", _one_hot, fixed([0, 2, 1, 3], I32), tag="default", one_hot_vector_size=4),
    op_record(
        "one_hot",
        _one_hot,
        fixed([[0, 2], [1, 1]], I32),
        tag="axis0-float",
        one_hot_vector_size=3,
        axis=0,
        on_value=F32(5),
        off_value=F32(-1),
    ),
    op_record(
        "one_hot",
        _one_hot,
        fixed([[0, 2], [1, 1]], I32),
        tag="axis1",
        one_hot_vector_size=3,
        axis=1,
    ),
    op_record("band_part", _band_part, normal(4, 5), tag="default"),
    op_record(
        "band_part",
        _band_part,
        normal(4, 5),
        tag="lower1-upper0",
        lower=np.int32(1),
        upper=np.int32(0),
    ),
    op_record("band_part", _band_part, normal(2, 5, 4), tag="batched-upper2", upper=np.int32(2)),
    op_record(
        "band_part",
        _band_part,
        normal(3, 3),
        tag="diagonal",
        lower=np.int32(0),
        upper=np.int32(0),
    ),
    # sorting
    op_record(
        "topk",
        _topk,
        normal(3, 6),
        tag="default",
    ),
    op_record(
        "topk",
        _topk,
        normal(3, 6),
        tag="k2-axis0-ascending",
        k=2,
        axis=0,
        ascending=True,
    ),
    op_record(
        "topk",
        lambda x, k, return_indices: _topk(x, k)[0],
        normal(2, 5),
        tag="values-only",
        k=3,
        return_indices=False,
    ),
    op_record("argsort", _argsort, normal(3, 5), tag="default-descending"),
    op_record("argsort", _argsort, normal(4, 3), tag="axis0-ascending", axis=0, ascending=True),
    op_record("argsort", _argsort, ints(-99, 99, 7), tag="i32-rank1", ascending=True),
    # space/depth
    op_record("depth_to_space", _depth_to_space, normal(2, 8, 2, 3), block_size=2),
    op_record("space_to_depth", _space_to_depth, normal(2, 2, 4, 6), block_size=2),
    op_record("pixel_shuffle", _pixel_shuffle, normal(2, 8, 2, 3), upscale_factor=2),
    op_record(
        "pixel_unshuffle", _pixel_unshuffle, normal(1, 2, 6, 3), downscale_factor=np.uint32(3)
    ),
    op_record(
        "upsample_nearest_neighbor",
        _upsample,
        normal(1, 2, 3, 4),
        tag="2x3",
        scale_factor_height=2,
        scale_factor_width=3,
    ),
    op_record("upsample_nearest_neighbor", _upsample, normal(2, 3, 4), tag="rank3-default"),
    op_record(
        "upsample_nearest_neighbor",
        _upsample,
        normal(1, 1, 3, 2),
        tag="fractional",
        scale_factor_height=F32(1.5),
        scale_factor_width=F32(2.0),
    ),
    # pooling (avg_pool's x goes by keyword: see test_run_op_avg_pool_positional_input)
    op_record(
        "max_pool",
        _max_pool,
        normal(1, 2, 6, 6),
        tag="2x2-stride2",
        kernel_sizes=[2, 2],
        strides=[2, 2],
        pad_type="valid",
    ),
    op_record(
        "max_pool",
        _max_pool,
        normal(2, 2, 5, 5),
        tag="3x3-same",
        kernel_sizes=[3, 3],
        strides=[1, 1],
        pad_type="same",
    ),
    op_record(
        "max_pool",
        _max_pool,
        normal(1, 2, 6, 5),
        tag="3x3-custom-stride2",
        kernel_sizes=[3, 3],
        strides=[2, 2],
        pad_type="custom",
        pad=[1, 1, 1, 1],
    ),
    op_record(
        "max_pool",
        _max_pool,
        normal(1, 2, 5, 5),
        tag="ceil_mode",
        kernel_sizes=[2, 2],
        strides=[2, 2],
        pad_type="valid",
        ceil_mode=True,
    ),
    op_record(
        "max_pool",
        _max_pool,
        normal(2, 3, 7),
        tag="1d",
        kernel_sizes=[3],
        strides=[2],
        pad_type="valid",
    ),
    op_record(
        "avg_pool",
        _avg_pool,
        **ACCUM,
        tag="2x2-stride2",
        x=const(1, 2, 6, 6),
        kernel_sizes=[2, 2],
        strides=[2, 2],
        pad_type="valid",
    ),
    op_record(
        "avg_pool",
        _avg_pool,
        **ACCUM,
        tag="3x3-same-include-padding",
        x=const(2, 2, 5, 5),
        kernel_sizes=[3, 3],
        strides=[1, 1],
        pad_type="same",
    ),
    op_record(
        "avg_pool",
        _avg_pool,
        **ACCUM,
        tag="3x3-same-exclude-padding",
        x=const(2, 2, 5, 5),
        kernel_sizes=[3, 3],
        strides=[2, 2],
        pad_type="same",
        exclude_padding_from_average=True,
    ),
    op_record(
        "avg_pool",
        _avg_pool,
        **ACCUM,
        tag="custom-exclude-padding",
        x=const(1, 1, 4, 5),
        kernel_sizes=[2, 3],
        strides=[1, 2],
        pad_type="custom",
        pad=[1, 0, 2, 1],
        exclude_padding_from_average=True,
    ),
    op_record(
        "avg_pool",
        _avg_pool,
        **ACCUM,
        tag="1d",
        x=const(2, 3, 7),
        kernel_sizes=[3],
        strides=[2],
        pad_type="valid",
    ),
    # attention
    op_record(
        "scaled_dot_product_attention",
        _sdpa,
        normal(2, 3, 4),
        normal(2, 5, 4),
        normal(2, 5, 6),
        tag="no-mask",
        ane=False,
        **ACCUM,
    ),
    op_record(
        "scaled_dot_product_attention",
        _sdpa,
        normal(1, 2, 3, 4),
        normal(1, 2, 5, 4),
        normal(1, 2, 5, 3),
        normal(3, 5, scale=2),
        tag="float-mask-broadcast",
        ane=False,
        **ACCUM,
    ),
    op_record(
        "scaled_dot_product_attention",
        _sdpa,
        normal(2, 3, 4),
        normal(2, 3, 4),
        normal(2, 3, 2),
        fixed(np.tril(np.ones((3, 3), bool)), bool),
        tag="causal-bool-mask",
        ane=False,
        **ACCUM,
    ),
    # quantization
    op_record(
        "quantize",
        _quantize,
        normal(3, 4, scale=30),
        tag="int8-per-tensor",
        scale=F32(0.5),
        zero_point=np.int8(3),
        output_dtype="int8",
    ),
    op_record(
        "quantize",
        _quantize,
        fixed([0.5, 1.5, 2.5, -0.5, -2.5, 300.0, -300.0]),
        tag="int8-ties-and-clip",
        scale=F32(1.0),
        output_dtype="int8",
    ),
    op_record(
        "quantize",
        _quantize,
        normal(2, 3, scale=50, shift=100),
        tag="uint8-per-channel",
        scale=f32([0.5, 1.0, 2.0]),
        zero_point=np.array([0, 10, 128], np.uint8),
        axis=1,
        output_dtype="uint8",
    ),
    op_record(
        "dequantize",
        _dequantize,
        tag="int8-per-tensor",
        input=np.array([[-128, -1, 0], [1, 5, 127]], np.int8),
        scale=F32(0.25),
        zero_point=np.int8(-3),
    ),
    op_record(
        "dequantize",
        _dequantize,
        tag="uint8-per-channel",
        input=np.array([[0, 10, 255], [128, 3, 7]], np.uint8),
        scale=f32([0.5, 2.0]),
        zero_point=np.array([128, 1], np.uint8),
        axis=0,
    ),
]


# Op families whose rows live in tests/oprows/.
RECORDS += [*image.RECORDS, *indexing.RECORDS, *recurrent.RECORDS, *space.RECORDS]


# ---------------------------------------------------------------------------
# Running and comparing
# ---------------------------------------------------------------------------


#: The interpreter defines the semantics; "auto" runs the compiled ONNX Runtime
#: graph wherever the op can be lowered. Every table row runs on both.
ENGINES = ["interpreter", "auto"]


def simulate(op: str, *arrays: Any, numerics: str, executor: str = "auto", **attrs: Any) -> Any:
    """``sim.run_op``, asserting that ``op`` itself ran in the simulator (was not folded)."""
    simulated: list[str] = []
    real_run = interpreter.run

    def spy(program: Any, feeds: Any, **options: Any) -> Any:
        simulated.extend(o.op_type for o in program.functions["main"].operations)
        return real_run(program, feeds, **options)

    with mock.patch.object(interpreter, "run", spy):
        result = sim.run_op(op, *arrays, numerics=numerics, executor=executor, **attrs)
    assert op in simulated, f"{op} did not reach the simulator (ran {simulated})"
    return result


def _convert(value: Any, float_map: Callable[[np.ndarray], np.ndarray]) -> Any:
    if isinstance(value, tuple | list) and value and isinstance(value[0], np.ndarray):
        return type(value)(_convert(item, float_map) for item in value)
    if isinstance(value, np.ndarray | np.floating) and np.asarray(value).dtype.kind == "f":
        return float_map(np.asarray(value))
    return value


def _float64(array: np.ndarray) -> np.ndarray:
    return array.astype(np.float64)


def _fp16_values(array: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return array.astype(F16).astype(np.float64)


def reference(
    record: OpRecord, arrays: Sequence[Any], float_map: Callable[[np.ndarray], np.ndarray]
) -> Any:
    inputs = [_convert(a, float_map) for a in arrays]
    attrs = {name: _convert(value, float_map) for name, value in record.attrs.items()}
    with np.errstate(all="ignore"):
        return record.ref(*inputs, **attrs)


def _outputs(value: Any) -> list[np.ndarray]:
    return [np.asarray(v) for v in value] if isinstance(value, tuple) else [np.asarray(value)]


def assert_matches(result: Any, expected: Any, rtol: float, atol: float) -> None:
    results, wanted = _outputs(result), _outputs(expected)
    assert isinstance(result, tuple) == isinstance(expected, tuple)
    assert len(results) == len(wanted)
    for got, want in zip(results, wanted, strict=True):
        assert got.shape == want.shape
        if want.dtype.kind == "f":
            assert got.dtype == F32, "fp32 numerics returns every float as float32"
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
        else:
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)


def assert_fp16_rounding_of(result: Any, expected: Any, atol: float) -> None:
    """Each float output is the fp16 rounding of the exact value, within one fp16 ulp."""
    results, wanted = _outputs(result), _outputs(expected)
    assert len(results) == len(wanted)
    for got, want in zip(results, wanted, strict=True):
        assert got.shape == want.shape
        if want.dtype.kind != "f":
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
            continue
        assert got.dtype in (F16, F32)
        values = got.astype(np.float64)
        with np.errstate(over="ignore"):
            np.testing.assert_array_equal(values.astype(F16).astype(np.float64), values)
            rounded = want.astype(F16)
        ulp = np.spacing(np.abs(rounded)).astype(np.float64)
        rounded64 = rounded.astype(np.float64)
        finite = np.isfinite(rounded64)
        np.testing.assert_array_equal(values[~finite], rounded64[~finite])
        error = np.abs(values[finite] - rounded64[finite])
        assert np.all(error <= ulp[finite] + atol), (
            f"max error {error.max()} ulp-scaled {np.max(error / (ulp[finite] + atol))}"
        )


def params(records: Sequence[OpRecord]) -> list[Any]:
    return [
        pytest.param(
            record,
            id=record.id,
            marks=[pytest.mark.xfail(strict=True, reason=record.xfail)] if record.xfail else [],
        )
        for record in records
    ]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("record", params(RECORDS))
def test_op_matches_numpy(record: OpRecord, engine: str, rng: np.random.Generator) -> None:
    arrays = [make(rng) for make in record.inputs]
    result = simulate(record.op, *arrays, numerics="fp32", executor=engine, **record.attrs)
    expected = reference(record, arrays, _float64)
    assert_matches(result, expected, record.rtol, record.atol)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("record", params([r for r in RECORDS if r.ane]))
def test_op_ane_is_reference_rounded_to_fp16(
    record: OpRecord, engine: str, rng: np.random.Generator
) -> None:
    arrays = [make(rng) for make in record.inputs]
    result = simulate(record.op, *arrays, numerics="ane", executor=engine, **record.attrs)
    # ane stores every float value, inputs and constants included, as fp16
    expected = reference(record, arrays, _fp16_values)
    assert_fp16_rounding_of(result, expected, record.atol)


def test_record_ids_are_unique() -> None:
    ids = [record.id for record in RECORDS]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


# ---------------------------------------------------------------------------
# Composites in ane numerics: fp16 result close to the reference
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("record", params([r for r in RECORDS if not r.ane]))
def test_composite_op_ane_is_close_to_reference(
    record: OpRecord, engine: str, rng: np.random.Generator
) -> None:
    arrays = [make(rng) for make in record.inputs]
    result = simulate(record.op, *arrays, numerics="ane", executor=engine, **record.attrs)
    expected = reference(record, arrays, _fp16_values)
    for got, want in zip(_outputs(result), _outputs(expected), strict=True):
        assert got.shape == want.shape
        # a few fp16 roundings of intermediates (measured worst: 8.4e-4 of |want| + scale)
        scale = max(float(np.max(np.abs(want))), 1.0)
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=4e-3, atol=4e-3 * scale)


# ---------------------------------------------------------------------------
# ane numerics specifics
# ---------------------------------------------------------------------------


def test_ane_add_overflows_to_inf() -> None:
    result = sim.run_op("add", f16([60000, -60000, 1]), f16([10000, -10000, 2]), numerics="ane")
    assert result.dtype == F16
    np.testing.assert_array_equal(result, f16([np.inf, -np.inf, 3]))
    reference_math = sim.run_op(
        "add", f16([60000, -60000, 1]), f16([10000, -10000, 2]), numerics="fp32"
    )
    assert reference_math.dtype == F32
    np.testing.assert_array_equal(reference_math, f32([70000, -70000, 3]))


def test_ane_exp_overflows_and_underflows() -> None:
    result = sim.run_op("exp", f32([12.0, -20.0, 0.0]), numerics="ane")
    assert result.dtype == F32  # the declared dtype, holding fp16 values
    np.testing.assert_array_equal(result, f32([np.inf, F16(np.exp(-20.0)), 1.0]))


def test_ane_float32_inputs_are_rounded_to_fp16() -> None:
    x = f32([0.1, 1 / 3, 65519.0, 65520.0, 1e-8])
    result = sim.run_op("identity", x, numerics="ane")
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(result, x.astype(F16).astype(F32))
    assert np.isinf(result[3]) and result[2] == 65504.0


def test_fp32_numerics_computes_fp16_inputs_in_float32() -> None:
    x = f16([0.1, 2.0, 60000])
    result = sim.run_op("mul", x, f16([3.0, 3.0, 2.0]), numerics="fp32")
    assert result.dtype == F32
    np.testing.assert_allclose(result, x.astype(F32) * f32([3, 3, 2]), rtol=1e-7)
    assert np.isfinite(result).all()


def test_ane_matmul_accumulates_in_fp32_and_rounds_once() -> None:
    n = 4096
    x = np.full((1, n), 0.01, F16)
    y = np.ones((n, 1), F16)
    result = sim.run_op("matmul", x, y, numerics="ane")
    assert result.dtype == F16
    exact = float(np.dot(x.astype(np.float64)[0], y.astype(np.float64)[:, 0]))
    assert result[0, 0] == F16(exact)
    # A sequential fp16 accumulator would stall far below the exact value.
    sequential = F16(0)
    for value in x[0]:
        sequential = F16(sequential + value)
    assert float(sequential) < exact - 1
    assert result[0, 0] != sequential


def _pairwise_fp16_sum(values: np.ndarray) -> np.float16:
    """Sum with each partial sum in fp16, adding neighbours level by level (odd levels
    padded with 0)."""
    level = [F16(v) for v in values]
    while len(level) > 1:
        if len(level) % 2:
            level.append(F16(0))
        level = [F16(level[i] + level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


def test_ane_reduce_sum_accumulation_fp16_vs_fp32() -> None:
    x = np.random.default_rng(0).uniform(0, 0.2, 10000).astype(F16)
    exact = float(np.sum(x.astype(np.float64)))  # 998.82
    fp16 = sim.run_op("reduce_sum", x, numerics="ane", accumulation="fp16", axes=[0])
    fp32 = sim.run_op("reduce_sum", x, numerics="ane", accumulation="fp32", axes=[0])
    assert fp16.dtype == fp32.dtype == F16
    assert fp32 == F16(exact) == F16(999.0)
    assert fp16 == _pairwise_fp16_sum(x) == F16(998.5)
    assert fp16 != fp32
    # pairwise partial sums stay close; a sequential fp16 sum stalls far below
    sequential = F16(0)
    for value in x:
        sequential = F16(sequential + value)
    assert abs(float(fp16) - exact) < 1e-3 * exact < exact - float(sequential)
    reference_math = sim.run_op("reduce_sum", x, numerics="fp32", axes=[0])
    np.testing.assert_allclose(reference_math, exact, rtol=1e-6)


def test_ane_reduce_sum_fp16_accumulation_per_row() -> None:
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1, (3, 1000)).astype(F16)
    result = sim.run_op("reduce_sum", x, numerics="ane", axes=[-1], keep_dims=True)
    assert result.shape == (3, 1)
    for row in range(3):
        assert result[row, 0] == _pairwise_fp16_sum(x[row])


def test_ane_reduce_mean_divides_the_fp16_sum() -> None:
    x = np.full((2, 10000), 0.1, F16)
    result = sim.run_op("reduce_mean", x, numerics="ane", axes=[1])
    expected = F16(np.float32(_pairwise_fp16_sum(x[0])) / np.float32(10000))
    np.testing.assert_array_equal(result, [expected, expected])


def test_ane_softmax_rows_sum_to_one_within_fp16() -> None:
    rng = np.random.default_rng(4)
    x = (4 * rng.standard_normal((3, 64))).astype(F16)
    result = sim.run_op("softmax", x, numerics="ane", axis=-1)
    assert result.dtype == F16
    np.testing.assert_allclose(result.astype(np.float64).sum(axis=-1), 1.0, atol=2e-2)
    np.testing.assert_allclose(result, _softmax(x.astype(np.float64)), atol=2e-3)


# ---------------------------------------------------------------------------
# run_op's positional inputs
# ---------------------------------------------------------------------------


def test_run_op_avg_pool_positional_input() -> None:
    x = np.arange(16, dtype=F32).reshape(1, 1, 4, 4)
    result = sim.run_op(
        "avg_pool", x, kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid", numerics="fp32"
    )
    np.testing.assert_array_equal(result, f32([[[[2.5, 4.5], [10.5, 12.5]]]]))


# ---------------------------------------------------------------------------
# Coverage: every op the simulator implements has a row here
# ---------------------------------------------------------------------------

#: Ops tested elsewhere: const and compile-time weight decompression, and control flow
#: and lists, whose blocks are Python functions (tests/sim/test_control_flow.py).
NOT_COVERED_HERE = {
    "cond",
    "while_loop",
    "make_list",
    "list_length",
    "list_read",
    "list_write",
    "list_gather",
    "list_scatter",
    "const",
    "constexpr_affine_dequantize",
    "constexpr_blockwise_shift_scale",
    "constexpr_cast",
    "constexpr_lut_to_dense",
    "constexpr_lut_to_sparse",
    "constexpr_sparse_blockwise_shift_scale",
    "constexpr_sparse_to_dense",
    # draws: tests/sim/test_random_ops.py (degenerate distributions, seeds, statistics)
    "random_bernoulli",
    "random_categorical",
    "random_normal",
    "random_uniform",
    # tests/sim/test_resample.py: coremltools' examples and torch's grid_sample
    "resample",
}


def test_every_supported_op_is_covered() -> None:
    covered = {record.op for record in RECORDS}
    supported = set(sim.supported_ops())
    assert covered <= supported, sorted(covered - supported)
    assert supported - covered == NOT_COVERED_HERE, {
        "untested ops (add rows to RECORDS)": sorted(supported - covered - NOT_COVERED_HERE),
        "stale allowlist entries": sorted(NOT_COVERED_HERE - (supported - covered)),
    }
