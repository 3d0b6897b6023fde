"""Reshape, transpose, concatenate, split and friends, against NumPy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tracing import assert_traces_like_numpy, op_types

F32 = np.float32


@pytest.fixture
def x(rng: np.random.Generator) -> np.ndarray:
    return rng.standard_normal((2, 3, 4)).astype(F32)


def test_reshape_forms(x: np.ndarray) -> None:
    assert_traces_like_numpy(lambda v: v.reshape(6, 4), x)
    assert_traces_like_numpy(lambda v: v.reshape((3, -1)), x)
    assert_traces_like_numpy(lambda v: np.reshape(v, (-1,)), x)
    assert_traces_like_numpy(lambda v: v.reshape(2, 3, 4), x)
    assert_traces_like_numpy(lambda v: (v.ravel(), v.flatten()), x)


def test_transposes(x: np.ndarray) -> None:
    assert_traces_like_numpy(lambda v: v.T, x)
    assert_traces_like_numpy(lambda v: v.transpose(1, 0, 2), x)
    assert_traces_like_numpy(lambda v: np.transpose(v, (2, 0, 1)), x)
    assert_traces_like_numpy(lambda v: v.transpose((0, 2, 1)), x)
    assert_traces_like_numpy(lambda v: (np.swapaxes(v, 0, 2), v.swapaxes(-1, -2), v.mT), x)
    assert_traces_like_numpy(lambda v: (np.moveaxis(v, 0, -1), np.moveaxis(v, [0, 1], [2, 0])), x)


def test_identity_transpose_emits_no_op(x: np.ndarray) -> None:
    program = assert_traces_like_numpy(lambda v: v.transpose(0, 1, 2) + 1, x)
    assert op_types(program) == ["add"]


def test_expand_dims_and_squeeze(rng: np.random.Generator) -> None:
    x = rng.standard_normal((3, 1, 4)).astype(F32)
    assert_traces_like_numpy(lambda v: np.expand_dims(v, 0), x)
    assert_traces_like_numpy(lambda v: np.expand_dims(v, (0, -1)), x)
    assert_traces_like_numpy(lambda v: (np.squeeze(v), v.squeeze(1), np.squeeze(v, axis=-2)), x)


def test_concatenate_stack_split(x: np.ndarray) -> None:
    assert_traces_like_numpy(lambda v: np.concatenate([v, v * 2], axis=1), x)
    assert_traces_like_numpy(lambda v: np.concatenate([v, np.ones((2, 3, 1), F32)], axis=-1), x)
    assert_traces_like_numpy(lambda v: np.concatenate([v, v], axis=None), x)
    assert_traces_like_numpy(lambda v: np.stack([v, v + 1, v - 1], axis=1), x)
    assert_traces_like_numpy(lambda v: np.stack([v, v], axis=-1), x)
    assert_traces_like_numpy(lambda v: tuple(np.split(v, 2, axis=2)), x)
    assert_traces_like_numpy(lambda v: tuple(np.split(v, [1, 3], axis=-1)), x)
    assert_traces_like_numpy(lambda v: tuple(np.array_split(v, 2, axis=1)), x)
    assert_traces_like_numpy(lambda v: (np.hstack([v[0], v[1]]), np.vstack([v[0], v[1]])), x)


def test_concatenate_promotes_like_numpy(rng: np.random.Generator) -> None:
    x = rng.standard_normal((2, 3)).astype(np.float16)
    assert_traces_like_numpy(lambda v: np.concatenate([v, np.zeros((2, 1), F32)], axis=1), x)


def test_broadcast_to_flip_tile_pad(rng: np.random.Generator) -> None:
    x = rng.standard_normal((3, 1)).astype(F32)
    assert_traces_like_numpy(lambda v: np.broadcast_to(v, (2, 3, 4)), x)
    assert_traces_like_numpy(lambda v: (np.flip(v), np.flip(v, axis=0)), x)
    assert_traces_like_numpy(lambda v: (np.tile(v, 2), np.tile(v, (2, 1, 3))), x)
    assert_traces_like_numpy(lambda v: np.pad(v, ((1, 2), (0, 1))), x)
    assert_traces_like_numpy(lambda v: np.pad(v, 1, constant_values=-1.0), x)


def test_iteration_and_len(x: np.ndarray) -> None:
    assert_traces_like_numpy(lambda v: sum(row * i for i, row in enumerate(v)) + len(v), x)


def test_shape_facts_are_static(x: np.ndarray) -> None:
    def fn(v: Any) -> Any:
        assert np.shape(v) == (2, 3, 4) and np.ndim(v) == 3 and np.size(v) == 24
        assert v.size == 24 and v.ndim == 3
        return v * v.shape[-1]

    assert_traces_like_numpy(fn, x)


def test_like_constructors_are_constants(x: np.ndarray) -> None:
    assert_traces_like_numpy(
        lambda v: v + np.ones_like(v) + np.zeros_like(v) + np.full_like(v, 2.0), x
    )
