"""Window references shared by the conv and pooling rows (test_ops.py) and l2_pool (image.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np


def paddings(
    pad_type: str,
    pad: Any,
    spatial: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
) -> list[tuple[int, int]]:
    """Per spatial dim (before, after) padding, from MIL's conv documentation.

    ``same``: the output is ``ceil(d_in / stride)``; an odd total pad puts the
    extra element after (TensorFlow's SAME, ONNX's SAME_UPPER); ``same_lower`` before.
    """
    if pad_type == "custom":
        flat = [int(p) for p in pad]
        return [(flat[2 * i], flat[2 * i + 1]) for i in range(len(spatial))]
    if pad_type in ("same", "same_lower"):
        result = []
        for n, k, s, d in zip(spatial, kernel, strides, dilations, strict=True):
            total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
            low, high = total // 2, total - total // 2
            result.append((high, low) if pad_type == "same_lower" else (low, high))
        return result
    return [(0, 0)] * len(spatial)


def pool(
    x: Any,
    kernel_sizes: Any,
    strides: Any = None,
    pad_type: str = "valid",
    pad: Any = None,
    ceil_mode: bool = False,
    exclude_padding_from_average: bool = False,
    *,
    kind: str,
) -> Any:
    """Direct-loop max, avg or l2 pooling over windows of the (virtually zero-) padded input."""
    x = np.asarray(x, np.float64)
    spatial = x.shape[2:]
    rank = len(spatial)
    kernel = [int(k) for k in kernel_sizes]
    s = [int(v) for v in strides] if strides is not None else [1] * rank
    padding = paddings(pad_type, pad, spatial, kernel, s, [1] * rank)
    rounding = math.ceil if ceil_mode else math.floor
    out_spatial = [
        rounding((n + lo + hi - k) / ss) + 1
        for n, (lo, hi), k, ss in zip(spatial, padding, kernel, s, strict=True)
    ]
    out = np.empty((*x.shape[:2], *out_spatial))
    axes = tuple(range(2, 2 + rank))
    for position in np.ndindex(*out_spatial):
        starts = [p * ss - lo for p, ss, (lo, _) in zip(position, s, padding, strict=True)]
        window = x[
            (
                slice(None),
                slice(None),
                *(
                    slice(max(b, 0), min(b + k, n))
                    for b, k, n in zip(starts, kernel, spatial, strict=True)
                ),
            )
        ]
        at = (slice(None), slice(None), *position)
        if kind == "max":
            out[at] = window.max(axis=axes)
        elif kind == "l2":  # padded positions count as zeros
            out[at] = np.sqrt((window**2).sum(axis=axes))
        else:
            count = np.prod(window.shape[2:]) if exclude_padding_from_average else np.prod(kernel)
            out[at] = window.sum(axis=axes) / count
    return out
