"""In-place operators and out= follow NumPy exactly, or are refused."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import anekit
from anekit import errors
from tracing import assert_traces_like_numpy

F32 = np.float32


def test_augmented_assignment_updates_every_reference(rng: np.random.Generator) -> None:
    def fn(x: Any) -> Any:
        y = x * 2
        alias = y
        y += 1  # NumPy updates `alias` too: same object
        y *= x
        return y, alias

    assert_traces_like_numpy(fn, rng.standard_normal((3, 4)).astype(F32))


def test_out_argument_into_a_traced_array(rng: np.random.Generator) -> None:
    def fn(x: Any) -> Any:
        y = x + 0
        np.multiply(y, 3, out=y)
        np.sum(x, axis=0, keepdims=True, out=None)
        return y

    assert_traces_like_numpy(fn, rng.standard_normal((3, 4)).astype(F32))


def test_in_place_keeps_the_target_dtype(rng: np.random.Generator) -> None:
    def fn(x: Any) -> Any:
        y = x.astype(np.float16)
        y += np.ones(4, F32)  # float32 result stored into float16 (same_kind)
        return y

    assert_traces_like_numpy(fn, rng.standard_normal((3, 4)).astype(F32), rtol=1e-3)


def test_in_place_that_numpy_refuses_is_refused() -> None:
    def fn(x: Any) -> Any:
        y = x.astype(np.int32)
        y += 0.5
        return y

    with pytest.raises(errors.UnsupportedDtypeError, match="same_kind"):
        anekit.compile(fn, np.ones((2, 2), F32), passes=False)


def test_in_place_broadcast_into_the_target(rng: np.random.Generator) -> None:
    def fn(x: Any) -> Any:
        y = x + 0
        y -= y.mean(axis=1, keepdims=True)
        return y

    assert_traces_like_numpy(fn, rng.standard_normal((3, 4)).astype(F32), rtol=1e-5)


def test_in_place_that_would_grow_the_target_is_refused() -> None:
    def fn(x: Any) -> Any:
        y = x[0] + 0
        y += x
        return y

    with pytest.raises(errors.ShapeError, match="non-broadcastable"):
        anekit.compile(fn, np.ones((2, 3), F32), passes=False)


def test_views_block_later_in_place_updates_of_their_base() -> None:
    for make_view in (lambda x: x.T, lambda x: x.reshape(-1), lambda x: x[None], np.squeeze):

        def fn(x: Any, make_view: Any = make_view) -> Any:
            y = x + 0
            view = make_view(y)
            y += 1
            return view

        with pytest.raises(errors.InPlaceWriteError):
            anekit.compile(fn, np.ones((2, 3), F32), passes=False)


def test_copies_do_not_block_in_place_updates(rng: np.random.Generator) -> None:
    def fn(x: Any) -> Any:
        y = x + 0
        z = y.copy()
        w = y.astype(np.float16)
        y += 1
        return y, z, w

    assert_traces_like_numpy(fn, rng.standard_normal((2, 3)).astype(F32), rtol=1e-3)
