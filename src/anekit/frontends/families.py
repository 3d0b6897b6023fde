"""Hugging Face model families anekit knows, by ``config.model_type`` (imports nothing,
so that lane workers can ask without loading torch)."""

from __future__ import annotations

#: ``model_type`` values whose models follow BERT's layout: ``embeddings`` and
#: ``encoder`` modules with BERT's call signature, checkpoints with BERT's tensor names.
BERT_FAMILY = frozenset({"bert", "roberta", "xlm-roberta", "camembert", "electra"})

__all__ = ["BERT_FAMILY"]
