"""How the ANE stores a float: rounded to float16 (ties to even, overflow to ±inf),
and how a sum of stored values accumulates when every partial sum is stored too."""

from __future__ import annotations

from typing import Any

import numpy as np

from anekit.onnxgraph import MIN_SIZE, run_elementwise


def round_fp16(values: Any) -> np.ndarray:
    """``values`` rounded to the nearest float16 (ties to even, overflow to ±inf,
    subnormals kept), returned as float32. Large arrays go through ONNX Runtime's
    SIMD cast (bit-identical to NumPy's, which converts with scalar code)."""
    array = np.asarray(values, dtype=np.float32)
    if array.size < MIN_SIZE:
        with np.errstate(over="ignore", invalid="ignore"):
            return array.astype(np.float16).astype(np.float32)
    return run_elementwise("Identity", array, rounded=True)


def pairwise_fp16_sum(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """Sum with every partial sum rounded to fp16, combining neighbours pairwise.

    Vectorized: the reduced axes are moved last and flattened, then each level of
    the pairwise tree adds adjacent columns and rounds (log2(n) levels).
    """
    kept = [axis for axis in range(x.ndim) if axis not in axes]
    moved = np.transpose(x, kept + list(axes))
    outer = moved.shape[: len(kept)]
    count = int(np.prod([x.shape[axis] for axis in axes], dtype=np.int64))
    values = round_fp16(moved.reshape((*outer, count)))
    while values.shape[-1] > 1:
        if values.shape[-1] % 2:
            values = np.concatenate([values, np.zeros((*outer, 1), np.float32)], axis=-1)
        with np.errstate(over="ignore", invalid="ignore"):
            values = round_fp16(values[..., 0::2] + values[..., 1::2])
    result = values[..., 0] if count else np.zeros(outer, np.float32)
    if keepdims:
        result = result.reshape([1 if axis in axes else x.shape[axis] for axis in range(x.ndim)])
    return np.asarray(result)


__all__ = ["pairwise_fp16_sum", "round_fp16"]
