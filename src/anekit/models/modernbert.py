"""ModernBERT (granite-embedding r2 and the like) in the ANE's layout, as traceable NumPy.

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
  a constant per bucket length).

Activations are (B, C, 1, S); attention per head with scores laid out (B, S_keys,
S_queries) and the softmax over the keys, the query scale folded into the query
rows of Wqkv (rotation is linear, so scaling before it is the same). The same
function runs on float32 NumPy (the fp32 reference) and is traced into fp16.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from anekit import nn
from anekit.errors import ModelError
from anekit.models.activations import ACTIVATIONS
from anekit.models.pooling import pool
from anekit.ops.limits import FP16_TINY, MASK_FILL

#: transformers' ModernBertConfig defaults (default_theta) for the two layer types.
GLOBAL_THETA, LOCAL_THETA = 160_000.0, 10_000.0
FULL, SLIDING = "full_attention", "sliding_attention"


@dataclass(frozen=True)
class ModernBertConfig:
    """What the encoder needs from a ModernBERT ``config.json``."""

    hidden_size: int
    num_heads: int
    intermediate_size: int
    hidden_activation: str
    norm_eps: float
    layer_types: tuple[str, ...]
    rope_theta: dict[str, float]
    local_attention: int
    vocab_size: int
    pad_token_id: int
    max_position_embeddings: int
    norm_bias: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    pooling: str = "mean"

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def window(self) -> int:
        """How far apart a query and a key may be in a sliding layer (inclusive)."""
        return self.local_attention // 2


def read_config(folder: Path, pooling: str = "mean") -> ModernBertConfig:
    """The ModernBERT configuration in ``folder``/config.json (old and new rope keys)."""
    path = folder / "config.json"
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as error:
        raise ModelError(f"{path}: cannot read it as JSON: {error}") from error
    if data.get("model_type") != "modernbert":
        raise ModelError(f"{path}: model_type {data.get('model_type')!r} is not modernbert")
    layers = int(data["num_hidden_layers"])
    every = int(data.get("global_attn_every_n_layers", 3))
    types = data.get("layer_types") or [SLIDING if i % every else FULL for i in range(layers)]
    rope = data.get("rope_parameters") or {}
    theta = {}
    for kind, old_key, default in ((FULL, "global_rope_theta", GLOBAL_THETA),
                                   (SLIDING, "local_rope_theta", LOCAL_THETA)):  # fmt: skip
        settings = rope.get(kind) or {}
        if settings.get("rope_type", "default") != "default":
            raise ModelError(
                f"{path}: rope_type {settings['rope_type']!r} ({kind}) is not supported"
            )
        theta[kind] = float(settings.get("rope_theta", data.get(old_key, default)))
    activation = str(data.get("hidden_activation", "gelu"))
    if activation not in ACTIVATIONS:
        raise ModelError(
            f"{path}: hidden_activation {activation!r} is not supported ({', '.join(ACTIVATIONS)})"
        )
    try:
        config = ModernBertConfig(
            hidden_size=int(data["hidden_size"]),
            num_heads=int(data["num_attention_heads"]),
            intermediate_size=int(data["intermediate_size"]),
            hidden_activation=activation,
            norm_eps=float(data.get("norm_eps", 1e-5)),
            layer_types=tuple(str(kind) for kind in types),
            rope_theta=theta,
            local_attention=int(data.get("local_attention", 128)),
            vocab_size=int(data["vocab_size"]),
            pad_token_id=int(data.get("pad_token_id", 50283)),
            max_position_embeddings=int(data.get("max_position_embeddings", 8192)),
            norm_bias=bool(data.get("norm_bias", False)),
            attention_bias=bool(data.get("attention_bias", False)),
            mlp_bias=bool(data.get("mlp_bias", False)),
            pooling=pooling,
        )
    except KeyError as error:
        raise ModelError(f"{path}: missing {error.args[0]!r}") from error
    if config.hidden_size % config.num_heads:
        raise ModelError(f"{path}: hidden_size is not a multiple of num_attention_heads")
    if len(config.layer_types) != layers or set(config.layer_types) - {FULL, SLIDING}:
        raise ModelError(f"{path}: layer_types must name {layers} layers, each {FULL} or {SLIDING}")
    return config


def read_weights(folder: Path) -> dict[str, np.ndarray]:
    """``model.safetensors`` as float32 arrays, names without the ``model.`` prefix."""
    from safetensors.numpy import load_file

    path = folder / "model.safetensors"
    if not path.exists():
        raise ModelError(f"{folder}: no model.safetensors")
    tensors = load_file(str(path))
    return {
        (name[len("model.") :] if name.startswith("model.") else name): value.astype(np.float32)
        for name, value in tensors.items()
    }


def rotary_tables(
    config: ModernBertConfig, kind: str, length: int
) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of (head_dim, length) for ``kind`` layers: transformers' default
    RoPE, ``inv_freq = 1 / theta ** (arange(0, d, 2) / d)`` repeated over both halves."""
    depth = config.head_dim
    inv_freq = 1.0 / (config.rope_theta[kind] ** (np.arange(0, depth, 2, dtype=np.float32) / depth))
    angles = np.arange(length, dtype=np.float32)[:, None] * inv_freq.astype(np.float32)
    both = np.concatenate([angles, angles], axis=1).T  # (d, S)
    return np.cos(both).astype(np.float32), np.sin(both).astype(np.float32)


