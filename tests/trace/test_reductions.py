"""Reductions with axis and keepdims, against NumPy."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tracing import assert_traces_like_numpy, op_types

F32 = np.float32

REDUCTIONS: dict[str, Callable[..., Any]] = {
    "sum": np.sum,
    "mean": np.mean,
    "max": np.max,
    "min": np.min,
    "prod": np.prod,
    "amax": np.amax,
    "amin": np.amin,
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2), ()])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(name: str, axis: Any, keepdims: bool, rng: np.random.Generator) -> None:
    x = rng.uniform(0.5, 1.5, (3, 4, 5)).astype(F32)
    fn = REDUCTIONS[name]
    assert_traces_like_numpy(lambda v: fn(v, axis=axis, keepdims=keepdims), x, rtol=1e-5)


def test_methods_and_ufunc_reduce(rng: np.random.Generator) -> None:
    x = rng.standard_normal((3, 4)).astype(F32)
    assert_traces_like_numpy(
        lambda v: (v.sum(), v.mean(axis=0), v.max(1), v.min(keepdims=True)), x, rtol=1e-5
    )
    assert_traces_like_numpy(
        lambda v: (np.add.reduce(v), np.maximum.reduce(v, axis=1)), x, rtol=1e-5
    )


def test_integer_and_bool_reductions_follow_numpy_dtypes(rng: np.random.Generator) -> None:
    x = rng.integers(-5, 5, (3, 4)).astype(np.int32)
    assert_traces_like_numpy(lambda v: (v.sum(axis=0), v.mean(axis=1), v.max()), x, rtol=1e-6)
    assert_traces_like_numpy(lambda v: (v > 0).sum(axis=1), x)


def test_sum_with_dtype(rng: np.random.Generator) -> None:
    x = rng.standard_normal((3, 4)).astype(np.float16)
    assert_traces_like_numpy(lambda v: np.sum(v, axis=1, dtype=np.float32), x, rtol=1e-3)


def test_var_std_any_all_argmax(rng: np.random.Generator) -> None:
    x = rng.standard_normal((3, 4, 5)).astype(F32)
    assert_traces_like_numpy(
        lambda v: (np.var(v, axis=1), np.std(v, axis=(0, 2), keepdims=True)), x, rtol=1e-5
    )
    assert_traces_like_numpy(lambda v: np.var(v, ddof=1), x, rtol=1e-5)
    assert_traces_like_numpy(lambda v: (np.any(v > 1.5, axis=0), np.all(v > -3), (v > 0).any()), x)
    assert_traces_like_numpy(
        lambda v: (np.argmax(v, axis=1), np.argmin(v), v.argmax(axis=-1, keepdims=True)), x
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"axis": 1},
        {"axis": -1, "keepdims": True},
        {"axis": (0, 2)},
        {"axis": 0, "ord": 2},
        {"axis": 1, "ord": 1},
        {"axis": 2, "ord": np.inf, "keepdims": True},
        {"axis": 0, "ord": -np.inf},
        {"axis": (1, 2), "ord": "fro"},
    ],
)
def test_linalg_norm(kwargs: dict[str, Any], rng: np.random.Generator) -> None:
    x = rng.standard_normal((3, 4, 5)).astype(F32)
    assert_traces_like_numpy(lambda v: np.linalg.norm(v, **kwargs), x, rtol=1e-5)
    assert_traces_like_numpy(
        lambda v: np.linalg.norm(v, **kwargs), x.astype(np.float16), rtol=2e-3, atol=2e-3
    )


def test_linalg_norm_of_ints_is_float32() -> None:
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    program = assert_traces_like_numpy(lambda v: np.linalg.norm(v, axis=1), x, rtol=1e-6)
    assert op_types(program)[-1] == "sqrt"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"axis": (0, 1), "ord": 2}, "ord=2 for a 2-axis norm"),
        ({"axis": 1, "ord": 3}, "ord=3 for a vector norm"),
        ({"axis": (0, 1), "ord": "nuc"}, "ord='nuc' for a 2-axis norm"),
    ],
)
def test_linalg_norms_that_do_not_trace_are_named(kwargs: dict[str, Any], message: str) -> None:
    import anekit
    from anekit import errors

    with pytest.raises(errors.UnsupportedFunctionError, match=re.escape(message)):
        anekit.compile(lambda v: np.linalg.norm(v, **kwargs), np.ones((3, 4), F32))


def test_cumsum(rng: np.random.Generator) -> None:
    x = rng.standard_normal((3, 4)).astype(F32)
    assert_traces_like_numpy(lambda v: (np.cumsum(v, axis=1), np.cumsum(v)), x, rtol=1e-5)


def test_reduction_emits_one_native_op(rng: np.random.Generator) -> None:
    program = assert_traces_like_numpy(
        lambda v: v.mean(axis=-1, keepdims=True), rng.standard_normal((2, 8)).astype(F32)
    )
    assert op_types(program) == ["reduce_mean"]


@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    shape=hnp.array_shapes(min_dims=1, max_dims=4, max_side=4),
    op=st.sampled_from(["sum", "mean", "max", "min"]),
    keepdims=st.booleans(),
)
def test_reduction_axes_property(
    data: st.DataObject, shape: tuple[int, ...], op: str, keepdims: bool
) -> None:
    ndim = len(shape)
    axis = data.draw(
        st.one_of(
            st.none(),
            st.integers(-ndim, ndim - 1),
            st.lists(st.integers(0, ndim - 1), unique=True, min_size=1, max_size=ndim).map(tuple),
        )
    )
    x = np.random.default_rng(3).standard_normal(shape).astype(F32)
    fn = REDUCTIONS[op]
    assert_traces_like_numpy(lambda v: fn(v, axis=axis, keepdims=keepdims), x, rtol=1e-5, atol=1e-5)
