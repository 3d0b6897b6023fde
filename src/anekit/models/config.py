"""An embedding model's configuration, read from a Hugging Face model folder.

``config.json`` gives the architecture: a BERT-family encoder (:class:`EncoderConfig`)
or ModernBERT (:class:`ModernBertConfig`), by ``model_type``. sentence-transformers'
files (``modules.json``, ``1_Pooling/config.json``, ``sentence_bert_config.json``) give
the pooling, the normalization and the default maximum length. Reading a configuration
imports nothing heavy (lane workers and an Embedder's parent do it).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anekit.errors import ModelError
from anekit.frontends.families import BERT_FAMILY
from anekit.models.activations import checked
from anekit.models.batching import BUCKETS

MODERNBERT = "modernbert"
#: transformers' ModernBertConfig defaults (default_theta) for the two layer types.
GLOBAL_THETA, LOCAL_THETA = 160_000.0, 10_000.0
FULL, SLIDING = "full_attention", "sliding_attention"


@dataclass(frozen=True)
class EncoderConfig:
    """What a BERT-family encoder needs to know about a model."""

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
    pooling: str = "mean"
    normalize: bool = True
    max_length: int = 256

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def longest(self) -> int:
        """The longest sequence the position table allows."""
        return self.max_position_embeddings - self.position_offset

    @property
    def dimensions(self) -> frozenset[int]:
        """Every size the model's tensors have besides batch and sequence."""
        return frozenset({self.hidden_size, self.num_heads, self.head_dim, self.intermediate_size})


@dataclass(frozen=True)
class ModernBertConfig:
    """What the ModernBERT encoder (:mod:`anekit.models.modernbert`) needs from a
    ``config.json`` (transformers 5.24's ``ModernBertConfig``)."""

    hidden_size: int
    num_heads: int
    intermediate_size: int
    hidden_act: str
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
    normalize: bool = True
    max_length: int = 512
    model_type: str = MODERNBERT

    @property
    def num_layers(self) -> int:
        return len(self.layer_types)

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def window(self) -> int:
        """How far apart a query and a key may be in a sliding layer (inclusive)."""
        return self.local_attention // 2

    @property
    def longest(self) -> int:
        """The longest sequence anekit runs: the largest bucket, or the model's own
        limit if that is shorter (ModernBERT's rotary positions go to 8192)."""
        return min(self.max_position_embeddings, BUCKETS[-1])

    @property
    def dimensions(self) -> frozenset[int]:
        """Every size the model's tensors have besides batch and sequence."""
        return frozenset(
            {self.hidden_size, 3 * self.hidden_size, self.num_heads, self.head_dim,
             self.head_dim // 2, self.intermediate_size, 2 * self.intermediate_size}
        )  # fmt: skip


#: A configuration of any family anekit embeds with.
ModelConfig = EncoderConfig | ModernBertConfig


def read_json(path: Path) -> Any:
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
    modules = read_json(modules_path)
    if not isinstance(modules, list) or not all(isinstance(item, dict) for item in modules):
        raise ModelError(f"{modules_path}: expected a list of modules")
    types = [str(item.get("type", "")) for item in modules]
    normalize = any(kind.endswith(".Normalize") for kind in types)
    poolers = [item for item, kind in zip(modules, types, strict=True) if kind.endswith(".Pooling")]
    pooling_dir = folder / str(poolers[0].get("path", "")) if poolers else None
    pooling = "mean"
    if pooling_dir is not None and (pooling_dir / "config.json").exists():
        settings = read_json(pooling_dir / "config.json")
        if settings.get("pooling_mode_cls_token"):
            pooling = "cls"
        elif not settings.get("pooling_mode_mean_tokens", True):
            modes = ", ".join(key for key, value in settings.items() if value is True)
            raise ModelError(f"{pooling_dir}: pooling {modes} is not supported (mean or cls)")
    return pooling, normalize


def _bert(path: Path, data: dict[str, Any]) -> EncoderConfig:
    model_type = str(data["model_type"])
    act = checked(str(data.get("hidden_act", "gelu")), f"{path}: hidden_act")
    if data.get("position_embedding_type", "absolute") != "absolute":
        raise ModelError(f"{path}: only absolute position embeddings are supported")
    # RoBERTa-style models number positions from pad_token_id + 1
    offset = (
        int(data.get("pad_token_id", 1)) + 1
        if model_type in ("roberta", "xlm-roberta", "camembert")
        else 0
    )
    return EncoderConfig(
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
    )


def _modernbert(path: Path, data: dict[str, Any]) -> ModernBertConfig:
    """Both the transformers-5 keys (``layer_types``, ``rope_parameters``) and the older
    ones (``global_attn_every_n_layers``, ``global_rope_theta``, ``local_rope_theta``)."""
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
    config = ModernBertConfig(
        hidden_size=int(data["hidden_size"]),
        num_heads=int(data["num_attention_heads"]),
        intermediate_size=int(data["intermediate_size"]),
        hidden_act=checked(
            str(data.get("hidden_activation", "gelu")), f"{path}: hidden_activation"
        ),
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
    )
    if len(config.layer_types) != layers or set(config.layer_types) - {FULL, SLIDING}:
        raise ModelError(f"{path}: layer_types must name {layers} layers, each {FULL} or {SLIDING}")
    return config


def load_config(folder: Path, max_length: int | None = None) -> ModelConfig:
    """The configuration of the embedding model in ``folder``, truncating at
    ``max_length`` (default: sentence-transformers' ``max_seq_length``, else 256,
    within what the model allows)."""
    path = folder / "config.json"
    if not path.exists():
        raise ModelError(f"{folder}: no config.json; is this a Hugging Face model folder?")
    data = read_json(path)
    model_type = str(data.get("model_type", ""))
    try:
        if model_type == MODERNBERT:
            config: ModelConfig = _modernbert(path, data)
        elif model_type in BERT_FAMILY:
            config = _bert(path, data)
        else:
            hint = (
                "; a Whisper folder builds with `anekit build-model`"
                if model_type == "whisper"
                else ""
            )
            raise ModelError(
                f"{path}: model_type {model_type!r} is not an embedding model anekit runs "
                f"({', '.join(sorted(BERT_FAMILY | {MODERNBERT}))}){hint}"
            )
    except KeyError as error:
        raise ModelError(f"{path}: missing {error.args[0]!r}") from error
    if config.hidden_size % config.num_heads:
        raise ModelError(f"{path}: hidden_size is not a multiple of num_attention_heads")
    pooling, normalize = _pooling(folder)
    settings = folder / "sentence_bert_config.json"
    default_length = (
        int(read_json(settings).get("max_seq_length", 256)) if settings.exists() else 256
    )
    chosen = max_length if max_length is not None else min(default_length, config.longest)
    if not 1 <= chosen <= config.longest:
        raise ModelError(
            f"max_length {chosen} is outside 1..{config.longest} (the longest this model runs)"
        )
    return dataclasses.replace(config, pooling=pooling, normalize=normalize, max_length=chosen)
