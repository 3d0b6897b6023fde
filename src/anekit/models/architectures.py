"""Each model family's traceable encoders, chosen by its configuration: BERT-family
models (:mod:`anekit.models.bert`) and ModernBERT (:mod:`anekit.models.modernbert`).

Both encoders take the same inputs in the ANE layout (token embeddings (B, C, 1, S) and
the key mask (B, S)); the row-layout encoders take :func:`anekit.models.embeddings.row_inputs`.
The modules are imported on use: they import the tracer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from anekit.errors import ModelError
from anekit.models.config import EncoderConfig, ModelConfig, ModernBertConfig
from anekit.models.weights import ModelWeights, ModernBertWeights, Weights


def make_encoder(
    config: ModelConfig, weights: ModelWeights, dtype: Any = np.float32
) -> Callable[[Any, Any], Any]:
    """``encode(hidden (B, C, 1, S), keep (B, S))`` -> pooled (B, C), not normalized, in
    ``dtype`` (float32: the reference; float16: what a package bucket traces)."""
    if isinstance(config, ModernBertConfig) and isinstance(weights, ModernBertWeights):
        from anekit.models import modernbert

        return modernbert.make_encoder(config, weights, dtype)
    if isinstance(config, EncoderConfig) and isinstance(weights, Weights):
        from anekit.models import bert

        return bert.make_encoder(config, weights, dtype)
    raise _mismatch(config, weights)


def make_row_encoder(
    config: ModelConfig, weights: ModelWeights
) -> tuple[Callable[..., Any], tuple[str, ...]]:
    """The float32 row-layout encoder (B, S, C) for ONNX Runtime, and its inputs' names
    in order."""
    if isinstance(config, ModernBertConfig) and isinstance(weights, ModernBertWeights):
        from anekit.models import modernbert

        return modernbert.make_row_encoder(config, weights), modernbert.ROW_INPUTS
    if isinstance(config, EncoderConfig) and isinstance(weights, Weights):
        from anekit.models import bert

        return bert.make_row_encoder(config, weights), bert.ROW_INPUTS
    raise _mismatch(config, weights)


def _mismatch(config: ModelConfig, weights: ModelWeights) -> ModelError:
    return ModelError(
        f"a {config.model_type} configuration with {type(weights).__name__}: "
        "read the weights with load_weights(folder, config)"
    )
