"""ModernBERT (granite-embedding r2 and the like) as traceable NumPy: the ANE layout for
the packages (:func:`make_encoder`) and the row layout for ONNX Runtime
(:func:`make_row_encoder`). Its configuration and weights are read by
:mod:`anekit.models.config` and :mod:`anekit.models.weights`.

What differs from BERT (:mod:`anekit.models.bert`), as transformers' ``ModernBertModel``
defines it (transformers 5.24, models/modernbert):

- no position table: rotary embeddings on queries and keys, from precomputed cos/sin
  tables of (head_dim, S) per layer type (``full_attention`` with
  ``global_rope_theta``, ``sliding_attention`` with ``local_rope_theta``); rotate-half
  is a slice and a concat along the channels, so no gather reaches the ANE;
- one fused Wqkv projection, a GeGLU MLP (``Wi`` to 2 x intermediate, ``act(input) *
  gate``, ``Wo``), LayerNorms without bias (``norm_bias``), no linear biases by default;
- pre-norm layers (the first layer's attention norm is the identity) and a final norm;
- every ``global_attn_every_n_layers``-th layer attends globally, the others within a
  band: keys at most ``local_attention // 2`` positions away (an additive band mask,
  a constant per bucket length in the ANE layout).

Activations are (B, C, 1, S); attention per head with scores laid out (B, S_keys,
S_queries) and the softmax over the keys, the query scale folded into the query
rows of Wqkv (rotation is linear, so scaling before it is the same). The same
function runs on float32 NumPy (the fp32 reference) and is traced into fp16.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from anekit import nn
from anekit.models.activations import activation as activation_named
from anekit.models.config import FULL, SLIDING, ModernBertConfig
from anekit.models.pooling import pool, pool_rows
from anekit.models.weights import ModernBertWeights
from anekit.ops.limits import FP16_TINY, MASK_FILL


def _inverse_frequencies(config: ModernBertConfig, kind: str) -> np.ndarray:
    """transformers' default RoPE: ``1 / theta ** (arange(0, d, 2) / d)``, float32."""
    depth = config.head_dim
    exponents = np.arange(0, depth, 2, dtype=np.float32) / depth
    return np.asarray(1.0 / (config.rope_theta[kind] ** exponents), np.float32)


