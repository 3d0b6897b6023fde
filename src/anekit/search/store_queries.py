"""The code search store's reads (:class:`StoreQueries`, a part of
:class:`~anekit.search.store.Store`): its files, chunks and vectors, counts and stats, and the
lookups a search makes of files by name and of their first chunks."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import suppress
from dataclasses import asdict
from typing import Any

import numpy as np

from anekit.errors import SearchError
from anekit.search.store_connection import StoreConnection
from anekit.search.store_damage import damage_checked
from anekit.search.store_records import FileRecord, StoredChunk

__all__ = ["StoreQueries"]


def _file_stem(relpath: str) -> str:
    """A file's name before its first dot, lower-cased (``FlatMap.scala``: ``flatmap``)."""
    return relpath.rsplit("/", 1)[-1].split(".")[0].lower()


class StoreQueries(StoreConnection):
    """What reads the store's files, chunks and vectors."""

    @damage_checked
    def files(self) -> dict[str, FileRecord]:
        """Every stored file by its relative path."""
        rows = self._conn.execute(
            "SELECT relpath, size, mtime_ns, sha256, language FROM files ORDER BY relpath"
        )
        return {row[0]: FileRecord(*row) for row in rows}

    @damage_checked
    def chunk_count(self) -> int:
        """How many chunks the store holds."""
        return int(self._conn.execute("SELECT count(*) FROM chunks").fetchone()[0])

    @damage_checked
    def embedded_counts(self) -> tuple[int, int]:
        """(chunks with a vector, chunks): while an update embeds, the first lags."""
        with self.read():
            embedded = self._conn.execute("SELECT count(*) FROM vectors").fetchone()[0]
            return int(embedded), self.chunk_count()

    @damage_checked
    def stand_in_files(self) -> list[str]:
        """Files holding a vector made by a lane of another variant than the store's (a
        fallback stood in for the store's lane): the next update embeds them again."""
        with self.read():
            rows = self._conn.execute(
                "SELECT DISTINCT f.relpath FROM vectors v JOIN chunks c ON c.id = v.chunk_id "
                "JOIN files f ON f.id = c.file_id WHERE v.variant IS NOT NULL ORDER BY f.relpath"
            )
            return [relpath for (relpath,) in rows]

    @damage_checked
    def stats(self) -> dict[str, Any]:
        """Files, chunks, stand-in vectors by variant, bytes on disk (the whole store
        directory), identity, generation and the time of the last write (or ``None``)."""
        with self.read():
            identity = self.identity
            embedded, chunks = self.embedded_counts()
            stats = {
                "files": int(self._conn.execute("SELECT count(*) FROM files").fetchone()[0]),
                "chunks": chunks,
                "embedded": embedded,
                "embedded_fraction": round(embedded / chunks, 4) if chunks else 1.0,
                "stand_ins": dict(
                    self._conn.execute(
                        "SELECT variant, count(*) FROM vectors WHERE variant IS NOT NULL "
                        "GROUP BY variant ORDER BY variant"
                    ).fetchall()
                ),
                "languages": self.languages(),
                "bytes": 0,
                "identity": None if identity is None else asdict(identity),
                "generation": self.generation,
                "last_write": self._meta("last_write"),
            }
        for entry in self.directory.iterdir():
            with suppress(OSError):  # a derived file replaced meanwhile
                if entry.is_file():
                    stats["bytes"] += entry.stat().st_size
        return stats

    @damage_checked
    def unembedded(self) -> list[tuple[StoredChunk, str]]:
        """The chunks still waiting for a vector, with their text hashes, by path and line:
        read from :attr:`embedded_below` on (ids grow, so an update after a save reads the
        few new chunks, not a million)."""
        with self.read():
            rows = self._conn.execute(
                "SELECT c.id, f.relpath, c.start_line, c.end_line, c.text, c.symbol, c.kind, "
                "f.language, c.text_hash FROM chunks c JOIN files f ON f.id = c.file_id "
                "WHERE c.id >= ? AND NOT EXISTS (SELECT 1 FROM vectors v WHERE v.chunk_id = c.id) "
                "ORDER BY f.relpath, c.start_line, c.id",
                (self.embedded_below,),
            ).fetchall()
        return [(StoredChunk(*row[:-1]), row[-1]) for row in rows]

    @damage_checked
    def chunks(self, ids: Sequence[int]) -> list[StoredChunk]:
        """The chunks with these ids, in the order given; ids not in the store are left out."""
        wanted = [int(i) for i in ids]
        with self.read():  # one snapshot, however many batches
            rows = self._select_in(
                "SELECT c.id, f.relpath, c.start_line, c.end_line, c.text, c.symbol, "
                "c.kind, f.language FROM chunks c JOIN files f ON f.id = c.file_id "
                "WHERE c.id IN ({marks})",
                wanted,
            )
            found = {row[0]: StoredChunk(*row) for row in rows}
        return [found[i] for i in wanted if i in found]

    @damage_checked
    def known_vectors(self, text_hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors by the ``text_hash`` of their chunk's text, for the hashes given that
        the store holds, stand-ins left out (they are to be replaced)."""
        found: dict[str, np.ndarray] = {}
        for text_hash, blob in self._select_in(
            "SELECT c.text_hash, v.vector FROM chunks c JOIN vectors v ON v.chunk_id = c.id "
            "WHERE c.text_hash IN ({marks}) AND v.variant IS NULL",
            sorted(set(text_hashes)),
        ):
            found.setdefault(text_hash, np.frombuffer(blob, dtype="<f2").astype(np.float16))
        return found

    def _select_in(self, sql: str, values: Sequence[Any]) -> Iterator[Any]:
        """The rows of ``sql`` with its ``{marks}`` bound to ``values``, 500 at a time."""
        for start in range(0, len(values), 500):
            batch = values[start : start + 500]
            yield from self._conn.execute(sql.format(marks=",".join("?" * len(batch))), batch)

    @damage_checked
    def languages(self) -> dict[str, int]:
        """How many stored files each language has (files of no known language left out)."""
        rows = self._conn.execute(
            "SELECT language, count(*) FROM files WHERE language IS NOT NULL "
            "GROUP BY language ORDER BY count(*) DESC, language"
        )
        return dict(rows.fetchall())

    @damage_checked
    def vector_matrix(self) -> tuple[np.ndarray, np.ndarray]:
        """Every chunk's vector: ``(ids, vectors)``, ids ``int64`` ascending and vectors
        ``float16`` of shape ``(n, dimension)``. Read it inside :meth:`read` together with
        :attr:`generation` to know which state it is."""
        with self.read():
            identity = self.identity
            dimension = 0 if identity is None else identity.dimension
            rows = self._conn.execute(
                "SELECT chunk_id, vector FROM vectors ORDER BY chunk_id"
            ).fetchall()
        ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        data = b"".join(row[1] for row in rows)
        if len(data) != len(rows) * dimension * 2:
            raise SearchError(f"{self.path}: stored vectors do not match dimension {dimension}")
        vectors = np.frombuffer(data, dtype="<f2").astype(np.float16).reshape(len(rows), dimension)
        return ids, vectors

    def _dimension(self) -> int:
        identity = self.identity
        return 0 if identity is None else identity.dimension

    @staticmethod
    def _rows_of(ids: list[int], blobs: list[bytes], dimension: int) -> tuple[Any, Any]:
        data = b"".join(blobs)
        if len(data) != len(blobs) * dimension * 2:
            raise SearchError(f"stored vectors do not match dimension {dimension}")
        vectors = np.frombuffer(data, dtype="<f2").astype(np.float16)
        return np.asarray(ids, dtype=np.int64), vectors.reshape(len(blobs), dimension)

    @damage_checked
    def vectors_of(self, chunk_ids: Iterable[int]) -> tuple[np.ndarray, np.ndarray]:
        """The vectors of those of ``chunk_ids`` that have one: ``(ids, vectors)``, ids
        ascending, vectors fp16."""
        wanted = sorted({int(i) for i in chunk_ids})
        with self.read():
            dimension = self._dimension()
            rows = list(
                self._select_in(
                    "SELECT chunk_id, vector FROM vectors WHERE chunk_id IN ({marks}) "
                    "ORDER BY chunk_id",
                    wanted,
                )
            )
        rows.sort()
        return self._rows_of([r[0] for r in rows], [r[1] for r in rows], dimension)

    @damage_checked
    def vector_batches(self, size: int = 50_000) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Every vector, ``size`` at a time in chunk id order, as :meth:`vectors_of` gives
        them (one read transaction: one state; iterate inside :meth:`read` to pair it with
        :meth:`vector_log_end`)."""
        with self.read():
            dimension = self._dimension()
            after = -1
            while True:
                rows = self._conn.execute(
                    "SELECT chunk_id, vector FROM vectors WHERE chunk_id > ? "
                    "ORDER BY chunk_id LIMIT ?",
                    (after, size),
                ).fetchall()
                if not rows:
                    return
                after = rows[-1][0]
                yield self._rows_of([r[0] for r in rows], [r[1] for r in rows], dimension)

    @damage_checked
    def vector_log_end(self) -> int:
        """The seq of the last vector change logged (0: none since the log was made)."""
        row = self._conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'vector_log'")
        found = row.fetchone()
        return 0 if found is None else int(found[0])

    @damage_checked
    def vector_log_since(self, seq: int, limit: int | None = None) -> tuple[int, list[int]]:
        """The chunks whose vector changed (added, replaced, removed) after ``seq``: (the last
        seq read, their ids without repeats); at most ``limit`` log rows when given."""
        rows = self._conn.execute(
            "SELECT seq, chunk_id FROM vector_log WHERE seq > ? ORDER BY seq LIMIT ?",
            (seq, -1 if limit is None else limit),
        ).fetchall()
        if not rows:
            return seq, []
        return int(rows[-1][0]), list(dict.fromkeys(int(r[1]) for r in rows))

    @damage_checked
    def vector_log_count(self, seq: int) -> int:
        """How many vector changes were logged after ``seq``."""
        return int(
            self._conn.execute("SELECT count(*) FROM vector_log WHERE seq > ?", (seq,)).fetchone()[
                0
            ]
        )

    def definition_run(self, relpath: str, start_line: int, symbol: str) -> list[StoredChunk]:
        """The chunks of ``relpath`` from the one starting at ``start_line`` back through the
        unbroken run of chunks whose symbol is ``symbol`` or nested in it (``symbol > ...``),
        latest first: a long definition's chunks up to its first (its signature's)."""
        run: list[StoredChunk] = []
        with self.read():
            rows = self._conn.execute(
                "SELECT c.id, f.relpath, c.start_line, c.end_line, c.text, c.symbol, c.kind, "
                "f.language FROM chunks c JOIN files f ON f.id = c.file_id "
                "WHERE f.relpath = ? AND c.start_line <= ? ORDER BY c.start_line DESC, c.id DESC",
                (relpath, start_line),
            )
            for row in rows:
                chunk = StoredChunk(*row)
                if chunk.symbol != symbol and not chunk.symbol.startswith(symbol + " > "):
                    break
                run.append(chunk)
        return run

    def files_named(self, stems: Iterable[str]) -> list[str]:
        """The indexed files whose name before its first dot is one of ``stems``, in any
        case (``FlatMap.scala`` for ``flatmap``), in path order (from a map of every file's
        stem, kept for the store's generation: a search asks this of every query)."""
        return self.files_named_each([stems])[0]

    def files_named_each(self, groups: Sequence[Iterable[str]]) -> list[list[str]]:
        """:meth:`files_named` of each group of stems, from one read of the map."""
        with self.read():  # the stems of every file, read once a generation
            self._check_caches()
            if self._stems is None:
                self._stems = {}
                for (relpath,) in self._conn.execute("SELECT relpath FROM files"):
                    self._stems.setdefault(_file_stem(relpath), []).append(relpath)
            by_stem = self._stems
        return [
            sorted({path for stem in {s.lower() for s in stems} for path in by_stem.get(stem, ())})
            for stems in groups
        ]

    def file_chunk_ids(self, relpaths: Sequence[str], per_file: int) -> list[int]:
        """The ids of the first ``per_file`` chunks of each of ``relpaths``, file by file."""
        ids: list[int] = []
        with self.read():
            for relpath in relpaths:
                rows = self._conn.execute(
                    "SELECT c.id FROM chunks c JOIN files f ON f.id = c.file_id WHERE f.relpath = ?"
                    " ORDER BY c.start_line, c.id LIMIT ?",
                    (relpath, per_file),
                )
                ids += [int(row[0]) for row in rows]
        return ids

    def file_heads(self, relpaths: Sequence[str]) -> dict[str, tuple[StoredChunk, int]]:
        """Each indexed file's first chunk and how many chunks it has, by relative path,
        for the files given that the store holds (a shim and its targets: rank.fuse)."""
        with self.read():
            rows = self._select_in(
                "SELECT c.id, f.relpath, c.start_line, c.end_line, c.text, c.symbol, c.kind, "
                "f.language, (SELECT count(*) FROM chunks c3 WHERE c3.file_id = f.id) "
                "FROM files f JOIN chunks c ON c.id = (SELECT c2.id FROM chunks c2 WHERE "
                "c2.file_id = f.id ORDER BY c2.start_line, c2.id LIMIT 1) "
                "WHERE f.relpath IN ({marks})",
                sorted(set(relpaths)),
            )
            return {row[1]: (StoredChunk(*row[:8]), int(row[8])) for row in rows}

    def first_chunks(self, relpaths: Sequence[str]) -> dict[str, str]:
        """The text of each file's first chunk (its first lines), by relative path, for the
        files given that the store holds (kept for the store's generation: a search asks
        for the same files again and again)."""
        self._check_caches()
        if len(self._heads) > 50_000:
            self._heads.clear()
        wanted = sorted(set(relpaths) - self._heads.keys())
        if wanted:
            found = {relpath: head.text for relpath, (head, _) in self.file_heads(wanted).items()}
            self._heads.update((relpath, found.get(relpath)) for relpath in wanted)
        heads = ((relpath, self._heads.get(relpath)) for relpath in relpaths)
        return {relpath: head for relpath, head in heads if head is not None}
