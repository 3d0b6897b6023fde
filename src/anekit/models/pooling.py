"""Sentence pooling, shared by the encoders: CLS (the first position) or the mean over
the kept (non-padding) positions, in the ANE layout (:func:`pool`) and the row layout
(:func:`pool_rows`)."""

from __future__ import annotations

from typing import Any

import numpy as np

#: The poolings anekit implements (sentence-transformers' ``pooling_mode_*``).
POOLINGS = ("mean", "cls")


def pool(x: Any, keep: Any, pooling: str) -> Any:
    """(B, C, 1, S) states and the key mask (B, S) -> (B, C)."""
    batch, channels, _, length = x.shape
    if _checked(pooling) == "cls":
        return x[:, :, 0, 0]
    kept = keep.reshape(batch, 1, 1, length)
    summed = np.sum(x * kept, axis=3).reshape(batch, channels)
    return summed / np.sum(keep, axis=1, keepdims=True)


def pool_rows(x: Any, keep: Any, pooling: str) -> Any:
    """(B, S, C) states and the key mask (B, S) -> (B, C)."""
    batch, length, _ = x.shape
    if _checked(pooling) == "cls":
        return x[:, 0, :]
    summed = np.sum(x * keep.reshape(batch, length, 1), axis=1)
    return summed / np.sum(keep, axis=1, keepdims=True)


def _checked(pooling: str) -> str:
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    return pooling
