"""Tokenizing texts and grouping them into fixed-shape bucket batches.

A package has one function per bucket: batch 4 x sequence 128, 192, 256, 320, 384
or 512. Texts are tokenized (truncated at the model's maximum length), sorted by
token count, cut into groups of the batch size and each group runs at the smallest
bucket that holds its longest text. Results go back in input order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from anekit.errors import ModelError

BATCH = 4
BUCKETS: tuple[int, ...] = (128, 192, 256, 320, 384, 512)


def buckets_for(max_length: int) -> tuple[int, ...]:
    """The buckets a model truncated at ``max_length`` needs (at least the first)."""
    needed = tuple(size for size in BUCKETS if size < max_length)
    last = next((size for size in BUCKETS if size >= max_length), None)
    if last is None:
        raise ModelError(f"max_length {max_length} exceeds the largest bucket ({BUCKETS[-1]})")
    return (*needed, last)


def length_steps(max_length: int, step: int) -> tuple[int, ...]:
    """Multiples of ``step`` below ``max_length``, and ``max_length``."""
    return (*range(step, max_length, step), max_length)


def bucket_for(length: int, buckets: Sequence[int]) -> int:
    for size in buckets:
        if size >= length:
            return size
    raise ModelError(f"{length} tokens do not fit the largest bucket ({buckets[-1]})")


def load_tokenizer(folder: Path, max_length: int) -> Any:
    from tokenizers import Tokenizer

    path = folder / "tokenizer.json"
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as error:
        raise ModelError(f"{path}: not a readable tokenizers file: {error}") from error
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length)
    return tokenizer


@dataclass
class Batch:
    """Texts padded to one bucket, and their positions in the input."""

    indices: list[int]
    ids: np.ndarray  # (rows, bucket) int32, zero-padded
    keep: np.ndarray  # (rows, bucket) float32, 1 for tokens

    @property
    def bucket(self) -> int:
        return int(self.ids.shape[1])


#: Texts per ``encode_batch`` call: the tokenizer's Encoding objects (tokens, offsets,
#: masks, each several times the ids) live until their batch is read, so one call for
#: 3,300 code chunks peaked 160 MB above the ids alone; 256 at a time, 40 MB.
TOKENIZE_BATCH = 256


def checked_texts(texts: Iterable[str]) -> list[str]:
    """``texts`` as a list (an iterator is read once, here), each checked to be a str
    the tokenizer can take: valid Unicode, so no lone surrogates."""
    if isinstance(texts, str):
        raise TypeError("encode() takes a list of texts; wrap a single text in a list")
    items = list(texts)
    for index, text in enumerate(items):
        if not isinstance(text, str):
            raise TypeError(f"text {index} is a {type(text).__name__}, not a str")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            raise ModelError(
                f"text {index} is not valid Unicode: character {error.start} is a lone "
                f"surrogate (U+{ord(text[error.start]):04X}), half of a UTF-16 pair or a "
                "byte decoded with errors='surrogateescape'; repair the text first, e.g. "
                "text.encode('utf-8', 'replace').decode('utf-8')"
            ) from None
    return items


def tokenize(tokenizer: Any, texts: Sequence[str]) -> list[list[int]]:
    if isinstance(texts, str):
        raise TypeError("encode() takes a list of texts; wrap a single text in a list")
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"text {index} is a {type(text).__name__}, not a str")
    items = list(texts)
    ids: list[list[int]] = []
    for start in range(0, len(items), TOKENIZE_BATCH):
        batch = tokenizer.encode_batch(items[start : start + TOKENIZE_BATCH])
        ids += [list(encoding.ids) for encoding in batch]
    return ids


def batches(
    token_ids: Sequence[Sequence[int]],
    buckets: Sequence[int],
    pad_id: int = 0,
    size: int = BATCH,
    *,
    fill: bool = True,
) -> Iterator[Batch]:
    """Length-sorted groups of ``size`` texts (default ``BATCH``), each padded to its bucket.

    With ``fill`` (for programs of a fixed batch), a short final group is filled up to
    ``size`` rows with padding rows that keep only their first key, so that no row is
    fully masked: the program's mean pooling then divides by 1, not 0, and no NaN
    appears in the discarded rows. Without it, a short group has only its texts' rows.
    """
    order = sorted(range(len(token_ids)), key=lambda index: len(token_ids[index]))
    for start in range(0, len(order), size):
        group = order[start : start + size]
        bucket = bucket_for(max(len(token_ids[index]) for index in group), buckets)
        rows = size if fill else len(group)
        ids = np.full((rows, bucket), pad_id, np.int32)
        keep = np.zeros((rows, bucket), np.float32)
        keep[:, 0] = 1.0
        for row, index in enumerate(group):
            tokens = token_ids[index]
            ids[row, : len(tokens)] = tokens
            keep[row, : len(tokens)] = 1.0
        yield Batch(group, ids, keep)
