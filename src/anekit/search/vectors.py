"""The vector index: exact cosine search over the store's fp16 vectors, derived from SQLite.

:class:`VectorIndex` holds the store's vectors as one fp16 matrix and scans it whole with
usearch's SIMD kernels (``usearch.index.search(..., exact=True)``), then re-scores the best
``2k + 16`` rows in float32 against the float32 query (usearch compares with the query rounded
to fp16, which swaps near ties). At 100k x 384 that is a few milliseconds on two cores with no
build step; an HNSW graph is faster per query but takes most of a minute to build at that size
on two cores, loses recall, and usearch 2.26's Python API has no filter predicate. A filter
restricts the rows before ranking: a small allowed set is gathered into its own matrix; a large
one is ranked with the whole matrix, taking enough best rows to hold ``k`` allowed ones, and
gathered only when they do not.

The matrix is cached in ``vectors.f16`` in the store directory, stamped with the store's id,
generation and identity and checked with a CRC-32. :meth:`VectorIndex.open` uses the file only
when the stamp matches the store and the file reads back whole; anything else (stale, from
another store or model, truncated, corrupted, missing) is rebuilt from SQLite, never trusted.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import struct
import tempfile
import time
import zlib
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
from usearch.index import Matches
from usearch.index import search as usearch_search

from anekit.search.store import Store

__all__ = ["VECTORS_FILE", "IndexStamp", "VectorIndex"]

VECTORS_FILE = "vectors.f16"
_MAGIC = b"ANEKVEC\x01"
_ALIGN = 64
# An allowed set holding at least this fraction of the rows is ranked with the whole matrix
# (copying most of it costs more than the scan); a smaller one is gathered.
_SCAN_FRACTION = 0.2
# Rows ranked by usearch beyond k that are re-scored in float32 (at least k more).
_RERANK_EXTRA = 16
# Stray temporary files of a save that died are removed once this old (seconds).
_STALE_TEMP_S = 600.0


@dataclass(frozen=True)
class IndexStamp:
    """Which store state a vector index was built from."""

    store_id: str
    generation: int
    identity: str

    @classmethod
    def of(cls, store: Store) -> IndexStamp:
        """The stamp of the store's current state."""
        with store.read():
            identity = store.identity
            return cls(store.store_id, store.generation, "" if identity is None else identity.key())


