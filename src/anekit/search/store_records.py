"""The records the code search store takes and gives back (:mod:`anekit.search.store`):
what made its vectors, a file, a chunk to store and a chunk read back."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

__all__ = ["CHUNK_KINDS", "ChunkRecord", "FileRecord", "StoreIdentity", "StoredChunk"]

CHUNK_KINDS = ("code", "docs", "tests", "config")


@dataclass(frozen=True)
class StoreIdentity:
    """What made a store's vectors; a store holds vectors of one identity only."""

    model: str
    variant: str
    chunker: str
    max_length: int
    dimension: int
    #: The version of the variant's numerics, where they changed under the same variant
    #: name (int8: 2 since its activation scales are calibrated, 3 with uint8 weights,
    #: :data:`anekit.models.onnx_models.INT8_NUMERICS`): a store of another version
    #: embeds again, and the vector cache keeps their vectors apart.
    numerics: int = 1

    def key(self) -> str:
        """A canonical string of the identity (stored, and stamped on derived files)."""
        fields = asdict(self)
        if self.numerics == 1:
            del fields["numerics"]  # the keys written before the field existed stay valid
        return json.dumps(fields, sort_keys=True)


@dataclass(frozen=True)
class FileRecord:
    """A file as indexed: its path relative to the root (``/``-separated) and what it was."""

    relpath: str
    size: int
    mtime_ns: int
    sha256: str
    language: str | None


@dataclass(frozen=True)
class ChunkRecord:
    """A chunk to store; ``text_hash`` is the sha256 of the text given to the model."""

    start_line: int
    end_line: int
    text: str
    symbol: str
    kind: str
    text_hash: str


@dataclass(frozen=True)
class StoredChunk:
    """A chunk read back from the store."""

    id: int
    relpath: str
    start_line: int
    end_line: int
    text: str
    symbol: str
    kind: str
    language: str | None
