"""The encoders' inputs made on the host: token embeddings (gather does not run on the
ANE), in the ANE layout for the packages and in the row layout for ONNX Runtime.

NumPy only (no tracer, no coremltools), so that the processes that only embed (the
lane workers, the parent of ``Embedder(lanes=...)``) stay lean.
"""

from __future__ import annotations

import numpy as np

from anekit.errors import ModelError
from anekit.models.config import EncoderConfig, ModelConfig
from anekit.models.weights import ModelWeights, ModernBertWeights


def _summed(weights: ModelWeights, config: ModelConfig, ids: np.ndarray) -> np.ndarray:
    """The embeddings the encoder starts from, (B, S, C): BERT's token + position +
    token-type embeddings; ModernBERT's token embeddings (its positions are rotary,
    inside the encoder)."""
    if isinstance(weights, ModernBertWeights):
        return np.asarray(weights.word[ids])
    if not isinstance(config, EncoderConfig):
        raise ModelError(f"BERT weights with a {config.model_type} configuration")
    offset = config.position_offset
    positions = np.arange(offset, offset + ids.shape[1])
    return np.asarray(weights.word[ids] + weights.position[positions][None] + weights.token_type[0])


def embed(weights: ModelWeights, config: ModelConfig, ids: np.ndarray) -> np.ndarray:
    """The embeddings of ``ids`` (B, S) in the ANE layout (B, C, 1, S), float32."""
    summed = _summed(weights, config, ids)
    return np.ascontiguousarray(summed.transpose(0, 2, 1)[:, :, None, :], np.float32)


def row_inputs(
    weights: ModelWeights, config: ModelConfig, ids: np.ndarray, keep: np.ndarray
) -> dict[str, np.ndarray]:
    """The row-layout encoder's inputs (:func:`anekit.models.bert.make_row_encoder`,
    :func:`anekit.models.modernbert.make_row_encoder`) for ``ids`` and their key mask
    (B, S), float32: ``hidden`` (B, S, C) and ``keep``, and for ModernBERT the
    ``positions`` (B, S) its rotary tables and band mask are computed from."""
    inputs = {
        "hidden": np.ascontiguousarray(_summed(weights, config, ids), np.float32),
        "keep": np.ascontiguousarray(keep, np.float32),
    }
    if isinstance(weights, ModernBertWeights):
        inputs["positions"] = np.broadcast_to(
            np.arange(ids.shape[1], dtype=np.float32), ids.shape
        ).copy()
    return inputs


__all__ = ["embed", "row_inputs"]
