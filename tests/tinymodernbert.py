"""A small random-weight ModernBERT saved as a Hugging Face folder (transformers builds it;
needs the torch extra), with MiniLM's tokenizer so that real code chunks can be its input:
4 layers (0 and 3 global, 1 and 2 sliding with a window of 8), d=64, 2 heads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from anekit.models import registry
from minilm import chunks

VOCAB = 30522  # MiniLM's tokenizer
HIDDEN = 64
#: granite-embedding-small-english-r2's shape as its model card and paper give it (12
#: layers, 384 wide, 8192 positions, CLS pooling); heads, MLP width and window are
#: ModernBERT's usual ones for that width.
GRANITE_SMALL = {
    "vocab_size": 50368, "hidden_size": 384, "intermediate_size": 1536,
    "num_hidden_layers": 12, "num_attention_heads": 6, "max_position_embeddings": 8192,
    "local_attention": 128, "global_attn_every_n_layers": 3, "pad_token_id": 50283,
}  # fmt: skip


def tiny_modernbert(path: Path, **overrides: Any) -> Path:
    """A random-weight ModernBERT saved as a Hugging Face folder, with MiniLM's tokenizer."""
    torch = pytest.importorskip("torch")
    from transformers import ModernBertConfig, ModernBertModel

    torch.manual_seed(0)
    settings: dict[str, Any] = {
        "vocab_size": VOCAB,
        "hidden_size": HIDDEN,
        "intermediate_size": 96,
        "num_hidden_layers": 4,
        "num_attention_heads": 2,
        "max_position_embeddings": 1024,
        "local_attention": 16,
        "global_attn_every_n_layers": 3,
        "pad_token_id": 0,
        "bos_token_id": 101,
        "eos_token_id": 102,
        "cls_token_id": 101,
        "sep_token_id": 102,
        "attn_implementation": "eager",
    }
    model: Any = ModernBertModel(ModernBertConfig(**{**settings, **overrides}))
    model.eval()
    with torch.no_grad():  # weights far from the tiny init, so every term matters
        for name, parameter in model.named_parameters():
            noise = torch.randn_like(parameter)
            parameter.copy_(1 + 0.1 * noise if "norm" in name else 0.2 * noise)
    model.save_pretrained(path)
    source = registry.default_folder()
    assert source is not None
    shutil.copy(source / "tokenizer.json", path / "tokenizer.json")
    (path / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 512}))
    return path


#: One length per package bucket (128 ... 512): each batch runs in its own bucket.
BUCKET_LENGTHS = (100, 150, 250, 300, 350, 500)


def ids_of_lengths(folder: Path, lengths: tuple[int, ...]) -> list[list[int]]:
    """Real code, tokenized and cut to each of ``lengths`` (ending with [SEP])."""
    from anekit.models.batching import load_tokenizer, tokenize

    (long,) = tokenize(load_tokenizer(folder, 512), ["\n".join(chunks())])
    return [long[: length - 1] + long[-1:] for length in lengths]
