"""Elementwise ufuncs and operators: traced programs compute what NumPy computes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import anekit
from tracing import assert_traces_like_numpy, op_types

F32 = np.float32

# (name, function, input generator)
UNARY_CASES: list[tuple[str, Callable[[Any], Any], Callable[[np.random.Generator], np.ndarray]]] = [
    ("neg", lambda x: -x, lambda r: r.standard_normal((3, 4)).astype(F32)),
    ("pos", lambda x: +x, lambda r: r.standard_normal((3, 4)).astype(F32)),
    ("abs", abs, lambda r: r.standard_normal((3, 4)).astype(F32)),
    ("np.abs", np.abs, lambda r: r.standard_normal((3, 4)).astype(F32)),
    ("exp", np.exp, lambda r: r.standard_normal((3, 4)).astype(F32)),
    ("exp2", np.exp2, lambda r: r.standard_normal((3, 4)).astype(F32)),
    ("log", np.log, lambda r: r.uniform(0.1, 5, (3, 4)).astype(F32)),
    ("log2", np.log2, lambda r: r.uniform(0.1, 5, (3, 4)).astype(F32)),
    ("log10", np.log10, lambda r: r.uniform(0.1, 5, (3, 4)).astype(F32)),
    ("sqrt", np.sqrt, lambda r: r.uniform(0, 5, (3, 4)).astype(F32)),
    ("square", np.square, lambda r: r.standard_normal((3, 4)).astype(F32)),
    ("reciprocal", np.reciprocal, lambda r: r.uniform(0.5, 2, (3, 4)).astype(F32)),
    ("tanh", np.tanh, lambda r: r.standard_normal((3, 4)).astype(F32)),
    ("sin", np.sin, lambda r: r.standard_normal((3, 4)).astype(F32)),
    ("cos", np.cos, lambda r: r.standard_normal((3, 4)).astype(F32)),
    ("tan", np.tan, lambda r: r.uniform(-1, 1, (3, 4)).astype(F32)),
    ("arcsin", np.arcsin, lambda r: r.uniform(-0.9, 0.9, (3, 4)).astype(F32)),
    ("arccos", np.arccos, lambda r: r.uniform(-0.9, 0.9, (3, 4)).astype(F32)),
    ("arctan", np.arctan, lambda r: r.standard_normal((3, 4)).astype(F32)),
    ("sinh", np.sinh, lambda r: r.standard_normal((3, 4)).astype(F32)),
    ("cosh", np.cosh, lambda r: r.standard_normal((3, 4)).astype(F32)),
    ("arctanh", np.arctanh, lambda r: r.uniform(-0.9, 0.9, (3, 4)).astype(F32)),
    ("floor", np.floor, lambda r: (4 * r.standard_normal((3, 4))).astype(F32)),
    ("ceil", np.ceil, lambda r: (4 * r.standard_normal((3, 4))).astype(F32)),
    ("rint", np.rint, lambda r: np.array([[0.5, 1.5, 2.5, -0.5], [-1.5, 0.2, 3.7, -2.2]], F32)),
    ("sign", np.sign, lambda r: np.array([[-2.0, 0.0, 3.0]], F32)),
    ("isnan", np.isnan, lambda r: np.array([[np.nan, 1.0, np.inf, -np.inf]], F32)),
    ("isinf", np.isinf, lambda r: np.array([[np.nan, 1.0, np.inf, -np.inf]], F32)),
    ("isfinite", np.isfinite, lambda r: np.array([[np.nan, 1.0, np.inf, -np.inf]], F32)),
    ("exp of int32", np.exp, lambda r: np.arange(6, dtype=np.int32).reshape(2, 3)),
    ("neg of int32", lambda x: -x, lambda r: np.arange(-3, 3, dtype=np.int32).reshape(2, 3)),
    ("sqrt of fp16", np.sqrt, lambda r: r.uniform(0, 4, (4, 8)).astype(np.float16)),
]


@pytest.mark.parametrize(("name", "fn", "make"), UNARY_CASES, ids=[case[0] for case in UNARY_CASES])
def test_unary(
    name: str,
    fn: Callable[[Any], Any],
    make: Callable[[np.random.Generator], np.ndarray],
    rng: np.random.Generator,
) -> None:
    assert_traces_like_numpy(fn, make(rng), rtol=2e-6, atol=1e-6)


BINARY_CASES: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("add", lambda a, b: a + b),
    ("sub", lambda a, b: a - b),
    ("mul", lambda a, b: a * b),
    ("truediv", lambda a, b: a / b),
    ("floordiv", lambda a, b: a // b),
    ("mod", lambda a, b: a % b),
    ("maximum", np.maximum),
    ("minimum", np.minimum),
    ("gt", lambda a, b: a > b),
    ("ge", lambda a, b: a >= b),
    ("lt", lambda a, b: a < b),
    ("le", lambda a, b: a <= b),
    ("eq", lambda a, b: a == b),
    ("ne", lambda a, b: a != b),
]


@pytest.mark.parametrize(("name", "fn"), BINARY_CASES, ids=[case[0] for case in BINARY_CASES])
@pytest.mark.parametrize("dtype", [np.float32, np.int32], ids=["f32", "i32"])
def test_binary_same_dtype(
    name: str, fn: Callable[[Any, Any], Any], dtype: type, rng: np.random.Generator
) -> None:
    a: np.ndarray = rng.integers(-9, 9, (3, 4)).astype(dtype)
    b: np.ndarray = rng.integers(1, 9, (3, 4)).astype(dtype) * np.where(
        rng.random((3, 4)) < 0.5, -1, 1
    ).astype(dtype)
    assert_traces_like_numpy(fn, a, b)


def test_power_with_float_exponents(rng: np.random.Generator) -> None:
    a = rng.uniform(0.5, 3, (3, 4)).astype(F32)
    b = rng.uniform(-2, 2, (3, 4)).astype(F32)
    assert_traces_like_numpy(lambda x, y: x**y, a, b, rtol=1e-5)
    assert_traces_like_numpy(lambda x: x**3.0, a, rtol=1e-5)


def test_square_by_power_two_is_a_multiply(rng: np.random.Generator) -> None:
    program = assert_traces_like_numpy(lambda x: x**2, rng.standard_normal((2, 3)).astype(F32))
    assert op_types(program) == ["mul"]


def test_operators_with_constant_on_the_left(rng: np.random.Generator) -> None:
    w = rng.standard_normal((3, 4)).astype(F32)
    x = rng.standard_normal((3, 4)).astype(F32)
    assert_traces_like_numpy(lambda x: w - x, x)
    assert_traces_like_numpy(lambda x: 2.0 / (x + 5), x)
    assert_traces_like_numpy(lambda x: w @ x.T, x)


@pytest.mark.parametrize(
    ("dtype", "scalar"),
    [(np.float16, 2.5), (np.float32, 3), (np.int32, 7), (np.int32, 2.5), (np.float16, True)],
)
def test_python_scalars_are_weakly_typed(dtype: type, scalar: Any) -> None:
    x: np.ndarray = np.arange(1, 7, dtype=dtype).reshape(2, 3)
    assert_traces_like_numpy(lambda v: v * scalar + scalar, x, rtol=1e-3)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (np.float16, np.float32),
        (np.float32, np.float16),
        (np.int32, np.float16),
        (np.int32, np.float32),
        (np.float16, np.float64),
        (np.int32, np.int64),
    ],
)
def test_array_promotion_follows_numpy(left: type, right: type) -> None:
    x: np.ndarray = np.arange(1, 7, dtype=left).reshape(2, 3)
    constant: np.ndarray = np.arange(3, dtype=right) + 1
    assert_traces_like_numpy(lambda v: v + constant, x, rtol=1e-3)
    assert_traces_like_numpy(lambda v: v * np.float32(1.5), x, rtol=1e-3)


def test_comparisons_and_logic_on_masks(rng: np.random.Generator) -> None:
    x = rng.standard_normal((4, 5)).astype(F32)

    def fn(v: Any) -> Any:
        a, b = v > 0, v < 0.5
        return (a & b), (a | b), (a ^ b), ~a, np.logical_and(a, b), np.logical_not(b)

    assert_traces_like_numpy(fn, x)


def test_bool_mask_times_float(rng: np.random.Generator) -> None:
    x = rng.standard_normal((4, 5)).astype(np.float16)
    assert_traces_like_numpy(lambda v: (v > 0) * v + (v <= 0), x)


def test_where_and_clip(rng: np.random.Generator) -> None:
    x = rng.standard_normal((4, 5)).astype(F32)
    y = rng.standard_normal((5,)).astype(F32)
    assert_traces_like_numpy(lambda v: np.where(v > 0, v, 0.1 * v), x)
    assert_traces_like_numpy(lambda v, w: np.where(v > w, v, w), x, y)
    assert_traces_like_numpy(lambda v: np.where(y > 0, v, -1.0), x)
    assert_traces_like_numpy(lambda v: np.clip(v, -0.5, 0.5), x)
    assert_traces_like_numpy(lambda v: v.clip(min=0.0), x)
    assert_traces_like_numpy(lambda v: np.clip(v, y, 1.0), x)
    assert_traces_like_numpy(lambda v: np.clip(v.astype(np.int32), -1, 1), 3 * x)


def test_clip_with_scalar_bounds_is_one_native_op(rng: np.random.Generator) -> None:
    program = anekit.compile(
        lambda v: np.clip(v, -1, 1), rng.standard_normal((2, 3)).astype(F32), passes=False
    )
    assert op_types(program) == ["clip"]


def test_reciprocal_is_exact_not_epsilon_inverse() -> None:
    # MIL's `inverse` adds epsilon=1e-4; the tracer must not use it for 1/x.
    x = np.array([[1e-4, 2.0, -3.0]], F32)
    program = assert_traces_like_numpy(np.reciprocal, x)
    assert "inverse" not in op_types(program)


def test_log_of_zero_is_minus_infinity() -> None:
    assert_traces_like_numpy(np.log, np.array([[0.0, 1.0]], F32))


def test_astype_round_trips(rng: np.random.Generator) -> None:
    x = (3 * rng.standard_normal((3, 4))).astype(F32)
    assert_traces_like_numpy(lambda v: v.astype(np.int32), x)
    assert_traces_like_numpy(lambda v: v.astype(np.float16), x, rtol=1e-3)
    assert_traces_like_numpy(lambda v: (v > 0).astype(np.float32), x)
    assert_traces_like_numpy(lambda v: v.astype(bool), x)
    assert_traces_like_numpy(lambda v: np.astype(v, np.float64), x)


def test_round_with_decimals(rng: np.random.Generator) -> None:
    x = (10 * rng.standard_normal((3, 4))).astype(F32)
    assert_traces_like_numpy(np.round, x)
    assert_traces_like_numpy(lambda v: np.round(v, 2), x, rtol=1e-5)


@settings(max_examples=40, deadline=None)
@given(
    shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=1, max_dims=4, max_side=4),
    op=st.sampled_from(["add", "sub", "mul", "maximum", "greater"]),
)
def test_broadcasting_matches_numpy(shapes: Any, op: str) -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal(shapes.input_shapes[0]).astype(F32)
    b = rng.standard_normal(shapes.input_shapes[1]).astype(F32)
    fn = {
        "add": np.add,
        "sub": np.subtract,
        "mul": np.multiply,
        "maximum": np.maximum,
        "greater": np.greater,
    }[op]
    if not a.shape or not b.shape:
        return
    assert_traces_like_numpy(fn, a, b)


@settings(max_examples=25, deadline=None)
@given(
    shape=hnp.array_shapes(min_dims=1, max_dims=3, max_side=4),
    constant_shape=hnp.array_shapes(min_dims=0, max_dims=2, max_side=4),
)
def test_broadcasting_against_constants(
    shape: tuple[int, ...], constant_shape: tuple[int, ...]
) -> None:
    try:
        np.broadcast_shapes(shape, constant_shape)
    except ValueError:
        return
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype(F32)
    constant = rng.standard_normal(constant_shape).astype(F32)
    assert_traces_like_numpy(lambda v: v * constant - constant, x)
