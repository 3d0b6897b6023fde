"""MIL's random ops: the distribution and shape MIL defines, a seed that repeats them."""

from __future__ import annotations

from typing import Any

import coremltools as ct
import numpy as np
import pytest
from coremltools.converters.mil.mil import Builder as mb
from coremltools.converters.mil.mil import types

from anekit.sim.interpreter import run

SHAPE = np.array([2, 1, 3], np.int32)


def simulate(build: Any, mode: str = "fp32") -> dict[str, np.ndarray]:
    program = mb.program(
        input_specs=[mb.TensorSpec(shape=(1,), dtype=types.fp32)], opset_version=ct.target.iOS16
    )(build)
    return run(program, {"x": np.zeros(1, np.float32)}, mode=mode).outputs


@pytest.mark.parametrize("mode", ["fp32", "ane"])
def test_degenerate_distributions_give_their_one_value(mode: str) -> None:
    """coremltools' own tests: probability 1 and 0, deviation 0, ``low == high``."""

    def build(x: Any) -> Any:
        return (
            mb.random_bernoulli(shape=SHAPE, prob=1.0, name="ones"),
            mb.random_bernoulli(shape=SHAPE, prob=0.0, name="zeros"),
            mb.random_normal(shape=SHAPE, mean=1.5, stddev=0.0, name="mean"),
            mb.random_uniform(shape=SHAPE, low=-2.0, high=-2.0, name="low"),
            mb.random_categorical(x=np.array([[0.0, 60.0]], np.float32), size=4, name="sure"),
        )

    out = simulate(build, mode)
    assert out["ones"].shape == (2, 1, 3) and np.all(out["ones"] == 1.0)
    assert np.all(out["zeros"] == 0.0)
    assert np.all(out["mean"] == 1.5) and np.all(out["low"] == -2.0)
    assert out["sure"].shape == (1, 4) and np.all(out["sure"] == 1.0)


def test_a_seed_repeats_its_draws_and_no_seed_does_not() -> None:
    def build(x: Any) -> Any:
        return (
            mb.random_normal(shape=np.array([64], np.int32), seed=7, name="seeded"),
            mb.random_uniform(shape=np.array([64], np.int32), name="free"),
        )

    first, second = simulate(build), simulate(build)
    np.testing.assert_array_equal(first["seeded"], second["seeded"])
    assert not np.array_equal(first["free"], second["free"])


def test_draws_follow_their_distributions() -> None:
    n = 20_000

    def build(x: Any) -> Any:
        return (
            mb.random_normal(shape=np.array([n], np.int32), mean=3.0, stddev=2.0, seed=1, name="n"),
            mb.random_uniform(shape=np.array([n], np.int32), low=1.0, high=5.0, seed=2, name="u"),
            mb.random_bernoulli(shape=np.array([n], np.int32), prob=0.25, seed=3, name="b"),
            mb.random_categorical(
                x=np.array([0.2, 0.3, 0.5], np.float32), mode="probs", size=n, seed=4, name="c"
            ),
        )

    out = simulate(build)
    assert abs(out["n"].mean() - 3.0) < 0.05 and abs(out["n"].std() - 2.0) < 0.05
    assert out["u"].min() >= 1.0 and out["u"].max() < 5.0 and abs(out["u"].mean() - 3.0) < 0.05
    assert set(np.unique(out["b"])) == {0.0, 1.0} and abs(out["b"].mean() - 0.25) < 0.02
    frequencies = np.bincount(out["c"].astype(np.int64), minlength=3) / n
    np.testing.assert_allclose(frequencies, [0.2, 0.3, 0.5], atol=0.02)