class VectorIndex:
    """Exact cosine search over ``vectors`` (fp16, one row per id in ``ids``, ids ascending)."""

    def __init__(self, ids: np.ndarray, vectors: np.ndarray, stamp: IndexStamp) -> None:
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        vectors = np.ascontiguousarray(vectors, dtype=np.float16)
        if vectors.ndim != 2 or ids.shape != (vectors.shape[0],):
            raise ValueError(f"ids {ids.shape} and vectors {vectors.shape} do not match")
        if ids.size > 1 and not bool(np.all(ids[1:] > ids[:-1])):
            raise ValueError("ids must be strictly ascending")
        self.ids = ids
        self.vectors = vectors
        self.stamp = stamp

    @property
    def generation(self) -> int:
        """The store generation the index was built from."""
        return self.stamp.generation

    @property
    def dimension(self) -> int:
        return int(self.vectors.shape[1])

    def __len__(self) -> int:
        return int(self.ids.size)

    # -- building, loading, saving ------------------------------------------------------------

    @classmethod
    def build(cls, store: Store) -> VectorIndex:
        """Build from the store's vectors (one consistent snapshot)."""
        with store.read():
            stamp = IndexStamp.of(store)
            ids, vectors = store.vector_matrix()
        return cls(ids, vectors, stamp)

    @classmethod
    def open(cls, store: Store, *, save: bool = True) -> VectorIndex:
        """The index of the store's current state: from ``vectors.f16`` when its stamp matches
        and it reads back whole, else built from the store (and saved, when ``save``; a save
        that fails only costs the next open a rebuild)."""
        path = store.directory / VECTORS_FILE
        with store.read():
            stamp = IndexStamp.of(store)
            loaded = cls.load(path, stamp)
            if loaded is not None:
                return loaded
            ids, vectors = store.vector_matrix()
        index = cls(ids, vectors, stamp)
        if save:
            with contextlib.suppress(OSError):
                index.save(path)
        return index

    def is_current(self, store: Store) -> bool:
        """Whether the store is still in the state the index was built from."""
        return IndexStamp.of(store) == self.stamp

    def refresh(self, store: Store) -> VectorIndex:
        """This index if it is current, else the index of the store's state now."""
        return self if self.is_current(store) else VectorIndex.open(store)

    def save(self, path: Path) -> None:
        """Write the index to ``path`` atomically (a temporary file, then a rename)."""
        ids = self.ids.astype("<i8").tobytes()
        vectors = self.vectors.astype("<f2").tobytes()
        header = {
            "store_id": self.stamp.store_id,
            "generation": self.stamp.generation,
            "identity": self.stamp.identity,
            "count": len(self),
            "dimension": self.dimension,
            "crc32": zlib.crc32(vectors, zlib.crc32(ids)),
        }
        raw = json.dumps(header, sort_keys=True).encode()
        offset = len(_MAGIC) + 4 + len(raw)
        raw += b" " * (-offset % _ALIGN)
        _remove_stale_temps(path.parent)
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(_MAGIC + struct.pack("<I", len(raw)) + raw)
                out.write(ids)
                out.write(vectors)
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise

    @classmethod
    def load(cls, path: Path, stamp: IndexStamp) -> VectorIndex | None:
        """The index saved at ``path`` if it carries ``stamp`` and reads back whole (size,
        header and CRC-32 check out), else ``None``."""
        try:
            with open(path, "rb") as f:
                head = f.read(len(_MAGIC) + 4)
                if len(head) != len(_MAGIC) + 4 or head[: len(_MAGIC)] != _MAGIC:
                    return None
                (header_len,) = struct.unpack("<I", head[len(_MAGIC) :])
                header = json.loads(f.read(header_len))
                if (
                    header["store_id"] != stamp.store_id
                    or header["generation"] != stamp.generation
                    or header["identity"] != stamp.identity
                ):
                    return None
                count, dimension = int(header["count"]), int(header["dimension"])
                if count < 0 or dimension <= 0:
                    return None
                body = bytearray(count * 8 + count * dimension * 2)
                if f.readinto(body) != len(body) or f.read(1):
                    return None
            if zlib.crc32(body) != header["crc32"]:
                return None
            # Views of `body` (native on little-endian machines; __init__ converts otherwise).
            ids = np.frombuffer(body, dtype="<i8", count=count)
            vectors = np.frombuffer(body, dtype="<f2", offset=count * 8)
            return cls(ids, vectors.reshape(count, dimension), stamp)
        except (OSError, ValueError, KeyError, TypeError, struct.error, MemoryError):
            return None  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors

    # -- search -------------------------------------------------------------------------------

    def search(
        self, query: np.ndarray, k: int, allowed: AbstractSet[int] | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` ids whose vectors are closest to ``query`` by cosine, best first, as
        ``(id, cosine)``. ``allowed`` restricts the ids before ranking: the result is the best
        ``k`` among them."""
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dimension:
            raise ValueError(f"query of dimension {q.shape[0]}, the index has {self.dimension}")
        if not np.isfinite(q).all() or not q.any():
            raise ValueError("query vector is zero or not finite")
        n = len(self)
        if k <= 0 or n == 0:
            return []
        q16 = q.astype(np.float16)
        want = k + max(k, _RERANK_EXTRA)  # candidates for the float32 rerank
        if allowed is None:
            return self._rerank(self._top(self.vectors, q16, min(want, n)), q, k)
        wanted = np.fromiter(allowed, dtype=np.int64, count=len(allowed))
        pos = np.minimum(np.searchsorted(self.ids, wanted), n - 1)
        mask = np.zeros(n, dtype=bool)
        mask[pos[self.ids[pos] == wanted]] = True
        size = int(np.count_nonzero(mask))
        if size == 0:
            return []
        want = min(want, size)
        fraction = size / n
        if fraction >= _SCAN_FRACTION:
            count = min(n, want + math.ceil(3 * want / fraction))
            best = self._top(self.vectors, q16, count)
            best = best[mask[best]]
            if best.size >= want:
                return self._rerank(best[:want], q, k)
        rows = np.flatnonzero(mask)  # ascending: the gather reads the matrix in order
        return self._rerank(rows[self._top(self.vectors[rows], q16, want)], q, k)

    @staticmethod
    def _top(matrix: np.ndarray, query: np.ndarray, count: int) -> np.ndarray:
        """Rows of ``matrix`` closest to ``query`` by cosine, best first (usearch, exact)."""
        matches = cast(Matches, usearch_search(matrix, query, count, "cos", exact=True))
        return matches.keys.astype(np.int64)

    def _rerank(self, rows: np.ndarray, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The best ``k`` of ``rows`` by cosine in float32 against the float32 query (usearch
        ranked them against the query rounded to fp16), ties by id."""
        x = self.vectors[rows].astype(np.float32)
        norms = np.maximum(np.linalg.norm(x, axis=1), np.finfo(np.float32).tiny)
        cosines = (x @ query) / (norms * np.linalg.norm(query))
        ids = self.ids[rows]
        order = np.lexsort((ids, -cosines))[:k]
        return [(int(ids[i]), float(cosines[i])) for i in order]


def _remove_stale_temps(directory: Path) -> None:
    """Remove temporary files of saves that died (old enough not to be in progress)."""
    now = time.time()
    for temp in directory.glob(f".{VECTORS_FILE}-*.tmp"):
        with contextlib.suppress(OSError):
            if now - temp.stat().st_mtime > _STALE_TEMP_S:
                temp.unlink()
