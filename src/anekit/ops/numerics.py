"""The two numeric modes of the simulator: fp32 reference math and ANE fp16.

Values of every float MIL type are held in float32 arrays. What differs is how
an op's result is *stored*:

- ``fp32``: kept in float32 (fp16-declared values too: reference math).
- ``ane``: rounded to float16, with IEEE overflow to ±inf, as the Neural Engine
  stores every activation (ane-knowledge.md §2.1 rule 1). The rounded values are
  kept in float32 arrays (exactly representable there), so the next op reads them
  without a conversion and BLAS runs at float32 speed. Matmul-like ops compute
  their float32 product and are rounded once; the reduction ops accumulate in
  fp16 (pairwise, each partial sum rounded) or in fp32, by option, while the sums
  inside native composite ops (softmax, layer_norm, ...) accumulate in fp32.

Integers and booleans are exact in both modes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from anekit.errors import ProgramError
from anekit.ops import composites
from anekit.ops.fp16 import round_fp16
from anekit.ops.spaces import NumpySpace

Mode = Literal["fp32", "ane"]
Accumulation = Literal["fp16", "fp32"]

MODES: tuple[Mode, ...] = ("fp32", "ane")
ACCUMULATIONS: tuple[Accumulation, ...] = ("fp16", "fp32")

_FLOAT_KINDS = "f"


@dataclass(frozen=True)
class Numerics:
    """How values are stored and summed in one simulator run."""

    mode: Mode
    accumulation: Accumulation = "fp16"

    def __post_init__(self) -> None:
        checks = (
            ("simulator mode", self.mode, MODES),
            ("accumulation", self.accumulation, ACCUMULATIONS),
        )
        for what, value, choices in checks:
            if value not in choices:
                raise ProgramError(f"unknown {what} {value!r}; choose one of {', '.join(choices)}")

    @property
    def fp16(self) -> bool:
        """True in ``ane`` mode: float values are stored as float16."""
        return self.mode == "ane"

    def load(self, value: Any) -> Any:
        """A value in compute form: floats as float32 (stored values already are)."""
        if (
            isinstance(value, np.ndarray)
            and value.dtype.kind in _FLOAT_KINDS
            and value.dtype != np.float32
        ):
            return value.astype(np.float32)
        if isinstance(value, np.float16 | np.float64):
            return np.float32(value)
        return value

    def store(self, value: Any, dtype: np.dtype[Any] | None) -> Any:
        """An op result as the program stores it, for a Var of NumPy ``dtype``."""
        if dtype is None or not isinstance(value, np.ndarray | np.generic | int | float | bool):
            return value
        array = np.asarray(value)
        if dtype.kind in _FLOAT_KINDS:
            if self.fp16:
                return round_fp16(array)
            return array.astype(np.float32, copy=False)
        if dtype.kind == "b":
            return array.astype(np.bool_, copy=False)
        return array.astype(dtype, copy=False)

    def round(self, value: np.ndarray) -> np.ndarray:
        """An intermediate of a composite op, as the ANE would hold it (float32 form)."""
        if self.fp16:
            return round_fp16(value)
        return value

    def export(self, value: Any, dtype: np.dtype[Any]) -> np.ndarray:
        """A program output as the caller receives it: the declared dtype, except that
        reference (``fp32``) runs return every float as float32."""
        array = np.asarray(value)
        if dtype.kind in _FLOAT_KINDS and not self.fp16:
            return array.astype(np.float32, copy=False)
        with np.errstate(over="ignore", invalid="ignore"):
            return array.astype(dtype, copy=False)

    def sum(self, x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
        """Sum over ``axes`` with this run's accumulation (float inputs in float32 form):
        the rule for the explicit reduction ops (``reduce_sum``, ``reduce_mean``, ...)."""
        if not self.fp16 or self.accumulation == "fp32" or x.dtype.kind not in _FLOAT_KINDS:
            return np.asarray(np.sum(x, axis=axes, keepdims=keepdims, dtype=x.dtype))
        return pairwise_fp16_sum(x, axes, keepdims)


def pairwise_fp16_sum(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """Sum over ``axes`` with every partial sum rounded to fp16, neighbours combined
    pairwise (:func:`anekit.ops.composites.pairwise_sum`): the reduced axes are moved
    last and flattened, and each level of the tree is one vectorized step (log2(n))."""
    kept = [axis for axis in range(x.ndim) if axis not in axes]
    moved = np.transpose(x, kept + list(axes))
    outer = moved.shape[: len(kept)]
    count = int(np.prod([x.shape[axis] for axis in axes], dtype=np.int64))
    if count == 0:
        result = np.zeros(outer, np.float32)
    else:
        rows = np.asarray(moved, np.float32).reshape(-1, count)
        with np.errstate(over="ignore", invalid="ignore"):
            summed = composites.pairwise_sum(NumpySpace(rounding=True), rows, count)
        result = np.asarray(summed).reshape(outer)
    if keepdims:
        result = result.reshape([1 if axis in axes else x.shape[axis] for axis in range(x.ndim)])
    return np.asarray(result)
