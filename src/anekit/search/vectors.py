"""The vector index: cosine search over the store's fp16 vectors, derived from SQLite.

:class:`VectorIndex` holds the store's vectors as one fp16 matrix. A query scans every row
in two steps: a first pass takes the dot products of the unit rows and the unit query
rounded to int8 (one ``MatMulInteger`` of ONNX Runtime, whose int8 kernels use the CPU's
VNNI or AVX2 instructions, on a matrix it packs once per index), keeps the best
:data:`FIRST_PASS` times the rows asked for, and re-scores those in float32 from the fp16
rows against the float32 query. At 100k x 384 the first pass takes about 2 ms on one core,
the thread it runs on (0.7 ms on two; usearch's exact search of the same fp16 rows took
6 ms on two, NumPy's fp32 matrix-vector product 7 ms). It is not exact by construction: a
row whose int8 score falls outside the kept rows is lost, which needs an int8 error of
many times the gap between rows; on a 100k-chunk store (bench/search_scale.py's), the top
40 of each of the 66 development questions equalled exact search. There is no build step
beyond the int8 copy (0.5 s at 100k); an HNSW graph would take most of a minute to build
at that size on two cores and lose recall. A filter restricts the rows before ranking:
their first-pass scores are selected, the rest ignored. An index of at most
:data:`FLOAT_SCAN_ROWS` rows is scanned in float32 by NumPy instead (exact; about 1 ms at
10k rows, and no ONNX graph to build: a one-shot ``anekit search`` saves 0.1-0.2 s).

The matrix is cached in ``vectors.f16`` in the store directory, stamped with the store's id,
generation and identity and checked with a CRC-32. :meth:`VectorIndex.open` uses the file only
when the stamp matches the store and the file reads back whole; anything else (stale, from
another store or model, truncated, corrupted, missing) is rebuilt from SQLite, never trusted.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from anekit.search.store import Store

__all__ = ["FIRST_PASS", "VECTORS_FILE", "IndexStamp", "VectorIndex", "unit_query", "unit_rows"]

VECTORS_FILE = "vectors.f16"
_MAGIC = b"ANEKVEC\x01"
_ALIGN = 64
#: The first pass keeps this many times the rows that are re-scored in float32.
FIRST_PASS = 4
# Rows re-scored in float32 beyond k (at least k more).
_RERANK_EXTRA = 16
# Threads of the first pass: one, so that a hybrid search's keyword half has the other core.
_SCAN_THREADS = 1
# The int8 scale of a unit vector's components.
_INT8_SCALE = 127.0
#: Up to this many rows the first pass is an exact float32 scan (NumPy), not int8.
FLOAT_SCAN_ROWS = 20_000
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


def unit_query(query: np.ndarray, dimension: int) -> np.ndarray:
    """``query`` as a float32 unit vector; ValueError when it is not of ``dimension``, or
    zero or not finite."""
    q = np.asarray(query, dtype=np.float32).reshape(-1)
    if q.shape[0] != dimension:
        raise ValueError(f"query of dimension {q.shape[0]}, the index has {dimension}")
    if not np.isfinite(q).all() or not q.any():
        raise ValueError("query vector is zero or not finite")
    unit: np.ndarray = q / np.linalg.norm(q)
    return unit


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` as float32 rows of norm 1 (a zero row stays zero)."""
    rows = np.asarray(vectors, dtype=np.float32)
    out: np.ndarray = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
    return out


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
        self._scan: _Int8Scan | _Float32Scan | None = None  # made at the first search
        self._scan_lock = threading.Lock()

    @property
    def generation(self) -> int:
        """The store generation the index was built from."""
        return self.stamp.generation

    @property
    def dimension(self) -> int:
        return int(self.vectors.shape[1])

    def __len__(self) -> int:
        return int(self.ids.size)

    @classmethod
    def open(cls, store: Store, *, save: bool = True) -> VectorIndex:
        """The index of the store's current state: loaded from ``vectors.f16``, else built (and
        saved when ``save``; a save that fails only costs the next open a rebuild)."""
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

    def refresh(self, store: Store, *, save: bool = True) -> VectorIndex:
        """This index if it is current, else the index of the store's state now."""
        return self if self.is_current(store) else VectorIndex.open(store, save=save)

    def save(self, path: Path) -> None:
        """Write the index to ``path`` atomically (a temporary file, then a rename)."""
        ids = self.ids.astype("<i8").tobytes()
        vectors = self.vectors.astype("<f2").tobytes()
        header = {
            **asdict(self.stamp),
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
                out.writelines([_MAGIC + struct.pack("<I", len(raw)) + raw, ids, vectors])
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
                if any(header[key] != value for key, value in asdict(stamp).items()):
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

    def search(
        self,
        query: np.ndarray,
        k: int,
        allowed: AbstractSet[int] | None = None,
        store: Store | None = None,
    ) -> list[tuple[int, float]]:
        """The ``k`` ids whose vectors are closest to ``query`` by cosine, best first, as
        ``(id, cosine)``, among the ``allowed`` ids if given (``store``: unused, as
        :meth:`anekit.search.ann.AnnIndex.search` takes it)."""
        q = unit_query(query, self.dimension)
        n = len(self)
        if k <= 0 or n == 0:
            return []
        if self._scan is None:
            with self._scan_lock:  # readers in several threads share one index
                if self._scan is None:
                    small = len(self) <= FLOAT_SCAN_ROWS
                    self._scan = _Float32Scan(self.vectors) if small else _Int8Scan(self.vectors)
        rows: np.ndarray | None = None  # every row
        if allowed is not None:
            wanted = np.fromiter(allowed, dtype=np.int64, count=len(allowed))
            pos = np.minimum(np.searchsorted(self.ids, wanted), n - 1)
            rows = np.unique(pos[self.ids[pos] == wanted])
            if rows.size == 0:
                return []
        if isinstance(self._scan, _Float32Scan):  # exact already: its scores are the cosines
            return self._best(rows, self._scan.scores(q), k)
        want = FIRST_PASS * (k + max(k, _RERANK_EXTRA))
        if rows is None:
            return self._rerank(self._scan.top(q, min(want, n)), q, k)
        scores = self._scan.scores(q)[rows]
        if rows.size > want:
            rows = rows[np.argpartition(-scores, want - 1)[:want]]
        return self._rerank(rows, q, k)

    def first_pass(
        self, query: np.ndarray, k: int, allowed: AbstractSet[int] | None = None
    ) -> Callable[[Store], list[tuple[int, float]]]:
        """:meth:`search` done on this thread (it reads nothing from the store), as
        :meth:`anekit.search.ann.AnnIndex.first_pass` gives it: the function returned
        gives the answer."""
        found = self.search(query, k, allowed)
        return lambda store: found

    def _best(
        self, rows: np.ndarray | None, cosines: np.ndarray, k: int
    ) -> list[tuple[int, float]]:
        """The best ``k`` of ``rows`` (None: all) by their ``cosines`` (one per row of the
        index), ties by id."""
        if rows is None:
            rows = np.arange(cosines.size)
        scores = cosines[rows]
        if k < rows.size:  # the rows at least as good as the k-th (its ties too)
            kept = np.flatnonzero(scores >= -np.partition(-scores, k - 1)[k - 1])
            rows, scores = rows[kept], scores[kept]
        ids = self.ids[rows]
        order = np.lexsort((ids, -scores))[:k]
        return [(int(ids[i]), float(scores[i])) for i in order]

    def _rerank(self, rows: np.ndarray, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The best ``k`` of ``rows`` by cosine in float32 against the unit float32 query
        (the first pass ranked them in int8), ties by id."""
        x = self.vectors[rows].astype(np.float32)
        norms = np.maximum(np.linalg.norm(x, axis=1), np.finfo(np.float32).tiny)
        cosines = (x @ query) / norms
        ids = self.ids[rows]
        order = np.lexsort((ids, -cosines))[:k]
        return [(int(ids[i]), float(cosines[i])) for i in order]


class _Float32Scan:
    """The first pass of a small index: float32 dot products of the unit rows and query."""

    def __init__(self, vectors: np.ndarray) -> None:
        self._rows = unit_rows(vectors)

    def top(self, query: np.ndarray, count: int) -> np.ndarray:
        """The ``count`` rows with the highest scores, best first (ties by row)."""
        scores = self.scores(query)
        if count < scores.size:
            kept = np.argpartition(-scores, count - 1)[:count]
        else:
            kept = np.arange(scores.size)
        best: np.ndarray = kept[np.lexsort((kept, -scores[kept]))].astype(np.int64)
        return best

    def scores(self, query: np.ndarray) -> np.ndarray:
        """Every row's cosine with the unit ``query``."""
        found: np.ndarray = self._rows @ query.astype(np.float32)
        return found


class _Int8Scan:
    """The first pass: int8 dot products of the unit rows and query (components times 127),
    one ``MatMulInteger`` over the rows as a (dimension, rows) constant packed once."""

    _STEP = 8192  # rows quantized at a time (bounds the float32 temporaries)

    def __init__(self, vectors: np.ndarray) -> None:
        import onnxruntime
        from onnx import TensorProto, helper

        count, dimension = vectors.shape
        rows = np.empty((count, dimension), np.int8)
        for start in range(0, count, self._STEP):
            part = vectors[start : start + self._STEP].astype(np.float32)
            norms = np.maximum(np.linalg.norm(part, axis=1, keepdims=True), 1e-12)
            rows[start : start + self._STEP] = np.rint(part / norms * _INT8_SCALE)
        self._matrix = np.ascontiguousarray(rows.T)  # (dimension, rows); kept alive for ORT
        del rows
        matrix = TensorProto(name="rows", data_type=TensorProto.INT8, dims=[dimension, count])
        matrix.data_location = TensorProto.EXTERNAL  # its data: self._matrix, given below
        matrix.external_data.add(key="location", value="rows.bin")
        graph = helper.make_graph(
            [
                helper.make_node("MatMulInteger", ["query", "rows", "zero"], ["scores"]),
                helper.make_node("TopK", ["scores", "count"], ["best_scores", "best"], axis=1),
            ],
            "int8_scan",
            [
                helper.make_tensor_value_info("query", TensorProto.UINT8, [1, dimension]),
                helper.make_tensor_value_info("count", TensorProto.INT64, [1]),
            ],
            [
                helper.make_tensor_value_info("scores", TensorProto.INT32, [1, count]),
                helper.make_tensor_value_info("best", TensorProto.INT64, [1, None]),
            ],
            [matrix, helper.make_tensor("zero", TensorProto.UINT8, [], [128])],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        options.intra_op_num_threads = _SCAN_THREADS
        options.add_external_initializers(
            ["rows"], [onnxruntime.OrtValue.ortvalue_from_numpy(self._matrix)]
        )
        self._session: Any = onnxruntime.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )

    def _run(self, output: str, query: np.ndarray, count: int) -> Any:
        # The unit query as uint8 with zero point 128 (MatMulInteger's ``a``).
        quantized = (np.rint(query * _INT8_SCALE).astype(np.int16) + 128).astype(np.uint8)
        feed = {"query": quantized.reshape(1, -1), "count": np.array([count], np.int64)}
        return self._session.run([output], feed)[0][0]

    def top(self, query: np.ndarray, count: int) -> np.ndarray:
        """The ``count`` rows with the highest int8 scores, best first."""
        return np.asarray(self._run("best", query, count), np.int64)

    def scores(self, query: np.ndarray) -> np.ndarray:
        """Every row's int8 score (int32, in units of 127 squared)."""
        return np.asarray(self._run("scores", query, 1))


def _remove_stale_temps(directory: Path) -> None:
    """Remove temporary files of saves that died (old enough not to be in progress)."""
    now = time.time()
    for temp in directory.glob(f".{VECTORS_FILE}-*.tmp"):
        with contextlib.suppress(OSError):
            if now - temp.stat().st_mtime > _STALE_TEMP_S:
                temp.unlink()
