"""The code search store's writes (:class:`StoreWrites`, a part of
:class:`~anekit.search.store.Store`): its identity, and putting, touching and removing files
with their chunks, vectors and FTS rows, inside :meth:`~StoreConnection.write` blocks."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import astuple
from typing import Any

import numpy as np

from anekit.errors import SearchError
from anekit.search.store_connection import StoreConnection
from anekit.search.store_damage import damage_checked
from anekit.search.store_records import CHUNK_KINDS, ChunkRecord, FileRecord, StoreIdentity
from anekit.search.store_schema import fts_values

__all__ = ["StoreWrites"]


class StoreWrites(StoreConnection):
    """What changes the store's files, chunks and vectors."""

    @damage_checked
    def ensure_identity(self, identity: StoreIdentity) -> bool:
        """Make ``identity`` the store's; a store of another identity loses every file, chunk
        and vector (all are to be embedded again): then returns ``True``."""
        if not all(isinstance(v, str) and v for v in (identity.model, identity.chunker)):
            raise ValueError(f"identity needs a model and a chunker: {identity}")
        if identity.dimension <= 0 or identity.max_length <= 0:
            raise ValueError(f"identity needs a positive dimension and max_length: {identity}")
        if not self._in_write:
            with self.write():
                return self.ensure_identity(identity)
        current = self.identity
        if current == identity:
            return False
        reset = current is not None or bool(
            self._conn.execute("SELECT EXISTS (SELECT 1 FROM files)").fetchone()[0]
        )
        if reset:
            self._conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('delete-all')")
            for table in ("vectors", "chunks", "files"):
                self._conn.execute(f"DELETE FROM {table}")
            # the log's rows of every vector just deleted: an approximate index of the old
            # identity is rebuilt whole, never caught up
            self._conn.execute("DELETE FROM vector_log")
            self._changed = True
        self._set_meta("identity", identity.key())
        return reset

    @damage_checked
    def put_file(
        self,
        file: FileRecord,
        chunks: Sequence[ChunkRecord],
        vectors: np.ndarray | Sequence[np.ndarray | None],
        variants: Sequence[str | None] | None = None,
    ) -> None:
        """Store ``file`` with ``chunks`` and their ``vectors``, replacing its old chunks,
        vectors and FTS rows in the current :meth:`write` transaction. ``vectors``: an array
        ``(len(chunks), dimension)`` (kept as fp16), or per chunk a vector or ``None`` for
        one still to come (:meth:`put_vectors`). ``variants``: per chunk, ``None`` for a
        vector of the store identity's variant, else the variant of the lane that made it
        instead."""
        self._require_write("put_file")
        identity = self._require_identity()
        marks = list(variants) if variants is not None else [None] * len(chunks)
        if len(marks) != len(chunks):
            raise ValueError(f"{file.relpath}: {len(marks)} variants for {len(chunks)} chunk(s)")
        marks = [None if m == identity.variant else m for m in marks]
        if isinstance(vectors, np.ndarray) or not any(v is None for v in vectors):
            rows: list[np.ndarray | None] = list(
                self._half(file.relpath, vectors, len(chunks), identity.dimension)
            )
        else:
            if len(vectors) != len(chunks):
                raise ValueError(
                    f"{file.relpath}: {len(vectors)} vectors for {len(chunks)} chunk(s)"
                )
            present = [v for v in vectors if v is not None]
            known = iter(self._half(file.relpath, present, len(present), identity.dimension))
            rows = [None if v is None else next(known) for v in vectors]
        for chunk in chunks:
            if chunk.kind not in CHUNK_KINDS:
                raise ValueError(f"{file.relpath}: chunk kind {chunk.kind!r} not in {CHUNK_KINDS}")
            if not 1 <= chunk.start_line <= chunk.end_line:
                raise ValueError(
                    f"{file.relpath}: bad line span {chunk.start_line}-{chunk.end_line}"
                )

        conn = self._conn
        conn.execute(
            "INSERT INTO files(relpath, size, mtime_ns, sha256, language, indexed_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(relpath) DO UPDATE SET size = excluded.size, "
            "mtime_ns = excluded.mtime_ns, sha256 = excluded.sha256, "
            "language = excluded.language, indexed_at = excluded.indexed_at",
            (file.relpath, file.size, file.mtime_ns, file.sha256, file.language, time.time()),
        )
        file_id = conn.execute(
            "SELECT id FROM files WHERE relpath = ?", (file.relpath,)
        ).fetchone()[0]
        self._drop_chunks(file_id, file.relpath)
        for chunk, vector, variant in zip(chunks, rows, marks, strict=True):
            chunk_id = conn.execute(
                "INSERT INTO chunks(file_id, start_line, end_line, text, symbol, kind, text_hash)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (file_id, *astuple(chunk)),  # the columns in ChunkRecord's field order
            ).lastrowid
            if vector is not None:
                conn.execute(
                    "INSERT INTO vectors(chunk_id, vector, variant) VALUES (?, ?, ?)",
                    (chunk_id, vector.tobytes(), variant),
                )
            conn.execute(
                "INSERT INTO chunks_fts(rowid, text, path, symbol) VALUES (?, ?, ?, ?)",
                (chunk_id, *fts_values(chunk.text, file.relpath, chunk.symbol)),
            )
        self._changed = True

    @damage_checked
    def put_vectors(self, items: Sequence[tuple[str, np.ndarray, str | None]]) -> int:
        """Give each stored chunk waiting for a vector whose ``text_hash`` is among
        ``items`` (text hash, vector, variant of the lane that made it) that vector, in the
        current :meth:`write` transaction; how many chunks got one."""
        self._require_write("put_vectors")
        identity = self._require_identity()
        half = self._half("put_vectors", [v for _, v, _ in items], len(items), identity.dimension)
        added = 0
        for (text_hash, _, variant), vector in zip(items, half, strict=True):
            added += self._conn.execute(
                "INSERT INTO vectors(chunk_id, vector, variant) SELECT c.id, ?, ? FROM chunks c "
                "WHERE c.text_hash = ? AND NOT EXISTS "
                "(SELECT 1 FROM vectors v WHERE v.chunk_id = c.id)",
                (vector.tobytes(), None if variant == identity.variant else variant, text_hash),
            ).rowcount
        if added:
            self._changed = True
        return added

    def _require_identity(self) -> StoreIdentity:
        identity = self.identity
        if identity is None:
            raise SearchError(f"{self.path}: no store identity; call ensure_identity() first")
        return identity

    @staticmethod
    def _half(what: str, vectors: Any, count: int, dimension: int) -> np.ndarray:
        """``vectors`` as fp16 rows ``(count, dimension)``, refused when not floats, of
        another shape, not finite in fp16, or zero."""
        array = np.asarray(vectors)
        if array.size == 0 and count == 0:
            array = array.reshape(0, dimension)
        if array.ndim != 2 or array.shape != (count, dimension):
            raise ValueError(
                f"{what}: vectors of shape {array.shape} for {count} chunk(s) "
                f"of dimension {dimension}"
            )
        if not np.issubdtype(array.dtype, np.floating):
            raise ValueError(f"{what}: vectors must be floats, not {array.dtype}")
        with np.errstate(over="ignore"):
            half = array.astype("<f2")
        if not np.isfinite(half).all():
            raise ValueError(f"{what}: vectors with NaN or inf (in fp16)")
        if count and not np.any(half != 0, axis=1).all():
            raise ValueError(f"{what}: a zero vector")
        return half

    def _drop_chunks(self, file_id: int, relpath: str) -> None:
        """Remove a file's chunks with their vectors and FTS rows."""
        rows = self._conn.execute(
            "SELECT id, text, symbol FROM chunks WHERE file_id = ?", (file_id,)
        ).fetchall()
        if not rows:
            return
        self._conn.executemany(
            "INSERT INTO chunks_fts(chunks_fts, rowid, text, path, symbol) "
            "VALUES ('delete', ?, ?, ?, ?)",
            [(chunk_id, *fts_values(text, relpath, symbol)) for chunk_id, text, symbol in rows],
        )
        self._conn.execute(
            "DELETE FROM vectors WHERE chunk_id IN (SELECT id FROM chunks WHERE file_id = ?)",
            (file_id,),
        )
        self._conn.execute("DELETE FROM chunks WHERE file_id = ?", (file_id,))
        self._changed = True

    @damage_checked
    def touch_file(self, relpath: str, size: int, mtime_ns: int) -> None:
        """Record a new size and mtime for a file whose content did not change.
        Raises ``KeyError`` for a file not in the store."""
        self._require_write("touch_file")
        cursor = self._conn.execute(
            "UPDATE files SET size = ?, mtime_ns = ? WHERE relpath = ?", (size, mtime_ns, relpath)
        )
        if cursor.rowcount == 0:
            raise KeyError(relpath)

    @damage_checked
    def remove_file(self, relpath: str) -> bool:
        """Drop a file with its chunks, vectors and FTS rows; ``False`` if it was not stored."""
        self._require_write("remove_file")
        row = self._conn.execute("SELECT id FROM files WHERE relpath = ?", (relpath,)).fetchone()
        if row is None:
            return False
        self._drop_chunks(row[0], relpath)
        self._conn.execute("DELETE FROM files WHERE id = ?", (row[0],))
        self._changed = True
        return True

    @damage_checked
    def trim_vector_log(self, seq: int) -> None:
        """Forget the vector changes logged up to ``seq`` (folded into the approximate index,
        or of no use to it), and record ``seq`` as the approximate index's (meta
        ``ann_seq``), in the current :meth:`write` transaction; neither moves the
        generation."""
        self._require_write("trim_vector_log")
        self._conn.execute("DELETE FROM vector_log WHERE seq <= ?", (seq,))
        self._set_meta("ann_seq", seq)

    @damage_checked
    def advance_embedded_mark(self) -> None:
        """Move :attr:`embedded_below` up to the first chunk still waiting for a vector (past
        the last chunk when none is), in the current :meth:`write` transaction; reads only
        the chunks from the old mark on, and does not move the generation."""
        self._require_write("advance_embedded_mark")
        mark = self.embedded_below
        first = self._conn.execute(
            "SELECT min(c.id) FROM chunks c WHERE c.id >= ? AND NOT EXISTS "
            "(SELECT 1 FROM vectors v WHERE v.chunk_id = c.id)",
            (mark,),
        ).fetchone()[0]
        if first is None:
            row = self._conn.execute(
                "SELECT seq FROM sqlite_sequence WHERE name = 'chunks'"
            ).fetchone()
            first = mark if row is None else int(row[0]) + 1
        if first != mark:
            self._set_meta("embedded_below", int(first))