def rotary_tables(
    config: ModernBertConfig, kind: str, length: int
) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of (head_dim, length) for ``kind`` layers: the angles of the inverse
    frequencies repeated over both halves of a head, as transformers does."""
    angles = np.arange(length, dtype=np.float32)[:, None] * _inverse_frequencies(config, kind)
    both = np.concatenate([angles, angles], axis=1).T  # (d, S)
    return np.cos(both).astype(np.float32), np.sin(both).astype(np.float32)


def band_mask(config: ModernBertConfig, length: int) -> np.ndarray:
    """(S_keys, S_queries): 0 where a sliding layer's query may see the key, else the
    finite mask fill."""
    positions = np.arange(length)
    far = np.abs(positions[:, None] - positions[None, :]) > config.window
    return np.where(far, np.float32(MASK_FILL), np.float32(0)).astype(np.float32)


def _layers(config: ModernBertConfig, weights: ModernBertWeights) -> list[dict[str, Any]]:
    """Each layer's tensors, float32 (out, in), the query scale 1/sqrt(d) folded into the
    query rows of Wqkv (and its bias); None for a norm or bias the model does not have
    (the first layer's attention norm is the identity)."""
    tensors = weights.tensors
    channels = config.hidden_size
    scale = np.ones((3 * channels, 1), np.float32)
    scale[:channels] = 1.0 / np.sqrt(config.head_dim)

    def optional(name: str, present: bool) -> np.ndarray | None:
        return tensors[name] if present else None

    layers = []
    for index, kind in enumerate(config.layer_types):
        base = f"layers.{index}."
        qkv_bias = optional(base + "attn.Wqkv.bias", config.attention_bias)
        layers.append(
            {
                "kind": kind,
                "attn_norm": optional(base + "attn_norm.weight", index > 0),
                "attn_norm_bias": optional(base + "attn_norm.bias", index > 0 and config.norm_bias),
                "qkv": tensors[base + "attn.Wqkv.weight"] * scale,
                "qkv_bias": None if qkv_bias is None else qkv_bias * scale[:, 0],
                "out": tensors[base + "attn.Wo.weight"],
                "out_bias": optional(base + "attn.Wo.bias", config.attention_bias),
                "mlp_norm": tensors[base + "mlp_norm.weight"],
                "mlp_norm_bias": optional(base + "mlp_norm.bias", config.norm_bias),
                "up": tensors[base + "mlp.Wi.weight"],
                "up_bias": optional(base + "mlp.Wi.bias", config.mlp_bias),
                "down": tensors[base + "mlp.Wo.weight"],
                "down_bias": optional(base + "mlp.Wo.bias", config.mlp_bias),
            }
        )
    return layers


def _norm(
    config: ModernBertConfig, weights: ModernBertWeights, name: str
) -> tuple[np.ndarray, np.ndarray | None]:
    """The weight and bias (None without ``norm_bias``) of the norm ``name``."""
    bias = weights.tensors[f"{name}.bias"] if config.norm_bias else None
    return weights.tensors[f"{name}.weight"], bias


def make_encoder(
    config: ModernBertConfig, weights: ModernBertWeights, dtype: Any = np.float32
) -> Callable[[Any, Any], Any]:
    """``encode(hidden, keep)``: token embeddings (B, C, 1, S) and the key mask (B, S)
    (1 for tokens, 0 for padding) -> the pooled embedding (B, C), not normalized. The
    rotary tables and band mask are constants for the input's length S."""
    dtype = np.dtype(dtype)
    heads, depth, half = config.num_heads, config.head_dim, config.head_dim // 2
    channels = config.hidden_size
    eps = config.norm_eps if dtype == np.float32 else max(config.norm_eps, FP16_TINY)
    activation = activation_named(config.hidden_act)

    def cast(array: np.ndarray | None) -> Any:
        return None if array is None else np.asarray(array, np.float32).astype(dtype)

    layers = [
        {name: value if name == "kind" else cast(value) for name, value in layer.items()}
        for layer in _layers(config, weights)
    ]
    embed_norm = tuple(cast(t) for t in _norm(config, weights, "embeddings.norm"))
    final_norm = tuple(cast(t) for t in _norm(config, weights, "final_norm"))
    constants: dict[int, dict[str, Any]] = {}

    def constants_for(length: int) -> dict[str, Any]:
        """The rotary tables of both layer kinds and the band mask, for ``length``."""
        if length not in constants:
            tables = {kind: tuple(cast(t) for t in rotary_tables(config, kind, length))
                      for kind in (FULL, SLIDING)}  # fmt: skip
            constants[length] = {"tables": tables, "band": cast(band_mask(config, length))}
        return constants[length]

    def rotate(x: Any, cos: Any, sin: Any) -> Any:
        """x * cos + rotate_half(x) * sin on one head's (B, d, S) channels."""
        turned = np.concatenate([-x[:, half:, :], x[:, :half, :]], axis=1)
        return x * cos + turned * sin

    def attention(x: Any, mask: Any, w: dict[str, Any], fixed: dict[str, Any]) -> Any:
        batch, _, _, size = x.shape
        qkv = nn.conv1x1(x, w["qkv"], w["qkv_bias"]).reshape(batch, 3 * channels, size)
        cos, sin = fixed["tables"][w["kind"]]
        scores_mask = mask + fixed["band"] if w["kind"] == SLIDING else mask
        outputs = []
        for head in range(heads):
            start = head * depth
            q = rotate(qkv[:, start : start + depth, :], cos, sin)
            k = rotate(qkv[:, channels + start : channels + start + depth, :], cos, sin)
            v = qkv[:, 2 * channels + start : 2 * channels + start + depth, :]
            scores = np.matmul(np.swapaxes(k, 1, 2), q) + scores_mask  # (B, S_keys, S_queries)
            outputs.append(np.matmul(v, nn.softmax(scores, axis=1)))
        merged = np.concatenate(outputs, axis=1).reshape(batch, channels, 1, size)
        return nn.conv1x1(merged, w["out"], w["out_bias"])

    def mlp(x: Any, w: dict[str, Any]) -> Any:
        inner = config.intermediate_size
        both = nn.conv1x1(x, w["up"], w["up_bias"])
        return nn.conv1x1(activation(both[:, :inner]) * both[:, inner:], w["down"], w["down_bias"])

    def encode(hidden: Any, keep: Any) -> Any:
        batch, _, _, size = hidden.shape
        fixed = constants_for(size)
        mask = ((1 - keep) * dtype.type(MASK_FILL)).reshape(batch, size, 1)
        x = nn.layer_norm(hidden, *embed_norm, axis=1, eps=eps)
        for w in layers:
            normed = (
                x
                if w["attn_norm"] is None
                else nn.layer_norm(x, w["attn_norm"], w["attn_norm_bias"], axis=1, eps=eps)
            )
            x = x + attention(normed, mask, w, fixed)
            x = x + mlp(nn.layer_norm(x, w["mlp_norm"], w["mlp_norm_bias"], axis=1, eps=eps), w)
        x = nn.layer_norm(x, *final_norm, axis=1, eps=eps)
        return pool(x, keep, config.pooling)

    return encode


#: The row encoder's inputs, in order (:func:`anekit.models.embeddings.row_inputs`).
ROW_INPUTS = ("hidden", "keep", "positions")


def make_row_encoder(
    config: ModernBertConfig, weights: ModernBertWeights
) -> Callable[[Any, Any, Any], Any]:
    """The same encoder in the row layout CPUs prefer, float32, for ONNX Runtime:
    ``encode(hidden (B, S, C), keep (B, S), positions (B, S))`` -> (B, C), not
    normalized. Linear layers are matmuls with constant weights (what ONNX Runtime
    quantizes to int8), all heads in one batched matmul. The rotary tables and the
    band mask are computed from ``positions`` in the graph, so that one model takes
    any length: the band is ``clip(|i - j| - window, 0, 1) * fill``, 0 inside the
    window and the fill beyond it (positions are whole numbers)."""
    heads, depth, half = config.num_heads, config.head_dim, config.head_dim // 2
    channels, inner, eps = config.hidden_size, config.intermediate_size, config.norm_eps
    activation = activation_named(config.hidden_act)
    layers = [
        {
            name: np.ascontiguousarray(value.T) if name in ("qkv", "out", "up", "down") else value
            for name, value in layer.items()
        }
        for layer in _layers(config, weights)
    ]
    embed_norm = _norm(config, weights, "embeddings.norm")
    final_norm = _norm(config, weights, "final_norm")
    frequencies = {kind: _inverse_frequencies(config, kind) for kind in (FULL, SLIDING)}

    def linear(x: Any, weight: Any, bias: Any) -> Any:
        return x @ weight if bias is None else x @ weight + bias

    def rotate(x: Any, cos: Any, sin: Any) -> Any:
        """x * cos + rotate_half(x) * sin on (B, S, H, d)."""
        turned = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return x * cos + turned * sin

    def encode(hidden: Any, keep: Any, positions: Any) -> Any:
        batch, length, _ = hidden.shape
        mask = ((1 - keep) * np.float32(MASK_FILL)).reshape(batch, 1, 1, length)
        queries = positions.reshape(batch, 1, length, 1)
        distance = np.abs(queries - positions.reshape(batch, 1, 1, length)) - config.window
        band = np.minimum(np.maximum(distance, 0.0), 1.0) * np.float32(MASK_FILL)
        tables = {}
        for kind, inverse in frequencies.items():
            angles = positions.reshape(batch, length, 1) * inverse  # (B, S, d/2)
            both = np.concatenate([angles, angles], axis=-1).reshape(batch, length, 1, depth)
            tables[kind] = (np.cos(both), np.sin(both))
        x = nn.layer_norm(hidden, *embed_norm, axis=-1, eps=eps)
        for w in layers:
            h = (
                x
                if w["attn_norm"] is None
                else nn.layer_norm(x, w["attn_norm"], w["attn_norm_bias"], axis=-1, eps=eps)
            )
            qkv = linear(h, w["qkv"], w["qkv_bias"])
            cos, sin = tables[str(w["kind"])]
            q = rotate(qkv[..., :channels].reshape(batch, length, heads, depth), cos, sin)
            k = rotate(qkv[..., channels : 2 * channels].reshape(batch, length, heads, depth),
                       cos, sin)  # fmt: skip
            v = qkv[..., 2 * channels :].reshape(batch, length, heads, depth)
            scores = np.matmul(q.transpose(0, 2, 1, 3), k.transpose(0, 2, 3, 1)) + mask
            if w["kind"] == SLIDING:
                scores = scores + band
            attended = np.matmul(nn.softmax(scores, axis=-1), v.transpose(0, 2, 1, 3))
            merged = attended.transpose(0, 2, 1, 3).reshape(batch, length, channels)
            x = x + linear(merged, w["out"], w["out_bias"])
            normed = nn.layer_norm(x, w["mlp_norm"], w["mlp_norm_bias"], axis=-1, eps=eps)
            both = linear(normed, w["up"], w["up_bias"])
            x = x + linear(activation(both[..., :inner]) * both[..., inner:], w["down"],
                           w["down_bias"])  # fmt: skip
        x = nn.layer_norm(x, *final_norm, axis=-1, eps=eps)
        return pool_rows(x, keep, config.pooling)

    return encode
