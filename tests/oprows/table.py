"""The op table's machinery: input generators, constants and the row type.

Each family of MIL ops keeps its rows (MIL op, NumPy reference written from MIL's op
documentation, inputs, constants, tolerances) in a module of this package or in
tests/sim/test_ops.py, which checks every row in fp32 and ane numerics.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

F32 = np.float32
F16 = np.float16
I32 = np.int32

Gen = Callable[[np.random.Generator], Any]
Ref = Callable[..., Any]


def f32(values: Any) -> np.ndarray:
    return np.asarray(values, F32)


def f16(values: Any) -> np.ndarray:
    return np.asarray(values, F16)


# Transcendental float32 math (NumPy/SciPy) is within a few ulp of float64.
TRANS: dict[str, Any] = {"rtol": 1e-5, "atol": 1e-6}
# Sums and dot products accumulate float32 rounding over their terms.
ACCUM: dict[str, Any] = {"rtol": 1e-5, "atol": 1e-5}


# ---------------------------------------------------------------------------
# Input generators (called with the ``rng`` fixture) and fixed constants
# ---------------------------------------------------------------------------


def normal(*shape: int, scale: float = 1.0, shift: float = 0.0) -> Gen:
    return lambda rng: (shift + scale * rng.standard_normal(shape)).astype(F32)


def uniform(low: float, high: float, *shape: int) -> Gen:
    return lambda rng: rng.uniform(low, high, shape).astype(F32)


def ints(low: int, high: int, *shape: int) -> Gen:
    return lambda rng: rng.integers(low, high, shape).astype(I32)


def small(*shape: int) -> Gen:
    """Integer-valued floats in [-2, 2]: comparisons see ties."""
    return lambda rng: rng.integers(-2, 3, shape).astype(F32)


def halves(*shape: int) -> Gen:
    """Multiples of 0.5 in [-8, 8]: exact in fp16 and fp32."""
    return lambda rng: (0.5 * rng.integers(-16, 17, shape)).astype(F32)


def divisors(*shape: int) -> Gen:
    """Non-zero divisors: a quotient of ``halves`` by one is exact or 1/3 from an integer."""
    return lambda rng: rng.choice(np.array([-2, -1.5, -0.5, 0.5, 1, 1.5, 4], F32), shape)


def int_divisors(*shape: int) -> Gen:
    return lambda rng: rng.choice(np.array([-5, -3, -2, -1, 1, 2, 3, 7], I32), shape)


def bools(*shape: int) -> Gen:
    return lambda rng: rng.random(shape) < 0.5


def fixed(values: Any, dtype: Any = F32) -> Gen:
    array = np.asarray(values, dtype)
    return lambda rng: array.copy()


_CONSTANTS = np.random.default_rng(20240607)


def const(*shape: int, scale: float = 1.0, shift: float = 0.0) -> np.ndarray:
    """A fixed random float32 constant (for inputs MIL requires to be const)."""
    return (shift + scale * _CONSTANTS.standard_normal(shape)).astype(F32)


# ---------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class OpRecord:
    """One op on concrete inputs, with its NumPy reference."""

    op: str
    ref: Ref
    inputs: tuple[Gen, ...]
    attrs: Mapping[str, Any]
    tag: str
    rtol: float
    atol: float
    ane: bool
    xfail: str | None

    @property
    def id(self) -> str:
        return f"{self.op}-{self.tag}" if self.tag else self.op


def op_record(
    op: str,
    ref: Ref,
    *inputs: Gen,
    tag: str = "",
    rtol: float = 1e-6,
    atol: float = 0.0,
    ane: bool = True,
    xfail: str | None = None,
    **attrs: Any,
) -> OpRecord:
    """A table row: ``op`` on ``inputs`` (positional tensors) and ``attrs`` (constants).

    ``ref(*inputs, **attrs)`` is the NumPy reference (called with float inputs in
    float64). ``ane`` says whether the op's ``ane`` result is one fp16 rounding of
    the exact value (False for composites that round intermediates).
    """
    return OpRecord(op, ref, inputs, attrs, tag, rtol, atol, ane, xfail)


def shape_tag(*shapes: tuple[int, ...]) -> str:
    return "_".join("x".join(map(str, shape)) or "scalar" for shape in shapes)
