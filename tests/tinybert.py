"""A tiny BERT model folder with random weights, for tests that need a model other
than the default."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from anekit.models import registry

HIDDEN, HEADS, LAYERS, INNER = 32, 2, 2, 64


def tiny_bert(folder: Path, *, pooling: str = "mean", model_type: str = "bert") -> Path:
    """A 2-layer BERT with random weights and MiniLM's tokenizer."""
    folder.mkdir(parents=True)
    source = registry.default_folder()
    assert source is not None
    shutil.copy(source / "tokenizer.json", folder / "tokenizer.json")
    vocab = 30522
    config = {
        "model_type": model_type, "hidden_size": HIDDEN, "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS, "intermediate_size": INNER, "hidden_act": "gelu",
        "layer_norm_eps": 1e-12, "max_position_embeddings": 512, "type_vocab_size": 2,
        "vocab_size": vocab, "pad_token_id": 0,
    }  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config))
    rng = np.random.default_rng(0)

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.05).astype(np.float32)

    tensors = {
        "embeddings.word_embeddings.weight": w(vocab, HIDDEN),
        "embeddings.position_embeddings.weight": w(512, HIDDEN),
        "embeddings.token_type_embeddings.weight": w(2, HIDDEN),
        "embeddings.LayerNorm.weight": np.ones(HIDDEN, np.float32),
        "embeddings.LayerNorm.bias": np.zeros(HIDDEN, np.float32),
    }
    for layer in range(LAYERS):
        base = f"encoder.layer.{layer}."
        for name in ("query", "key", "value"):
            tensors[f"{base}attention.self.{name}.weight"] = w(HIDDEN, HIDDEN)
            tensors[f"{base}attention.self.{name}.bias"] = w(HIDDEN)
        tensors[f"{base}attention.output.dense.weight"] = w(HIDDEN, HIDDEN)
        tensors[f"{base}attention.output.dense.bias"] = w(HIDDEN)
        tensors[f"{base}intermediate.dense.weight"] = w(INNER, HIDDEN)
        tensors[f"{base}intermediate.dense.bias"] = w(INNER)
        tensors[f"{base}output.dense.weight"] = w(HIDDEN, INNER)
        tensors[f"{base}output.dense.bias"] = w(HIDDEN)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            tensors[f"{base}{norm}.weight"] = np.ones(HIDDEN, np.float32)
            tensors[f"{base}{norm}.bias"] = np.zeros(HIDDEN, np.float32)
    save_file(
        {f"bert.{key}": value for key, value in tensors.items()}, str(folder / "model.safetensors")
    )
    kinds = ("Transformer", "Pooling")
    modules = [
        {"idx": index, "path": path, "type": f"sentence_transformers.models.{kind}"}
        for index, (path, kind) in enumerate(zip(("", "1_Pooling"), kinds, strict=True))
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir()
    settings = {
        "pooling_mode_cls_token": pooling == "cls",
        "pooling_mode_mean_tokens": pooling == "mean",
    }
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(settings))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128}))
    return folder
