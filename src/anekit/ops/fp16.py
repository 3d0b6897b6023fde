"""How the ANE stores a float: rounded to float16 (ties to even, overflow to ±inf)."""

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


__all__ = ["round_fp16"]