def band_mask(config: ModernBertConfig, length: int) -> np.ndarray:
    """(S_keys, S_queries): 0 where a sliding layer's query may see the key, else the
    finite mask fill."""
    positions = np.arange(length)
    far = np.abs(positions[:, None] - positions[None, :]) > config.window
    return np.where(far, np.float32(MASK_FILL), np.float32(0)).astype(np.float32)


def make_encoder(
    config: ModernBertConfig, weights: dict[str, np.ndarray], length: int, dtype: Any = np.float32
) -> Callable[[Any, Any], Any]:
    """``encode(hidden, keep)``: token embeddings (B, C, 1, ``length``) and the key mask
    (B, length) (1 for tokens, 0 for padding) -> the pooled embedding (B, C), not
    normalized. The rotary tables and band mask are constants for ``length``."""
    dtype = np.dtype(dtype)
    heads, depth, half = config.num_heads, config.head_dim, config.head_dim // 2
    channels = config.hidden_size
    eps = config.norm_eps if dtype == np.float32 else max(config.norm_eps, FP16_TINY)
    activation = ACTIVATIONS[config.hidden_activation]

    def cast(array: np.ndarray | None) -> Any:
        return None if array is None else np.asarray(array, np.float32).astype(dtype)

    def get(name: str) -> np.ndarray:
        if name not in weights:
            raise ModelError(f"the checkpoint has no {name}")
        return weights[name]

    def bias(name: str, present: bool) -> np.ndarray | None:
        return get(name) if present else None

    scale = np.ones((3 * channels, 1), np.float32)
    scale[:channels] = 1.0 / np.sqrt(depth)  # the query rows
    layers = []
    for index, kind in enumerate(config.layer_types):
        prefix = f"layers.{index}."
        qkv_bias = bias(prefix + "attn.Wqkv.bias", config.attention_bias)
        layers.append(
            {
                "kind": kind,
                # the first layer's attention norm is the identity
                "attn_norm": cast(get(prefix + "attn_norm.weight")) if index else None,
                "attn_norm_bias": cast(
                    bias(prefix + "attn_norm.bias", index > 0 and config.norm_bias)
                ),
                "qkv": cast(get(prefix + "attn.Wqkv.weight") * scale),
                "qkv_bias": cast(None if qkv_bias is None else qkv_bias * scale[:, 0]),
                "out": cast(get(prefix + "attn.Wo.weight")),
                "out_bias": cast(bias(prefix + "attn.Wo.bias", config.attention_bias)),
                "mlp_norm": cast(get(prefix + "mlp_norm.weight")),
                "mlp_norm_bias": cast(bias(prefix + "mlp_norm.bias", config.norm_bias)),
                "up": cast(get(prefix + "mlp.Wi.weight")),
                "up_bias": cast(bias(prefix + "mlp.Wi.bias", config.mlp_bias)),
                "down": cast(get(prefix + "mlp.Wo.weight")),
                "down_bias": cast(bias(prefix + "mlp.Wo.bias", config.mlp_bias)),
            }
        )
    embed_norm = cast(get("embeddings.norm.weight"))
    embed_norm_bias = cast(bias("embeddings.norm.bias", config.norm_bias))
    final_norm = cast(get("final_norm.weight"))
    final_norm_bias = cast(bias("final_norm.bias", config.norm_bias))
    tables = {
        kind: tuple(cast(t) for t in rotary_tables(config, kind, length))
        for kind in (FULL, SLIDING)
    }
    band = cast(band_mask(config, length))

    def rotate(x: Any, cos: Any, sin: Any) -> Any:
        """x * cos + rotate_half(x) * sin on one head's (B, d, S) channels."""
        turned = np.concatenate([-x[:, half:, :], x[:, :half, :]], axis=1)
        return x * cos + turned * sin

    def attention(x: Any, mask: Any, w: dict[str, Any]) -> Any:
        batch, _, _, size = x.shape
        qkv = nn.conv1x1(x, w["qkv"], w["qkv_bias"]).reshape(batch, 3 * channels, size)
        cos, sin = tables[w["kind"]]
        scores_mask = mask + band if w["kind"] == SLIDING else mask
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
        if size != length:
            raise ModelError(f"this encoder was made for length {length}, got {size}")
        mask = ((1 - keep) * dtype.type(MASK_FILL)).reshape(batch, size, 1)
        x = nn.layer_norm(hidden, embed_norm, embed_norm_bias, axis=1, eps=eps)
        for w in layers:
            normed = (
                x
                if w["attn_norm"] is None
                else nn.layer_norm(x, w["attn_norm"], w["attn_norm_bias"], axis=1, eps=eps)
            )
            x = x + attention(normed, mask, w)
            x = x + mlp(nn.layer_norm(x, w["mlp_norm"], w["mlp_norm_bias"], axis=1, eps=eps), w)
        x = nn.layer_norm(x, final_norm, final_norm_bias, axis=1, eps=eps)
        return pool(x, keep, config.pooling)

    return encode


def embed(weights: dict[str, np.ndarray], ids: np.ndarray) -> np.ndarray:
    """Token embeddings (B, C, 1, S) for ``ids`` (B, S), looked up on the host."""
    table = weights["embeddings.tok_embeddings.weight"]
    rows = table[np.asarray(ids)]  # (B, S, C)
    return np.ascontiguousarray(rows.transpose(0, 2, 1)[:, :, None, :])
