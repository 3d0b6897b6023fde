"""Sentence pooling in the ANE layout, shared by the encoders: CLS (the first position)
or the mean over the kept (non-padding) positions."""

from __future__ import annotations

from typing import Any

import numpy as np

#: The poolings anekit implements (sentence-transformers' ``pooling_mode_*``).
POOLINGS = ("mean", "cls")


def pool(x: Any, keep: Any, pooling: str) -> Any:
    """(B, C, 1, S) states and the key mask (B, S) -> (B, C)."""
    batch, channels, _, length = x.shape
    if pooling == "cls":
        return x[:, :, 0, 0]
    if pooling != "mean":
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    kept = keep.reshape(batch, 1, 1, length)
    summed = np.sum(x * kept, axis=3).reshape(batch, channels)
    return summed / np.sum(keep, axis=1, keepdims=True)
