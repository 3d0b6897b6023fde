"""The machine-wide vector cache: a chunk embedded once is not embedded again.

Keyed by (model, variant, chunker version, max length, the hash of the text given to the
model), so unchanged chunks of an edited file, a renamed file and a second worktree of
the same repository reuse their vectors (semlith's ``~/.semlith/cache/vectors.db``,
shared/docs/prior-art.md §3.5). It lives in ``$ANEKIT_HOME/search/vectors.db``, one
SQLite file shared by every store and process (WAL, a busy timeout), capped at
:data:`MAX_BYTES`: past it, the least recently used vectors go. A cache that cannot be
read is set aside and started afresh; the stores never depend on it.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from anekit import config

#: The cache's size cap (about 650,000 vectors of 384 dimensions).
MAX_BYTES = 1024 * 2**20
CACHE_FILE = "vectors.db"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    key BLOB PRIMARY KEY,
    vector BLOB NOT NULL,
    used INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS vectors_used ON vectors(used);
"""
#: Lookups per SQL statement (SQLite allows 32,766 parameters).
_BATCH = 500


def cache_key(namespace: str, text_hash: str) -> bytes:
    """The key of one chunk's vector: ``namespace`` names the model, variant, chunker
    version and max length (:meth:`StoreIdentity.key`), ``text_hash`` the text."""
    return hashlib.sha256(f"{namespace}\0{text_hash}".encode()).digest()


class VectorCache:
    """fp16 vectors by :func:`cache_key`; ``get`` and ``put`` never raise for a
    cache that went bad (it is set aside and the run goes on without it)."""

    def __init__(self, path: Path | None = None, max_bytes: int = MAX_BYTES) -> None:
        self.path = path or config.home() / "search" / CACHE_FILE
        self.max_bytes = max_bytes
        self._db: sqlite3.Connection | None = None
        self.hits = 0
        self.misses = 0

    def _connect(self) -> sqlite3.Connection | None:
        if self._db is not None:
            return self._db
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = self._open()
        except sqlite3.DatabaseError:
            self._set_aside()
            try:
                self._db = self._open()
            except sqlite3.Error:
                return None
        except (OSError, sqlite3.Error):
            return None
        return self._db

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=10.0, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
            db.execute("SELECT key FROM vectors LIMIT 1").fetchone()
        except sqlite3.Error:
            db.close()
            raise
        return db

    def _set_aside(self) -> None:
        """Move an unreadable cache file away (kept for a post-mortem, not reused)."""
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                Path(f"{self.path}{suffix}").replace(Path(f"{self.path}.bad{suffix}"))

    def get(self, keys: Sequence[bytes], dimension: int) -> dict[bytes, np.ndarray]:
        """The cached vectors (float16, ``dimension`` long) among ``keys``."""
        db = self._connect()
        found: dict[bytes, np.ndarray] = {}
        if db is None or not keys:
            self.misses += len(keys)
            return found
        try:
            for start in range(0, len(keys), _BATCH):
                part = list(keys[start : start + _BATCH])
                marks = ",".join("?" * len(part))
                sql = f"SELECT key, vector FROM vectors WHERE key IN ({marks})"
                for key, blob in db.execute(sql, part):
                    vector = np.frombuffer(blob, np.float16)
                    if vector.shape == (dimension,) and np.isfinite(vector).all():
                        found[bytes(key)] = vector
            if found:
                now = time.time_ns()
                db.executemany(
                    "UPDATE vectors SET used = ? WHERE key = ?", [(now, key) for key in found]
                )
        except sqlite3.DatabaseError:
            self._set_aside()
        self.hits += len(found)
        self.misses += len(keys) - len(found)
        return found

    def put(self, items: Iterable[tuple[bytes, np.ndarray]]) -> None:
        """Store vectors (as float16), then trim the cache to its cap."""
        db = self._connect()
        if db is None:
            return
        now = time.time_ns()
        rows = [(key, np.asarray(vector, np.float16).tobytes(), now) for key, vector in items]
        if not rows:
            return
        try:
            with _transaction(db):
                db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)", rows)
            self._trim(db, len(rows[0][1]))
        except sqlite3.DatabaseError:
            self._set_aside()

    def _trim(self, db: sqlite3.Connection, row_bytes: int) -> None:
        limit = max(self.max_bytes // (row_bytes + 64), 1)
        (count,) = db.execute("SELECT count(*) FROM vectors").fetchone()
        if count > limit:
            with _transaction(db):
                db.execute(
                    "DELETE FROM vectors WHERE key IN "
                    "(SELECT key FROM vectors ORDER BY used LIMIT ?)",
                    (count - limit,),
                )

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
