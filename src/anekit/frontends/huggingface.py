"""Hugging Face BERT-family encoders, made convertible.

transformers 5 builds the attention mask inside the model with ops coremltools
cannot convert. :class:`BertAdapter` runs the model's own embeddings and encoder
and passes a ready 4-D additive mask instead: ``(1 - mask) * -1e4`` for padding,
Apple's fp16-friendly fill (ane-knowledge.md §2.1 rule 5). It optionally pools
the tokens into one sentence embedding (mean over the unmasked tokens, or the
first token) and L2-normalizes it, as sentence-transformers does.
"""

from __future__ import annotations

from typing import Any

from anekit.frontends.families import BERT_FAMILY
from anekit.ops.limits import MASK_FILL


def is_bert_family(module: Any) -> bool:
    config = getattr(module, "config", None)
    return (
        getattr(config, "model_type", None) in BERT_FAMILY
        and hasattr(module, "embeddings")
        and hasattr(module, "encoder")
    )


def _module_base() -> Any:
    import torch

    return torch.nn.Module


class BertAdapter(_module_base()):  # type: ignore[misc]
    """``(input_ids, attention_mask) -> last_hidden_state``, or a pooled embedding.

    ``pooling``: None (every token's hidden state), ``"mean"`` (mean of the tokens
    the mask keeps) or ``"cls"`` (the first token). ``normalize`` L2-normalizes a
    pooled embedding.
    """

    def __init__(self, model: Any, pooling: str | None = None, normalize: bool = False) -> None:
        super().__init__()
        if pooling not in (None, "mean", "cls"):
            raise ValueError(f"pooling must be None, 'mean' or 'cls', not {pooling!r}")
        if not is_bert_family(model):
            raise ValueError(f"{type(model).__name__} is not a Hugging Face BERT-family model")
        self.model = model.eval()
        self.model_type = str(model.config.model_type)
        self.pooling = pooling
        self.normalize = normalize

    def forward(self, input_ids: Any, attention_mask: Any) -> Any:
        import torch

        hidden = self.model.embeddings(input_ids=input_ids)
        keep = attention_mask.to(hidden.dtype)
        additive = (1.0 - keep[:, None, None, :]) * MASK_FILL
        hidden = self.model.encoder(hidden, attention_mask=additive).last_hidden_state
        if self.pooling is None:
            return hidden
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            weights = keep.unsqueeze(-1)
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
        if self.normalize:
            pooled = torch.nn.functional.normalize(pooled, dim=-1)
        return pooled


def sentence_embedder(model: Any, pooling: str = "mean", normalize: bool = True) -> BertAdapter:
    """A BERT-family model as a sentence-transformers style embedder (mean pooling and
    L2 normalization by default), ready for ``anekit.convert``."""
    return BertAdapter(model, pooling=pooling, normalize=normalize)
