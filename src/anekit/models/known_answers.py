"""The known-answer fixture: 32 real code and documentation chunks and their fp32
reference embeddings (all-MiniLM-L6-v2, max length 256, NumPy fp32 path).

An accelerator (an ANE lane, a GPU lane, an int8 CPU lane) must reproduce these
vectors before it gets real work. The stored vectors are checked against
sentence-transformers' own encode in torch (tests/models/test_model_reference.py), not
only against the NumPy path that wrote them. Regenerate after changing the reference
path:

    .venv/bin/python -m anekit.models.known_answers --write

The chunks come from tests/fixtures/code_chunks.json (CPython, npm, glibc headers;
sources and licenses recorded per chunk).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from anekit.errors import ModelError
from anekit.models import shipped

RESOURCE = "data/known_answers.json"
MAX_LENGTH = 256


@dataclass(frozen=True)
class KnownAnswers:
    """Chunks and their fp32 reference vectors (unit length)."""

    model: str
    max_length: int
    chunks: list[dict[str, str]]
    vectors: np.ndarray

    @property
    def texts(self) -> list[str]:
        return [chunk["text"] for chunk in self.chunks]

    def cosines(self, vectors: np.ndarray) -> np.ndarray:
        """Per-chunk cosine of ``vectors`` (one row per chunk) to the reference."""
        return row_cosines(vectors, self.vectors)


def row_cosines(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Per-row cosine of ``got`` to ``want``; -1 where a row is NaN or zero."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        raise ValueError(f"expected vectors of shape {want.shape}, got {got.shape}")
    norms = np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        found: np.ndarray = (got * want).sum(1) / norms
    return np.asarray(np.nan_to_num(found, nan=-1.0))


def load() -> KnownAnswers:
    """The fixture shipped with anekit."""
    data = shipped.read_json(RESOURCE)
    return KnownAnswers(
        model=data["model"],
        max_length=int(data["max_length"]),
        chunks=list(data["chunks"]),
        vectors=np.asarray(data["vectors"], np.float32),
    )


def generate(chunks: list[dict[str, str]]) -> dict[str, Any]:
    """The fixture's content: the chunks embedded by the NumPy fp32 reference path."""
    from anekit.models.batching import load_tokenizer, tokenize
    from anekit.models.encoders import open_encoder, unit_rows
    from anekit.models.registry import DEFAULT_MODEL

    encoder = open_encoder("numpy", DEFAULT_MODEL, max_length=MAX_LENGTH)
    tokenizer = load_tokenizer(encoder.folder, MAX_LENGTH)
    token_ids = tokenize(tokenizer, [chunk["text"] for chunk in chunks])
    vectors = unit_rows(encoder.embed(token_ids))
    return {
        "model": DEFAULT_MODEL,
        "max_length": MAX_LENGTH,
        "reference": "anekit NumPy fp32 path (anekit.models.bert), mean pooling, L2-normalized",
        "chunks": chunks,
        "vectors": [[float(f"{value:.8g}") for value in row] for row in vectors],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--chunks",
        type=Path,
        default=Path("tests/fixtures/code_chunks.json"),
        help="the chunks to embed (a JSON list of objects with a 'text')",
    )
    parser.add_argument("--write", action="store_true", help="write the package data file")
    args = parser.parse_args(argv)
    try:
        chunks = json.loads(args.chunks.read_text("utf-8"))
    except (OSError, ValueError) as error:
        raise ModelError(f"{args.chunks}: {error}") from error
    content = json.dumps(generate(chunks), indent=1, ensure_ascii=False) + "\n"
    if args.write:
        target = shipped.write_text(RESOURCE, content)
        print(f"wrote {target} ({len(chunks)} chunks)")
    else:
        print(content, end="")


if __name__ == "__main__":
    main()
