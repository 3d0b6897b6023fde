"""Checks of a built embedding package, shared by the package test files."""

from __future__ import annotations

import numpy as np

import anekit
from anekit.embedder import Embedder
from anekit.models import BATCH, known_answers
from anekit.models.architectures import make_encoder
from anekit.models.batching import load_tokenizer
from anekit.models.embeddings import embed
from anekit.models.package import function_name

#: Known-answer chunks per bucket: the longest ones (two batches), which fill the
#: long buckets too; simulating all 32 in all six buckets cost minutes of CI.
CHUNKS = 8


def bucket_cosines(embedder: Embedder, size: int) -> np.ndarray:
    """The :data:`CHUNKS` longest known-answer chunks through bucket ``size`` (truncated
    to it) against the fp32 reference on the same tokens."""
    texts = known_answers.load().texts
    full = load_tokenizer(embedder.folder, 512).encode_batch(texts)
    longest = sorted(range(len(texts)), key=lambda index: -len(full[index].ids))[:CHUNKS]
    tokenizer = load_tokenizer(embedder.folder, size)
    token_ids = [encoding.ids for encoding in tokenizer.encode_batch([texts[i] for i in longest])]
    reference = make_encoder(embedder.config, embedder.weights, np.float32)
    program = anekit.load(embedder.package().path, function=function_name(size))
    cosines = []
    for start in range(0, len(token_ids), BATCH):
        group = token_ids[start : start + BATCH]
        ids = np.zeros((BATCH, size), np.int32)
        keep = np.zeros((BATCH, size), np.float32)
        keep[:, 0] = 1
        for row, tokens in enumerate(group):
            ids[row, : len(tokens)] = tokens
            keep[row, : len(tokens)] = 1
        hidden = embed(embedder.weights, embedder.config, ids)
        want = np.asarray(reference(hidden, keep), np.float64)[: len(group)]
        got = program(hidden.astype(np.float16), keep.astype(np.float16), backend="sim")
        got = np.asarray(got, np.float64)[: len(group)]
        cosines.append(
            (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
        )
    return np.concatenate(cosines)
