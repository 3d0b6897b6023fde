"""Basic slicing and gathers, against NumPy (hypothesis over slices)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import anekit
from anekit import nn
from tracing import assert_traces_like_numpy, op_types

F32 = np.float32


def test_issue_examples(rng: np.random.Generator) -> None:
    x = rng.standard_normal((3, 8, 5)).astype(F32)
    assert_traces_like_numpy(lambda v: v[:, 0:4], x)
    assert_traces_like_numpy(lambda v: v[..., 1], x)
    assert_traces_like_numpy(lambda v: v[1], x)
    assert_traces_like_numpy(lambda v: v[-1, ::2, 1:-1], x)
    assert_traces_like_numpy(lambda v: v[None, :, None, 2], x)
    assert_traces_like_numpy(lambda v: v[::-1, 6:1:-2], x)
    assert_traces_like_numpy(lambda v: v[1, 2, 3], x)


def test_full_slice_emits_no_op(rng: np.random.Generator) -> None:
    program = assert_traces_like_numpy(
        lambda v: v[:, ...] * 2, rng.standard_normal((2, 3)).astype(F32)
    )
    assert op_types(program) == ["mul"]


def test_gather_with_constant_and_traced_indices(rng: np.random.Generator) -> None:
    table = rng.standard_normal((10, 4)).astype(F32)
    ids = np.array([[1, 9], [0, 3]], np.int32)
    assert_traces_like_numpy(lambda t: t[[0, 2, -1]], table)
    assert_traces_like_numpy(lambda t: t[:, np.array([3, 0])], table)
    assert_traces_like_numpy(lambda t: np.take(t, [1, 2], axis=1), table)
    assert_traces_like_numpy(lambda t: t[np.arange(10) % 2 == 0], table)
    program = assert_traces_like_numpy(lambda i: nn.embedding(i, table), ids)
    assert op_types(program) == ["gather"]


def _slices(size: int) -> st.SearchStrategy[Any]:
    bound = st.one_of(st.none(), st.integers(-size - 2, size + 2))
    step = st.one_of(st.none(), st.integers(-3, 3).filter(lambda s: s != 0))
    return st.one_of(st.integers(-size, size - 1), st.builds(slice, bound, bound, step))


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_basic_indexing_property(data: st.DataObject) -> None:
    shape = (4, 5, 3)
    x = np.arange(np.prod(shape), dtype=F32).reshape(shape)
    count = data.draw(st.integers(1, 3))
    key = tuple(data.draw(_slices(shape[i])) for i in range(count))
    if data.draw(st.booleans()):
        key = (Ellipsis, *key[1:]) if len(key) > 1 else key
    try:
        expected = x[key]
    except IndexError:
        return
    if expected.size == 0:
        return
    program = anekit.compile(lambda v: v[key] + 0, x, passes=False)
    assert_traces_like_numpy(lambda v: v[key] + 0, x)
    assert program.output_specs[0].shape == (expected.shape or (1,))
