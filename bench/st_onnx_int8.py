"""all-MiniLM-L6-v2 on ONNX Runtime with dynamic int8 weights: the short script a user
would write, for ``embed_throughput.py``'s "sentence-transformers ONNX int8" row.

sentence-transformers documents this route as ``SentenceTransformer(folder,
backend="onnx")`` and ``sentence_transformers.backend.export_dynamic_quantized_onnx_model``,
but both need Optimum (``sentence-transformers[onnx]``), which this project's pinned
environment does not install. Without it, the same thing by hand:

1. ``torch.onnx.export`` of the Hugging Face model (``transformers.AutoModel``) from the
   model folder, dynamic axes for batch and sequence (the TorchScript exporter,
   ``dynamo=False``: the default one needs onnxscript, also not installed);
2. ``onnxruntime.quantization.quantize_dynamic`` (int8 weights, per channel);
3. an ONNX Runtime CPU session with ``intra_op_num_threads``;
4. the folder's ``tokenizer.json`` (the tokenizers library, truncation at
   ``max_length``), texts sorted by token count, batches of 32 each padded to its
   longest, mean pooling over the attention mask, L2 normalization.

Both model files are cached under ``$ANEKIT_HOME/bench/`` keyed by the model folder and
the torch, transformers and ONNX Runtime versions; ``python bench/st_onnx_int8.py``
builds them (if need be) and prints the int8 model's path.
"""

from __future__ import annotations

import hashlib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OPSET = 17


def quantized_model(folder: Path, cache: Path | None = None) -> Path:
    """The int8 ONNX model of the Hugging Face model in ``folder``: exported and
    quantized on first use, then read from the cache."""
    from anekit.config import home

    # Versions from the metadata: a cached model costs no torch import (nor its memory).
    versions = "|".join(version(name) for name in ("torch", "transformers", "onnxruntime"))
    key = hashlib.sha256(f"{folder.resolve()}|{versions}|{OPSET}".encode()).hexdigest()[:12]
    directory = (cache or home() / "bench") / f"st-onnx-int8-{key}"
    quantized = directory / "model_qint8.onnx"
    if quantized.is_file():
        return quantized
    directory.mkdir(parents=True, exist_ok=True)
    exported = directory / "model.onnx"
    _export(folder, exported)
    from onnxruntime.quantization import QuantType, quantize_dynamic

    partial = directory / "model_qint8.partial.onnx"
    quantize_dynamic(exported, partial, per_channel=True, weight_type=QuantType.QInt8)
    partial.replace(quantized)
    return quantized


def _export(folder: Path, path: Path) -> None:
    import torch
    from tokenizers import Tokenizer
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(folder)).eval()

    class LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    # The example batch has padding, so that the traced graph keeps the attention mask.
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    ids, mask, types = _pad(tokenizer.encode_batch(["def f(x):\n    return x + 1", "import os"]))
    example = tuple(torch.from_numpy(array) for array in (ids, mask, types))
    axes = {name: {0: "batch", 1: "sequence"} for name in (*INPUTS, "last_hidden_state")}
    with torch.no_grad():
        torch.onnx.export(
            LastHiddenState(),
            example,
            str(path),
            input_names=list(INPUTS),
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=OPSET,
            dynamo=False,
        )


def _pad(encodings: list[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Input ids, attention mask and token types, padded (with 0) to the longest."""
    longest = max(len(encoding.ids) for encoding in encodings)
    ids = np.zeros((len(encodings), longest), np.int64)
    mask = np.zeros_like(ids)
    types = np.zeros_like(ids)
    for row, encoding in enumerate(encodings):
        size = len(encoding.ids)
        ids[row, :size] = encoding.ids
        mask[row, :size] = encoding.attention_mask
        types[row, :size] = encoding.type_ids
    return ids, mask, types


class OnnxInt8Encoder:
    """``encode(texts)`` -> unit vectors, (number of texts, 384) float32, in input order."""

    def __init__(
        self, folder: Path, threads: int, max_length: int = 256, batch_size: int = 32
    ) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        self.model = quantized_model(folder)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        self.session = onnxruntime.InferenceSession(
            str(self.model), options, providers=["CPUExecutionProvider"]
        )
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=max_length)
        self.batch_size = batch_size

    def encode(self, texts: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda index: len(encodings[index].ids))
        result: np.ndarray | None = None
        for start in range(0, len(order), self.batch_size):
            indices = order[start : start + self.batch_size]
            ids, mask, types = _pad([encodings[index] for index in indices])
            (hidden,) = self.session.run(
                ["last_hidden_state"],
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": types},
            )
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(1) / np.maximum(weights.sum(1), 1e-9)
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            if result is None:
                result = np.zeros((len(texts), pooled.shape[1]), np.float32)
            result[indices] = pooled
        return result if result is not None else np.zeros((0, 384), np.float32)


if __name__ == "__main__":
    from anekit.models.registry import resolve

    print(quantized_model(resolve(None)[1]))
