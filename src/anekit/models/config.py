"""A BERT-family encoder's configuration, read from a Hugging Face model folder.

``config.json`` gives the architecture; sentence-transformers' files
(``modules.json``, ``1_Pooling/config.json``, ``sentence_bert_config.json``) give the
pooling, the normalization and the default maximum length.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anekit.errors import ModelError
from anekit.frontends.families import BERT_FAMILY

#: The activations anekit implements, by ``hidden_act``.
ACTIVATIONS = frozenset({"gelu", "gelu_new", "gelu_pytorch_tanh", "relu"})


@dataclass(frozen=True)
class EncoderConfig:
    """What the encoder needs to know about a model."""

    model_type: str
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    hidden_act: str
    layer_norm_eps: float
    max_position_embeddings: int
    type_vocab_size: int
    vocab_size: int
    pad_token_id: int
    position_offset: int
    pooling: str
    normalize: bool
    max_length: int

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def longest(self) -> int:
        """The longest sequence the position table allows."""
        return self.max_position_embeddings - self.position_offset


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as error:
        raise ModelError(f"{path}: cannot read it as JSON: {error}") from error


def _pooling(folder: Path) -> tuple[str, bool]:
    """(pooling, normalize) from sentence-transformers' modules; mean and normalized
    when the folder has no sentence-transformers files (the common embedding setup)."""
    modules_path = folder / "modules.json"
    if not modules_path.exists():
        return "mean", True
    modules = _read_json(modules_path)
    if not isinstance(modules, list) or not all(isinstance(item, dict) for item in modules):
        raise ModelError(f"{modules_path}: expected a list of modules")
    types = [str(item.get("type", "")) for item in modules]
    normalize = any(kind.endswith(".Normalize") for kind in types)
    poolers = [item for item, kind in zip(modules, types, strict=True) if kind.endswith(".Pooling")]
    pooling_dir = folder / str(poolers[0].get("path", "")) if poolers else None
    pooling = "mean"
    if pooling_dir is not None and (pooling_dir / "config.json").exists():
        settings = _read_json(pooling_dir / "config.json")
        if settings.get("pooling_mode_cls_token"):
            pooling = "cls"
        elif not settings.get("pooling_mode_mean_tokens", True):
            modes = ", ".join(key for key, value in settings.items() if value is True)
            raise ModelError(f"{pooling_dir}: pooling {modes} is not supported (mean or cls)")
    return pooling, normalize


def load_config(folder: Path, max_length: int | None = None) -> EncoderConfig:
    """The encoder configuration of the model in ``folder``."""
    path = folder / "config.json"
    if not path.exists():
        raise ModelError(f"{folder}: no config.json; is this a Hugging Face model folder?")
    data = _read_json(path)
    model_type = str(data.get("model_type", ""))
    if model_type not in BERT_FAMILY:
        raise ModelError(
            f"{path}: model_type {model_type!r} is not a BERT-family encoder "
            f"({', '.join(sorted(BERT_FAMILY))})"
        )
    act = str(data.get("hidden_act", "gelu"))
    if act not in ACTIVATIONS:
        raise ModelError(f"{path}: hidden_act {act!r} is not supported ({', '.join(ACTIVATIONS)})")
    if data.get("position_embedding_type", "absolute") != "absolute":
        raise ModelError(f"{path}: only absolute position embeddings are supported")
    pooling, normalize = _pooling(folder)
    settings = folder / "sentence_bert_config.json"
    default_length = (
        int(_read_json(settings).get("max_seq_length", 256)) if settings.exists() else 256
    )
    # RoBERTa-style models number positions from pad_token_id + 1
    offset = (
        int(data.get("pad_token_id", 1)) + 1
        if model_type in ("roberta", "xlm-roberta", "camembert")
        else 0
    )
    try:
        config = EncoderConfig(
            model_type=model_type,
            hidden_size=int(data["hidden_size"]),
            num_layers=int(data["num_hidden_layers"]),
            num_heads=int(data["num_attention_heads"]),
            intermediate_size=int(data["intermediate_size"]),
            hidden_act=act,
            layer_norm_eps=float(data.get("layer_norm_eps", 1e-12)),
            max_position_embeddings=int(data["max_position_embeddings"]),
            type_vocab_size=int(data.get("type_vocab_size", 2)),
            vocab_size=int(data["vocab_size"]),
            pad_token_id=int(data.get("pad_token_id", 0)),
            position_offset=offset,
            pooling=pooling,
            normalize=normalize,
            max_length=default_length,
        )
    except KeyError as error:
        raise ModelError(f"{path}: missing {error.args[0]!r}") from error
    if config.hidden_size % config.num_heads:
        raise ModelError(f"{path}: hidden_size is not a multiple of num_attention_heads")
    chosen = max_length if max_length is not None else min(default_length, config.longest)
    if not 1 <= chosen <= config.longest:
        raise ModelError(
            f"max_length {chosen} is outside 1..{config.longest} (the model's position table)"
        )
    return EncoderConfig(**{**config.__dict__, "max_length": chosen})
