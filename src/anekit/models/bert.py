"""A BERT-family encoder in the ANE's layout, as traceable NumPy.

Activations are (B, C, 1, S). Linear layers are 1x1 convolutions, attention is
computed per head with scores laid out (B, S_keys, S_queries) and the softmax over
the keys (axis 1), following Apple's ml-ane-transformers (ane-knowledge.md §3).
Padding keys get an additive -1e4 (finite in fp16, §2.1 rule 5). The query scale
1/sqrt(d) is folded into the query projection. LayerNorm normalizes the channels
with an epsilon fp16 can hold (BERT's 1e-12 cannot). Embedding lookups are not here:
they run on the host (:mod:`anekit.models.embeddings`), because gather does not
run on the ANE.

The same function runs on NumPy float32 arrays (the fp32 reference) and is traced
by ``anekit.compile`` into the fp16 program each package bucket holds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from anekit import nn
from anekit.models.activations import activation as activation_named
from anekit.models.config import EncoderConfig
from anekit.models.pooling import pool, pool_rows
from anekit.models.weights import Layer, Weights
from anekit.ops.limits import FP16_TINY, MASK_FILL

#: The row encoder's inputs, in order (:func:`anekit.models.embeddings.row_inputs`).
ROW_INPUTS = ("hidden", "keep")


def make_encoder(
    config: EncoderConfig, weights: Weights, dtype: Any = np.float32
) -> Callable[[Any, Any], Any]:
    """``encode(hidden, keep)``: embeddings (B, C, 1, S) and the key mask (B, S) (1 for
    tokens, 0 for padding) -> the pooled sentence embedding (B, C), not normalized."""
    dtype = np.dtype(dtype)
    heads, depth = config.num_heads, config.head_dim
    scale = 1.0 / np.sqrt(depth)
    eps = config.layer_norm_eps if dtype == np.float32 else max(config.layer_norm_eps, FP16_TINY)

    def cast(array: np.ndarray) -> np.ndarray:
        return np.asarray(array, np.float32).astype(dtype)

    prepared = [
        {
            "q": cast(layer.q * scale),
            "q_bias": cast(layer.q_bias * scale),
            **{
                name: cast(getattr(layer, name))
                for name in Layer.__dataclass_fields__
                if name not in ("q", "q_bias")
            },
        }
        for layer in weights.layers
    ]
    norm, norm_bias = cast(weights.norm), cast(weights.norm_bias)
    activation = activation_named(config.hidden_act)

    def attention(x: Any, mask: Any, w: dict[str, np.ndarray]) -> Any:
        batch, channels, _, length = x.shape
        q = nn.conv1x1(x, w["q"], w["q_bias"]).reshape(batch, channels, length)
        k = nn.conv1x1(x, w["k"], w["k_bias"]).reshape(batch, channels, length)
        v = nn.conv1x1(x, w["v"], w["v_bias"]).reshape(batch, channels, length)
        outputs = []
        for head in range(heads):
            part = slice(head * depth, (head + 1) * depth)
            # scores (B, S_keys, S_queries): keys on axis 1, the softmax over them
            scores = np.matmul(np.swapaxes(k[:, part, :], 1, 2), q[:, part, :]) + mask
            weights_ = nn.softmax(scores, axis=1)
            outputs.append(np.matmul(v[:, part, :], weights_))
        merged = np.concatenate(outputs, axis=1).reshape(batch, channels, 1, length)
        return nn.conv1x1(merged, w["out"], w["out_bias"])

    def encode(hidden: Any, keep: Any) -> Any:
        batch, _, _, length = hidden.shape
        mask = ((1 - keep) * dtype.type(MASK_FILL)).reshape(batch, length, 1)
        x = nn.layer_norm(hidden, norm, norm_bias, axis=1, eps=eps)
        for w in prepared:
            attended = attention(x, mask, w)
            x = nn.layer_norm(x + attended, w["norm1"], w["norm1_bias"], axis=1, eps=eps)
            inner = activation(nn.conv1x1(x, w["up"], w["up_bias"]))
            down = nn.conv1x1(inner, w["down"], w["down_bias"])
            x = nn.layer_norm(x + down, w["norm2"], w["norm2_bias"], axis=1, eps=eps)
        return pool(x, keep, config.pooling)

    return encode


def make_row_encoder(config: EncoderConfig, weights: Weights) -> Callable[[Any, Any], Any]:
    """The same encoder in the row layout CPUs and GPUs prefer: (B, S, C) activations,
    linear layers as matmuls with constant weights (what ONNX Runtime quantizes to
    int8), all heads in one batched matmul. float32. ``encode(hidden (B, S, C), keep
    (B, S))`` -> (B, C), not normalized."""
    heads, depth = config.num_heads, config.head_dim
    scale = np.float32(1.0 / np.sqrt(depth))
    eps = config.layer_norm_eps
    layers = [
        {
            "q_t": np.ascontiguousarray((layer.q * scale).T),
            "q_bias": layer.q_bias * scale,
            **{
                f"{name}_t": np.ascontiguousarray(getattr(layer, name).T)
                for name in ("k", "v", "out", "up", "down")
            },
            **{
                name: getattr(layer, name)
                for name in ("k_bias", "v_bias", "out_bias", "up_bias", "down_bias",
                             "norm1", "norm1_bias", "norm2", "norm2_bias")
            },
        }
        for layer in weights.layers
    ]  # fmt: skip
    activation = activation_named(config.hidden_act)

    def encode(hidden: Any, keep: Any) -> Any:
        batch, length, channels = hidden.shape
        mask = ((1 - keep) * np.float32(MASK_FILL)).reshape(batch, 1, 1, length)
        x = nn.layer_norm(hidden, weights.norm, weights.norm_bias, axis=-1, eps=eps)
        for w in layers:
            q = (x @ w["q_t"] + w["q_bias"]).reshape(batch, length, heads, depth)
            k = (x @ w["k_t"] + w["k_bias"]).reshape(batch, length, heads, depth)
            v = (x @ w["v_t"] + w["v_bias"]).reshape(batch, length, heads, depth)
            scores = np.matmul(q.transpose(0, 2, 1, 3), k.transpose(0, 2, 3, 1)) + mask
            attended = np.matmul(nn.softmax(scores, axis=-1), v.transpose(0, 2, 1, 3))
            merged = attended.transpose(0, 2, 1, 3).reshape(batch, length, channels)
            out = merged @ w["out_t"]
            x = nn.layer_norm(x + out + w["out_bias"], w["norm1"], w["norm1_bias"], eps=eps)
            inner = activation(x @ w["up_t"] + w["up_bias"])
            down = inner @ w["down_t"]
            x = nn.layer_norm(x + down + w["down_bias"], w["norm2"], w["norm2_bias"], eps=eps)
        return pool_rows(x, keep, config.pooling)

    return encode
