"""A transformer encoder block in the ANE layout, written as NumPy with ``anekit.nn``.

The layout follows Apple's ml-ane-transformers recipe (ane-knowledge.md §3): the
activations are (B, C, 1, S) with channels on axis 1 and the sequence last, linear
layers are 1x1 convolutions, attention is computed per head with the softmax over
the keys axis, and layer_norm normalizes the channels. Every shape is static.

    anekit doctor examples/ane_attention.py:encoder --shape x=1,256,1,128:float16

reports every op of it on the ANE for every family (a prediction, not a measurement).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from anekit import nn

CHANNELS = 256
HEADS = 4
SEQUENCE = 128
LAYERS = 2


def _weights(rng: np.random.Generator, out_channels: int, in_channels: int) -> np.ndarray:
    scale = 1.0 / float(np.sqrt(in_channels))
    weights: np.ndarray = rng.standard_normal((out_channels, in_channels)) * scale
    return weights.astype(np.float16)


def make_encoder(
    channels: int = CHANNELS, heads: int = HEADS, layers: int = LAYERS, seed: int = 0
) -> Any:
    """An encoder of ``layers`` blocks as a function of ``x`` (B, channels, 1, S)."""
    if channels % heads:
        raise ValueError(f"channels ({channels}) must be a multiple of heads ({heads})")
    rng = np.random.default_rng(seed)
    head_dim = channels // heads
    scale = np.float16(1 / np.sqrt(head_dim))
    blocks = [
        {
            "q": _weights(rng, channels, channels),
            "k": _weights(rng, channels, channels),
            "v": _weights(rng, channels, channels),
            "o": _weights(rng, channels, channels),
            "up": _weights(rng, 4 * channels, channels),
            "down": _weights(rng, channels, 4 * channels),
            "norm1": np.ones(channels, np.float16),
            "norm2": np.ones(channels, np.float16),
        }
        for _ in range(layers)
    ]

    def attention(x: Any, w: dict[str, np.ndarray]) -> Any:
        q, k, v = nn.conv1x1(x, w["q"]), nn.conv1x1(x, w["k"]), nn.conv1x1(x, w["v"])
        heads_out = []
        for head in range(heads):
            part = slice(head * head_dim, (head + 1) * head_dim)
            qh, kh, vh = q[:, part], k[:, part], v[:, part]
            # scores (B, S_keys, 1, S_queries): softmax over the keys, axis 1
            scores = np.einsum("bchq,bchk->bkhq", qh, kh) * scale
            weights = nn.softmax(scores, axis=1)
            heads_out.append(np.einsum("bkhq,bchk->bchq", weights, vh))
        return nn.conv1x1(np.concatenate(heads_out, axis=1), w["o"])

    def encoder(x: Any) -> Any:
        for w in blocks:
            x = nn.layer_norm(x + attention(x, w), w["norm1"], axis=1)
            hidden = nn.gelu(nn.conv1x1(x, w["up"]))
            x = nn.layer_norm(x + nn.conv1x1(hidden, w["down"]), w["norm2"], axis=1)
        return x

    return encoder


#: The encoder with the default sizes, for ``anekit doctor examples/ane_attention.py:encoder``.
encoder = make_encoder()


def example_input(sequence: int = SEQUENCE, channels: int = CHANNELS) -> np.ndarray:
    rng = np.random.default_rng(1)
    return rng.standard_normal((1, channels, 1, sequence)).astype(np.float16)
