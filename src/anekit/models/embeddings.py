"""Token embeddings, looked up on the host: gather does not run on the ANE.

NumPy only (no tracer, no coremltools), so that the processes that only embed (the
lane workers, the parent of ``Embedder(lanes=...)``) stay lean.
"""

from __future__ import annotations

import numpy as np

from anekit.models.config import EncoderConfig
from anekit.models.weights import Weights


def _summed(weights: Weights, config: EncoderConfig, ids: np.ndarray) -> np.ndarray:
    """Token + position + token-type embeddings of ``ids`` (B, S), as (B, S, C)."""
    length = ids.shape[1]
    positions = np.arange(config.position_offset, config.position_offset + length)
    return np.asarray(weights.word[ids] + weights.position[positions][None] + weights.token_type[0])


def embed(weights: Weights, config: EncoderConfig, ids: np.ndarray) -> np.ndarray:
    """The embeddings of ``ids`` (B, S) in the ANE layout (B, C, 1, S), float32."""
    summed = _summed(weights, config, ids)
    return np.ascontiguousarray(summed.transpose(0, 2, 1)[:, :, None, :], np.float32)


def embed_rows(weights: Weights, config: EncoderConfig, ids: np.ndarray) -> np.ndarray:
    """The embeddings of ``ids`` (B, S) in the row layout (B, S, C), float32."""
    return np.ascontiguousarray(_summed(weights, config, ids), np.float32)


__all__ = ["embed", "embed_rows"]
