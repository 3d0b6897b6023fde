"""BERT-family weights from ``model.safetensors``, as NumPy arrays, without torch."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from anekit.errors import ModelError
from anekit.models.config import EncoderConfig

#: Prefixes checkpoints put before ``embeddings.`` / ``encoder.``.
_PREFIXES = ("", "bert.", "roberta.", "model.", "electra.")


@dataclass(frozen=True)
class Layer:
    """One encoder layer's weights, linear weights as (out, in)."""

    q: np.ndarray
    q_bias: np.ndarray
    k: np.ndarray
    k_bias: np.ndarray
    v: np.ndarray
    v_bias: np.ndarray
    out: np.ndarray
    out_bias: np.ndarray
    norm1: np.ndarray
    norm1_bias: np.ndarray
    up: np.ndarray
    up_bias: np.ndarray
    down: np.ndarray
    down_bias: np.ndarray
    norm2: np.ndarray
    norm2_bias: np.ndarray


@dataclass(frozen=True)
class Weights:
    """All weights of an encoder, float32."""

    word: np.ndarray
    position: np.ndarray
    token_type: np.ndarray
    norm: np.ndarray
    norm_bias: np.ndarray
    layers: tuple[Layer, ...]
    digest: str


def _open(folder: Path) -> dict[str, np.ndarray]:
    path = folder / "model.safetensors"
    if not path.exists():
        if (folder / "pytorch_model.bin").exists():
            raise ModelError(
                f"{folder}: has only pytorch_model.bin; anekit reads model.safetensors. Convert "
                "it once with torch: `from safetensors.torch import save_file; "
                "save_file(torch.load('pytorch_model.bin'), 'model.safetensors')`"
            )
        raise ModelError(f"{folder}: no model.safetensors")
    from safetensors.numpy import load_file

    try:
        return load_file(str(path))
    except Exception as error:
        raise ModelError(f"{path}: not a readable safetensors file: {error}") from error


def _digest(tensors: dict[str, np.ndarray]) -> str:
    hasher = hashlib.sha256()
    for name in sorted(tensors):
        hasher.update(name.encode())
        hasher.update(np.ascontiguousarray(tensors[name]).tobytes())
    return hasher.hexdigest()


def load_weights(folder: Path, config: EncoderConfig) -> Weights:
    """The encoder's weights from ``folder/model.safetensors``, checked against ``config``."""
    tensors = _open(folder)
    prefix = next(
        (p for p in _PREFIXES if f"{p}embeddings.word_embeddings.weight" in tensors), None
    )
    if prefix is None:
        raise ModelError(
            f"{folder}/model.safetensors: no embeddings.word_embeddings.weight; "
            "not a BERT-family checkpoint"
        )

    def get(name: str, shape: tuple[int, ...]) -> np.ndarray:
        key = prefix + name
        if key not in tensors:
            raise ModelError(f"{folder}/model.safetensors: missing {key}")
        value = np.asarray(tensors[key], np.float32)
        if value.shape != shape:
            raise ModelError(
                f"{folder}/model.safetensors: {key} has shape {value.shape}, "
                f"config.json implies {shape}"
            )
        return value

    c, f = config.hidden_size, config.intermediate_size
    layers = []
    for index in range(config.num_layers):
        base = f"encoder.layer.{index}."
        layers.append(
            Layer(
                q=get(base + "attention.self.query.weight", (c, c)),
                q_bias=get(base + "attention.self.query.bias", (c,)),
                k=get(base + "attention.self.key.weight", (c, c)),
                k_bias=get(base + "attention.self.key.bias", (c,)),
                v=get(base + "attention.self.value.weight", (c, c)),
                v_bias=get(base + "attention.self.value.bias", (c,)),
                out=get(base + "attention.output.dense.weight", (c, c)),
                out_bias=get(base + "attention.output.dense.bias", (c,)),
                norm1=get(base + "attention.output.LayerNorm.weight", (c,)),
                norm1_bias=get(base + "attention.output.LayerNorm.bias", (c,)),
                up=get(base + "intermediate.dense.weight", (f, c)),
                up_bias=get(base + "intermediate.dense.bias", (f,)),
                down=get(base + "output.dense.weight", (c, f)),
                down_bias=get(base + "output.dense.bias", (c,)),
                norm2=get(base + "output.LayerNorm.weight", (c,)),
                norm2_bias=get(base + "output.LayerNorm.bias", (c,)),
            )
        )
    return Weights(
        word=get("embeddings.word_embeddings.weight", (config.vocab_size, c)),
        position=get("embeddings.position_embeddings.weight", (config.max_position_embeddings, c)),
        token_type=get("embeddings.token_type_embeddings.weight", (config.type_vocab_size, c)),
        norm=get("embeddings.LayerNorm.weight", (c,)),
        norm_bias=get("embeddings.LayerNorm.bias", (c,)),
        layers=tuple(layers),
        digest=_digest(tensors),
    )
