"""The Whisper encoder in the ANE's layout, as traceable NumPy, and its log-mel front end.

As transformers' ``WhisperEncoder`` defines it (transformers 5.24, models/whisper): two
1-D convolutions (kernel 3, padding 1; the second with stride 2) with GELU, learned (in
practice sinusoidal) positions added, pre-LN transformer layers (the key projection has
no bias), a final LayerNorm. The input is a fixed window: ``2 x max_source_positions``
mel frames (30 s, 3000 frames, for the released models), the output one state per
position (1500).

ANE form (shared/seeds/001): features (B, n_mels, 1, T); the convolutions are MIL
``conv`` with (1, 3) kernels (:func:`anekit.nn.conv2d`); linear layers are 1x1
convolutions; the query scale is folded into the query projection (pre-scaled queries,
so fp16 scores stay small); each head's queries are split into chunks so that no score
tensor (keys x queries) reaches :data:`~anekit.ops.limits.ATTENTION_SCORE_LIMIT`
elements (1500 x 1500 = 2.25M would; three chunks of 500 keep each at 750K).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from anekit import nn
from anekit.errors import ModelError
from anekit.models.activations import activation as activation_named
from anekit.models.activations import checked
from anekit.ops.limits import ATTENTION_SCORE_LIMIT

#: WhisperFeatureExtractor's defaults: 16 kHz audio, 400-sample FFT, 160-sample hop, 30 s.
SAMPLING_RATE, N_FFT, HOP, CHUNK_SECONDS = 16_000, 400, 160, 30
#: PyTorch's LayerNorm epsilon, which Whisper uses.
LAYER_NORM_EPS = 1e-5


@dataclass(frozen=True)
class WhisperEncoderConfig:
    """What the encoder needs from a Whisper ``config.json``."""

    d_model: int
    layers: int
    heads: int
    ffn_dim: int
    mel_bins: int
    positions: int
    activation: str = "gelu"

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads

    @property
    def frames(self) -> int:
        """Mel frames in the input window (two per position: conv2 has stride 2)."""
        return 2 * self.positions


def read_config(folder: Path) -> WhisperEncoderConfig:
    path = folder / "config.json"
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as error:
        raise ModelError(f"{path}: cannot read it as JSON: {error}") from error
    if data.get("model_type") != "whisper":
        raise ModelError(f"{path}: model_type {data.get('model_type')!r} is not whisper")
    activation = checked(
        str(data.get("activation_function", "gelu")), f"{path}: activation_function"
    )
    try:
        config = WhisperEncoderConfig(
            d_model=int(data["d_model"]),
            layers=int(data["encoder_layers"]),
            heads=int(data["encoder_attention_heads"]),
            ffn_dim=int(data["encoder_ffn_dim"]),
            mel_bins=int(data["num_mel_bins"]),
            positions=int(data["max_source_positions"]),
            activation=activation,
        )
    except KeyError as error:
        raise ModelError(f"{path}: missing {error.args[0]!r}") from error
    if config.d_model % config.heads:
        raise ModelError(f"{path}: d_model is not a multiple of encoder_attention_heads")
    return config


def read_weights(folder: Path) -> dict[str, np.ndarray]:
    """The encoder's tensors from ``model.safetensors`` as float32, named as in
    ``WhisperEncoder`` (``conv1.weight``, ``layers.0.fc1.weight``, ...)."""
    from safetensors.numpy import load_file

    path = folder / "model.safetensors"
    if not path.exists():
        raise ModelError(f"{folder}: no model.safetensors")
    found = {}
    for name, value in load_file(str(path)).items():
        for prefix in ("model.encoder.", "encoder."):
            if name.startswith(prefix):
                found[name[len(prefix) :]] = value.astype(np.float32)
    if not found:
        raise ModelError(f"{path}: no encoder tensors (model.encoder.* or encoder.*)")
    return found


def query_chunks(positions: int, limit: int = ATTENTION_SCORE_LIMIT) -> list[tuple[int, int]]:
    """(start, stop) of equal query chunks whose score tensors (positions x chunk) stay
    under ``limit`` elements."""
    count = 1
    while positions * math.ceil(positions / count) >= limit:
        count += 1
    size = math.ceil(positions / count)
    return [(start, min(start + size, positions)) for start in range(0, positions, size)]


def make_encoder(
    config: WhisperEncoderConfig, weights: dict[str, np.ndarray], dtype: Any = np.float32
) -> Callable[[Any], Any]:
    """``encode(features)``: log-mel features (B, mel_bins, 1, frames) -> encoder states
    (B, d_model, 1, positions)."""
    dtype = np.dtype(dtype)
    heads, depth, channels = config.heads, config.head_dim, config.d_model
    scale = np.float32(1.0 / np.sqrt(depth))
    activation = activation_named(config.activation)
    chunks = query_chunks(config.positions)

    def get(name: str) -> Any:
        if name not in weights:
            raise ModelError(f"the checkpoint has no encoder tensor {name}")
        return np.asarray(weights[name], np.float32).astype(dtype)

    def pair(name: str, bias: bool = True) -> tuple[Any, Any]:
        return get(name + ".weight"), get(name + ".bias") if bias else None

    conv1, conv2 = pair("conv1"), pair("conv2")
    kernels = [(weight[:, :, None, :], bias) for weight, bias in (conv1, conv2)]  # (1, 3)
    positions = get("embed_positions.weight")[: config.positions].T.reshape(
        1, channels, 1, config.positions
    )
    layers = []
    for index in range(config.layers):
        prefix = f"layers.{index}."
        q_weight, q_bias = pair(prefix + "self_attn.q_proj")
        layers.append(
            {
                "norm1": pair(prefix + "self_attn_layer_norm"),
                "q": (q_weight * dtype.type(scale), q_bias * dtype.type(scale)),  # pre-scaled
                "k": pair(prefix + "self_attn.k_proj", bias=False),
                "v": pair(prefix + "self_attn.v_proj"),
                "out": pair(prefix + "self_attn.out_proj"),
                "norm2": pair(prefix + "final_layer_norm"),
                "fc1": pair(prefix + "fc1"),
                "fc2": pair(prefix + "fc2"),
            }
        )
    final_norm = pair("layer_norm")

    def attention(x: Any, w: dict[str, Any]) -> Any:
        batch, _, _, size = x.shape
        q = nn.conv1x1(x, *w["q"]).reshape(batch, channels, size)
        k = nn.conv1x1(x, *w["k"]).reshape(batch, channels, size)
        v = nn.conv1x1(x, *w["v"]).reshape(batch, channels, size)
        per_head = []
        for head in range(heads):
            part = slice(head * depth, (head + 1) * depth)
            keys_t = np.swapaxes(k[:, part, :], 1, 2)  # (B, S_keys, d)
            pieces = []
            for start, stop in chunks:  # scores (B, S_keys, chunk) < the ANE's limit
                scores = np.matmul(keys_t, q[:, part, start:stop])
                pieces.append(np.matmul(v[:, part, :], nn.softmax(scores, axis=1)))
            per_head.append(pieces[0] if len(pieces) == 1 else np.concatenate(pieces, axis=2))
        merged = np.concatenate(per_head, axis=1).reshape(batch, channels, 1, size)
        return nn.conv1x1(merged, *w["out"])

    def encode(features: Any) -> Any:
        if tuple(features.shape[1:]) != (config.mel_bins, 1, config.frames):
            raise ModelError(
                f"Whisper's encoder takes (B, {config.mel_bins}, 1, {config.frames}) features, "
                f"got {tuple(features.shape)}"
            )
        x = activation(nn.conv2d(features, *kernels[0], padding=(0, 1)))
        x = activation(nn.conv2d(x, *kernels[1], stride=(1, 2), padding=(0, 1)))
        x = x + positions
        for w in layers:
            normed = nn.layer_norm(x, *w["norm1"], axis=1, eps=LAYER_NORM_EPS)
            x = x + attention(normed, w)
            normed = nn.layer_norm(x, *w["norm2"], axis=1, eps=LAYER_NORM_EPS)
            x = x + nn.conv1x1(activation(nn.conv1x1(normed, *w["fc1"])), *w["fc2"])
        return nn.layer_norm(x, *final_norm, axis=1, eps=LAYER_NORM_EPS)

    return encode


#: The package's input and output names.
INPUT, OUTPUT = "features", "states"


def trace(config: WhisperEncoderConfig, weights: dict[str, np.ndarray]) -> Any:
    """The fp16 encoder at (1, mel_bins, 1, frames), traced and through the ANE passes."""
    from anekit.frontends.numpy import compile_function
    from anekit.specs import TensorSpec

    return compile_function(
        make_encoder(config, weights, np.float16),
        TensorSpec((1, config.mel_bins, 1, config.frames), np.float16, INPUT),
        output_names=[OUTPUT],
    )


def build_package(
    folder: Path,
    target: Path,
    *,
    weights: str = "fp16",
    progress: Callable[[str], None] | None = None,
) -> Path:
    """The encoder of the Whisper checkpoint in ``folder`` as a fixed-shape package at
    ``target`` (30 s: ``features`` (1, mel_bins, 1, 3000) fp16 in, ``states`` (1, d_model,
    1, 1500) out); ``weights`` ``fp16`` or ``int8`` (per output channel)."""
    from anekit.package import save_functions

    config = read_config(folder)
    report = progress or (lambda message: None)
    report(f"{folder.name}: tracing the encoder (1 x {config.mel_bins} x {config.frames})")
    program = trace(config, read_weights(folder))
    return save_functions(
        [("main", program)],
        target,
        weights=weights,
        metadata={"anekit.model": folder.name, "anekit.family": "whisper-encoder"},
        description=f"{folder.name} Whisper encoder ({weights}), built by anekit",
        progress=report,
    )


def log_mel(audio: np.ndarray, mel_bins: int = 80) -> np.ndarray:
    """Whisper's log-mel features (mel_bins, 3000) of 16 kHz mono ``audio``, as
    transformers' ``WhisperFeatureExtractor`` computes them: the audio zero-padded or cut
    to 30 s; a centred STFT (reflect padding, periodic Hann window of 400, hop 160) as
    power; Slaney mel filters from 0 to 8 kHz; log10 (floor 1e-10); the last frame
    dropped; values clamped to 8 below the maximum, then (x + 4) / 4."""
    samples = SAMPLING_RATE * CHUNK_SECONDS
    signal = np.zeros(samples, np.float64)
    clip = np.asarray(audio, np.float64).reshape(-1)[:samples]
    signal[: clip.size] = clip
    padded = np.pad(signal, N_FFT // 2, mode="reflect")
    frames = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[::HOP]
    window = np.hanning(N_FFT + 1)[:-1]  # periodic
    power = np.abs(np.fft.rfft(frames * window, axis=1)) ** 2  # (frames, 201)
    mel = mel_filters(mel_bins).T @ power.T  # (mel_bins, frames)
    spectrum = np.log10(np.maximum(mel, 1e-10))[:, :-1]
    spectrum = np.maximum(spectrum, spectrum.max() - 8.0)
    return np.asarray((spectrum + 4.0) / 4.0, np.float32)


def mel_filters(mel_bins: int) -> np.ndarray:
    """(201, mel_bins) triangular filters on the Slaney mel scale with Slaney area
    normalization, 0 to 8 kHz (transformers' ``mel_filter_bank``)."""

    def to_mel(hertz: np.ndarray) -> np.ndarray:
        step = np.log(6.4) / 27.0
        linear = 3.0 * hertz / 200.0
        return np.where(
            hertz >= 1000.0, 15.0 + np.log(np.maximum(hertz, 1e-10) / 1000.0) / step, linear
        )

    def to_hertz(mels: np.ndarray) -> np.ndarray:
        step = np.log(6.4) / 27.0
        return np.where(mels >= 15.0, 1000.0 * np.exp(step * (mels - 15.0)), 200.0 * mels / 3.0)

    edges = to_hertz(np.linspace(to_mel(np.array(0.0)), to_mel(np.array(8000.0)), mel_bins + 2))
    bins = np.linspace(0, SAMPLING_RATE // 2, 1 + N_FFT // 2)
    slopes = edges[None, :] - bins[:, None]
    widths = np.diff(edges)
    down = -slopes[:, :-2] / widths[:-1]
    up = slopes[:, 2:] / widths[1:]
    filters = np.maximum(0.0, np.minimum(down, up))
    areas = 2.0 / (edges[2 : mel_bins + 2] - edges[:mel_bins])  # Slaney normalization
    return np.asarray(filters * areas[None, :], np.float64)
