"""Random ops (MIL iOS15 ``random_*``): draws from NumPy's PCG64 generator.

MIL fixes each distribution, its parameters and its output shape, not the generator
(coremltools' ``ops/defs/iOS15/random.py``): Core ML's own draws cannot be reproduced, so
two runs agree only where the distribution does not depend on the draw (a Bernoulli of
probability 0 or 1, a normal of deviation 0, a uniform with ``low == high``). ``seed``
(``-1``: none) seeds the generator of that op, so a seeded op repeats its values from run
to run, as MIL asks of it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from anekit.ops.registry import OpContext, register


def _generator(seed: Any) -> np.random.Generator:
    value = int(np.asarray(seed).reshape(-1)[0])
    return np.random.default_rng(None if value == -1 else value)


def _shape(shape: Any) -> list[int]:
    return [int(d) for d in np.asarray(shape).reshape(-1)]


@register("random_bernoulli")
def random_bernoulli(ctx: OpContext, shape: Any, prob: Any, seed: Any) -> Any:
    p = float(np.asarray(prob))
    return (_generator(seed).random(_shape(shape)) < p).astype(np.float32)


@register("random_normal")
def random_normal(ctx: OpContext, shape: Any, mean: Any, stddev: Any, seed: Any) -> Any:
    draw = _generator(seed).standard_normal(_shape(shape))
    return (float(np.asarray(mean)) + float(np.asarray(stddev)) * draw).astype(np.float32)


@register("random_uniform")
def random_uniform(ctx: OpContext, shape: Any, low: Any, high: Any, seed: Any) -> Any:
    lo, hi = float(np.asarray(low)), float(np.asarray(high))
    return (lo + (hi - lo) * _generator(seed).random(_shape(shape))).astype(np.float32)


@register("random_categorical")
def random_categorical(ctx: OpContext, x: Any, mode: Any, size: Any, seed: Any) -> Any:
    """``size`` class indices drawn with replacement from each distribution of the last
    axis (``x`` logits, or probabilities with ``mode="probs"``), as floats."""
    values = np.asarray(x, np.float64)
    logits = np.log(values) if str(mode) == "probs" else values
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probs = (shifted / shifted.sum(axis=-1, keepdims=True)).reshape(-1, values.shape[-1])
    count = int(np.asarray(size))
    generator = _generator(seed)
    drawn = np.stack([generator.choice(probs.shape[1], size=count, p=row) for row in probs])
    return drawn.reshape(*values.shape[:-1], count).astype(np.float32)
