"""The code search store: one SQLite database, the single source of truth.

The store lives in ``.anekit/`` at the indexed root (:func:`store_dir`) as ``store.db`` in WAL
mode. It holds the files, their chunks, one fp16 vector per chunk and an FTS5 index over each
chunk's text, path and symbol (with the code-aware terms of :mod:`anekit.search.terms`), all
made by one :class:`StoreIdentity`: a store made by another is emptied and re-embedded
(:meth:`Store.ensure_identity`), never mixed.

Writes happen in :meth:`Store.write` transactions. :meth:`Store.put_file` replaces a file's
row, chunks, FTS rows and the vectors known so far in the transaction it runs in, so a
``kill -9`` at any point leaves each file wholly old or wholly new; readers (other
connections, other processes) see the last committed state. A chunk may wait for its vector
(keyword search finds it at once): :meth:`Store.unembedded` lists those, and
:meth:`Store.put_vectors` fills them in. Every committed write that
changes chunks or vectors bumps :attr:`Store.generation`, which stamps whatever is derived
from the store (:mod:`anekit.search.vectors`).

A :class:`Store` wraps one connection: use it from one thread at a time.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager, suppress
from dataclasses import asdict, astuple, dataclass
from itertools import islice
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from anekit.errors import DamagedStoreError, SearchError
from anekit.search.globs import compile_filter
from anekit.search.languages import LANGUAGES
from anekit.search.terms import (
    FTS_TOKENIZER,
    TERMS_VERSION,
    index_terms,
    item_expression,
    query_items,
)

log = logging.getLogger(__name__)

__all__ = [
    "CHUNK_KINDS",
    "DB_FILE",
    "SCHEMA_VERSION",
    "STORE_DIR",
    "ChunkRecord",
    "FileRecord",
    "Store",
    "StoreIdentity",
    "StoredChunk",
    "store_dir",
]

#: 2: vectors.variant (a vector made by a lane of another variant than the store's).
SCHEMA_VERSION = 2
STORE_DIR = ".anekit"
DB_FILE = "store.db"
CHUNK_KINDS = ("code", "docs", "tests", "config")

BUSY_TIMEOUT_S = 5.0
"""How long a write waits for another writer before :class:`SearchError` says it is locked."""

# bm25 column weights, in the FTS column order (text, path, symbol): a word in a chunk's
# symbol name says more than one in its file's path, which says more than one in its body.
FTS_WEIGHTS = (1.0, 2.0, 4.0)

MATCH_BUDGET = 2_000
"""Keyword search ranks at most about this many matching chunks (BM25 costs ~1 us a chunk, a
lookup of the chunk's size each; 5,000 took 2.5 ms of a query at 10k chunks, 2,000 1.1 ms, and
semble's development repositories ranked the same, 0.8576 -> 0.8580; 1,000 lost 0.004). In a
store of more chunks it keeps a query's words rarest first while the chunks they match fit, and
drops words that match over half the chunks (FTS5's BM25 gives those no weight) when a rarer one
is left; the rarest word is always kept. A smaller store ranks with every word."""

# keyword_search passes an `allowed` set this small to SQLite (rowid IN ...); a larger one is
# checked row by row while reading matches best first, which stops after k.
_IN_LIST_MAX = 4096

# The few stand-in vectors, found without scanning every vector: each update looks for
# them (a scan took 31 ms at 100k chunks).
_STAND_IN_INDEX = "CREATE INDEX vectors_stand_ins ON vectors(variant) WHERE variant IS NOT NULL"

_SCHEMA = f"""
CREATE TABLE meta (key TEXT PRIMARY KEY, value NOT NULL) WITHOUT ROWID;
CREATE TABLE files (
    id INTEGER PRIMARY KEY,
    relpath TEXT NOT NULL UNIQUE,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    language TEXT,
    indexed_at REAL NOT NULL
);
CREATE TABLE chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: a stale id finds nothing
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    symbol TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN {CHUNK_KINDS!r}),
    text TEXT NOT NULL,
    text_hash TEXT NOT NULL
);
CREATE INDEX chunks_file ON chunks(file_id);
CREATE INDEX chunks_text_hash ON chunks(text_hash);
CREATE TABLE vectors (
    chunk_id INTEGER PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    vector BLOB NOT NULL,  -- fp16, little-endian, the store identity's dimension
    -- NULL: made with the store identity's variant, else the variant of the lane that
    -- stood in for it (a fallback), replaced by the next update that can
    variant TEXT
);
{_STAND_IN_INDEX};
-- Contentless: the text is in `chunks`. Rows are removed with the 'delete' command and the
-- values they were indexed with (_fts_values), which terms.TERMS_VERSION keeps reproducible.
CREATE VIRTUAL TABLE chunks_fts USING fts5(
    text, path, symbol, content='', tokenize='{FTS_TOKENIZER}'
);
"""


def store_dir(root: Path) -> Path:
    """The store directory of an indexed root: ``root/.anekit``."""
    return Path(root) / STORE_DIR


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


def _file_stem(relpath: str) -> str:
    """A file's name before its first dot, lower-cased (``FlatMap.scala``: ``flatmap``)."""
    return relpath.rsplit("/", 1)[-1].split(".")[0].lower()


def _fts_values(text: str, relpath: str, symbol: str) -> tuple[str, ...]:
    """What the FTS index holds for a chunk: each column plus its code-aware terms."""
    return tuple(f"{value}\n{index_terms(value)}" for value in (text, relpath, symbol))


def _split_filters(values: Sequence[str], what: str) -> tuple[list[str], list[str]]:
    """(includes, excludes) of filter values; a leading ``!`` excludes."""
    includes: list[str] = []
    excludes: list[str] = []
    for raw in values:
        negated = raw.strip().startswith("!")
        value = raw.strip().removeprefix("!").strip()
        if not value:
            raise SearchError(f"empty {what} filter {raw!r}")
        (excludes if negated else includes).append(value)
    return includes, excludes


_EXTENSION = re.compile(r"\.?[A-Za-z0-9_+~-]+(?:\.[A-Za-z0-9_+~-]+)*")


def _ext(value: str) -> str:
    """An extension filter (``py``, ``.ts``, ``d.ts``) as ``.ext`` in lower case."""
    if not _EXTENSION.fullmatch(value):
        raise SearchError(
            f"{value!r} is not a file extension (py, .ts, d.ts); use a path glob for patterns"
        )
    return "." + value.lower().lstrip(".")


# SQLite's primary result codes for a file that is damaged or not a database at all.
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26
_SQLITE_IOERR = 10
_F = TypeVar("_F", bound=Callable[..., Any])


def is_damage(error: sqlite3.Error) -> bool:
    """Whether SQLite reported ``error`` for a corrupt file (not a lock, an I/O error or a
    mistake in a statement)."""
    code = getattr(error, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)


def damaged(path: Path, error: sqlite3.Error) -> DamagedStoreError:
    return DamagedStoreError(
        f"{path}: the index is damaged ({error}): run `anekit index`, which rebuilds it "
        "from the files (their vectors come back from the machine-wide cache)"
    )


def _is_io_error(error: sqlite3.Error) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    return code is not None and code & 0xFF == _SQLITE_IOERR


def _damage_checked(method: _F) -> _F:
    """``method`` with a damaged database reported as :class:`DamagedStoreError`, and an
    I/O error outside a transaction answered by opening the store again and trying once
    more: a connection whose WAL file was deleted, or whose database was replaced, under
    it (nothing is lost: the other writers made a WAL of their own) fails that way."""

    @functools.wraps(method)
    def checked(self: Store, *args: Any, **kwargs: Any) -> Any:
        if self._broken and not self._opening:  # the last try to open it again failed
            self._reopen()
        try:
            try:
                return method(self, *args, **kwargs)
            except sqlite3.OperationalError as error:
                if not _is_io_error(error) or self._in_write or self._in_read or self._opening:
                    raise
                log.info("%s: %s: opening the store again", self.path, error)
                self._reopen()
                return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as error:
            if is_damage(error):
                raise damaged(self.path, error) from error
            raise

    return checked  # type: ignore[return-value]


def _write_new(path: Path, text: str) -> None:
    """Write ``path`` unless something (a file, a link) is there already."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0))
    except FileExistsError:
        return
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)


class Store:
    """The SQLite store in ``directory`` (the ``.anekit`` directory of an indexed root).

    Opens (or, with ``create``, makes) ``store.db`` in WAL mode with ``synchronous=NORMAL``
    (a committed write survives a killed process; a power cut may lose the last ones but never
    corrupts), foreign keys and a busy timeout. Raises :class:`SearchError` for a missing store
    (``create=False``), a file that is not a store, or a store of a newer schema.
    """

    def __init__(
        self, directory: Path, *, create: bool = True, timeout: float = BUSY_TIMEOUT_S
    ) -> None:
        self.directory = Path(directory)
        self.path = self.directory / DB_FILE
        self._in_write = False
        self._in_read = False
        #: The meta values read in the current read transaction (its snapshot's: unchanged).
        self._snapshot: dict[str, Any] = {}
        self._changed = False
        # Caches valid for one generation (_check_caches): matching-chunk counts of query items
        # (keyword_search, the key () holds the chunk count) and filter_ids results.
        self._cache_generation = -1
        self._counts: dict[tuple[str, ...], int] = {}
        self._filtered: dict[tuple[tuple[str, ...], ...], frozenset[int]] = {}
        self._heads: dict[str, str | None] = {}  # first_chunks, None: no such file
        self._stems: dict[str, list[str]] | None = None  # files_named: relpaths by stem
        for planted in (self.path, *(self.path.with_name(DB_FILE + e) for e in ("-wal", "-shm"))):
            if planted.is_symlink():  # a repository may ship one: never written through
                raise SearchError(f"{planted}: a symbolic link, not a search store; remove it")
        if create:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
                _write_new(
                    self.directory / ".gitignore",
                    "# anekit search store: derived, not for version control\n*\n",
                )
            except OSError as exc:
                raise SearchError(
                    f"{self.directory}: cannot create the search store ({exc.strerror}); make "
                    "it writable, or keep the store elsewhere with --store DIR (or ANEKIT_STORE)"
                ) from exc
        elif not self.path.is_file():
            raise SearchError(f"{self.directory}: no search store here; index the root first")
        self._timeout = timeout
        self._opening = self._broken = False
        self._connect(create)

    def _connect(self, create: bool) -> None:
        try:
            # One thread at a time, not only the one that opened it: a server's reader pool
            # closes its threads' connections from the thread that stops it.
            self._conn = sqlite3.connect(
                self.path, isolation_level=None, timeout=self._timeout, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise SearchError(f"{self.path}: cannot open the search store: {exc}") from exc
        self._opening = True  # no retry inside: an I/O error here is the answer
        try:
            self._setup(create, self._timeout)
            st = os.stat(self.path)
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise self._open_error(exc) from exc
        except BaseException:
            self._conn.close()
            raise
        finally:
            self._opening = False
        self._file = (st.st_dev, st.st_ino)

    def _open_error(self, exc: sqlite3.DatabaseError) -> SearchError:
        """What an error while opening the store means, for the user."""
        if is_damage(exc):
            return damaged(self.path, exc)
        if _is_io_error(exc):
            return SearchError(
                f"{self.path}: cannot open the search store ({exc}): another process "
                "(anekit serve, mcp or watch) may hold it while its -wal file was deleted "
                "under it; stop that process and try again (nothing needs deleting: it "
                "writes its changes back as it exits)"
            )
        return SearchError(f"{self.path}: cannot read the search store ({exc})")

    def replaced(self) -> bool:
        """Whether ``store.db`` is no longer the file this connection opened (deleted, or
        made anew by another process): a reader should open the store again."""
        try:
            st = os.stat(self.path)
        except OSError:
            return True
        return (st.st_dev, st.st_ino) != self._file

    def _reopen(self) -> None:
        """A new connection to the store (the old one's files were taken from under it)."""
        with suppress(sqlite3.Error):
            self._conn.close()
        self._cache_generation = -1
        self._broken = True  # until a connection is made
        self._connect(create=False)
        self._broken = False

    def _setup(self, create: bool, timeout: float) -> None:
        conn = self._conn
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise self._open_error(exc) from exc
        if str(mode).lower() != "wal":
            raise SearchError(f"{self.path}: cannot switch the store to WAL mode ({mode})")
        if version > SCHEMA_VERSION:
            raise SearchError(
                f"{self.path}: made by a newer anekit (store schema {version}, this anekit "
                f"reads {SCHEMA_VERSION}); upgrade anekit or delete {self.directory}"
            )
        if version == 0 and not create:
            raise SearchError(f"{self.directory}: no search store here; index the root first")
        if version < SCHEMA_VERSION:
            with self.write():
                now = conn.execute("PRAGMA user_version").fetchone()[0]
                if now == version == 0:  # not made meanwhile
                    self._create_schema()
                elif now == version == 1:  # not migrated meanwhile
                    conn.execute("ALTER TABLE vectors ADD COLUMN variant TEXT")
                    conn.execute(_STAND_IN_INDEX)
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        if self._meta("terms_version") != TERMS_VERSION:
            with self.write():
                if self._meta("terms_version") != TERMS_VERSION:
                    self._rebuild_fts()

    def _create_schema(self) -> None:
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                self._conn.execute(statement)
        self._set_meta("store_id", uuid.uuid4().hex)
        self._set_meta("generation", 0)
        self._set_meta("terms_version", TERMS_VERSION)
        self._set_meta("created", time.time())
        self._conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @_damage_checked
    def _meta(self, key: str) -> Any:
        if self._in_read and key in self._snapshot:  # one read transaction: one state
            return self._snapshot[key]
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        value = None if row is None else row[0]
        if self._in_read:
            self._snapshot[key] = value
        return value

    def _set_meta(self, key: str, value: Any) -> None:
        self._snapshot.pop(key, None)
        self._conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    @property
    def store_id(self) -> str:
        """A random id made with the store: tells a recreated store from the old one."""
        return str(self._meta("store_id"))

    @property
    def generation(self) -> int:
        """Bumped by every committed write that changed chunks or vectors."""
        return int(self._meta("generation"))

    @property
    def identity(self) -> StoreIdentity | None:
        """What made the stored vectors; ``None`` for a store that never had any."""
        raw = self._meta("identity")
        return None if raw is None else StoreIdentity(**json.loads(raw))

    @property
    def root(self) -> Path | None:
        """The folder the store was last indexed from (None: never recorded)."""
        raw = self._meta("root")
        return None if raw is None else Path(raw)

    def set_root(self, root: Path) -> None:
        """Record ``root`` as the store's (readers given only the store find it)."""
        if self.root != root:
            with self.write():
                self._set_meta("root", str(root))

    @contextmanager
    def write(self) -> Iterator[None]:
        """One write transaction (``BEGIN IMMEDIATE``): all or nothing, committed on leaving
        the block, rolled back on an exception. The indexer puts many files in one."""
        if self._in_write:
            raise SearchError("Store.write() blocks do not nest")
        if self._in_read:
            raise SearchError("Store.write() inside Store.read(): finish the read first")
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise SearchError(f"{self.path}: locked by another writer ({exc})") from exc
            if "readonly" in str(exc):
                raise SearchError(
                    f"{self.path}: read-only: cannot write the search store; make it "
                    "writable or give another store folder (--store DIR)"
                ) from exc
            raise SearchError(f"{self.path}: cannot write the search store: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            raise (damaged(self.path, exc) if is_damage(exc) else exc) from exc
        self._in_write = True  # _changed is False outside write blocks (reset below)
        try:
            yield
            if self._changed:
                self._set_meta("generation", self.generation + 1)
                self._set_meta("last_write", time.time())
            self._conn.execute("COMMIT")
        except BaseException as exc:
            if self._conn.in_transaction:
                with suppress(sqlite3.Error):
                    self._conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.DatabaseError) and is_damage(exc):
                raise damaged(self.path, exc) from exc
            raise
        finally:
            self._in_write = False
            self._changed = False

    @contextmanager
    def read(self) -> Iterator[None]:
        """A read transaction: every read in the block sees one committed state (a snapshot),
        whatever other connections commit meanwhile. Nests in itself and in :meth:`write`."""
        if self._in_write or self._in_read:
            yield
            return
        self._conn.execute("BEGIN")
        self._in_read = True
        try:
            yield
        finally:
            self._in_read = False
            self._snapshot.clear()
            if self._conn.in_transaction:
                try:
                    self._conn.execute("COMMIT")
                except sqlite3.DatabaseError as exc:
                    raise (damaged(self.path, exc) if is_damage(exc) else exc) from exc

    def _require_write(self, what: str) -> None:
        if not self._in_write:
            raise SearchError(f"Store.{what}() must run inside a Store.write() block")

    @_damage_checked
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
            self._changed = True
        self._set_meta("identity", identity.key())
        return reset

    @_damage_checked
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
                (chunk_id, *_fts_values(chunk.text, file.relpath, chunk.symbol)),
            )
        self._changed = True

    @_damage_checked
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

    @_damage_checked
    def unembedded(self) -> list[tuple[StoredChunk, str]]:
        """The chunks still waiting for a vector, with their text hashes, by path and line."""
        with self.read():
            rows = self._conn.execute(
                "SELECT c.id, f.relpath, c.start_line, c.end_line, c.text, c.symbol, c.kind, "
                "f.language, c.text_hash FROM chunks c JOIN files f ON f.id = c.file_id "
                "WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.chunk_id = c.id) "
                "ORDER BY f.relpath, c.start_line, c.id"
            ).fetchall()
        return [(StoredChunk(*row[:-1]), row[-1]) for row in rows]

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
            [(chunk_id, *_fts_values(text, relpath, symbol)) for chunk_id, text, symbol in rows],
        )
        self._conn.execute(
            "DELETE FROM vectors WHERE chunk_id IN (SELECT id FROM chunks WHERE file_id = ?)",
            (file_id,),
        )
        self._conn.execute("DELETE FROM chunks WHERE file_id = ?", (file_id,))
        self._changed = True

    @_damage_checked
    def touch_file(self, relpath: str, size: int, mtime_ns: int) -> None:
        """Record a new size and mtime for a file whose content did not change.
        Raises ``KeyError`` for a file not in the store."""
        self._require_write("touch_file")
        cursor = self._conn.execute(
            "UPDATE files SET size = ?, mtime_ns = ? WHERE relpath = ?", (size, mtime_ns, relpath)
        )
        if cursor.rowcount == 0:
            raise KeyError(relpath)

    @_damage_checked
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

    def _rebuild_fts(self) -> None:
        """Index every chunk again with the current terms (after terms.TERMS_VERSION moved)."""
        conn = self._conn
        conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('delete-all')")
        rows = conn.execute(
            "SELECT c.id, c.text, f.relpath, c.symbol "
            "FROM chunks c JOIN files f ON f.id = c.file_id"
        )
        conn.executemany(
            "INSERT INTO chunks_fts(rowid, text, path, symbol) VALUES (?, ?, ?, ?)",
            [(i, *_fts_values(text, path, symbol)) for i, text, path, symbol in rows.fetchall()],
        )
        self._set_meta("terms_version", TERMS_VERSION)

    @_damage_checked
    def files(self) -> dict[str, FileRecord]:
        """Every stored file by its relative path."""
        rows = self._conn.execute(
            "SELECT relpath, size, mtime_ns, sha256, language FROM files ORDER BY relpath"
        )
        return {row[0]: FileRecord(*row) for row in rows}

    @_damage_checked
    def chunk_count(self) -> int:
        """How many chunks the store holds."""
        return int(self._conn.execute("SELECT count(*) FROM chunks").fetchone()[0])

    @_damage_checked
    def embedded_counts(self) -> tuple[int, int]:
        """(chunks with a vector, chunks): while an update embeds, the first lags."""
        with self.read():
            embedded = self._conn.execute("SELECT count(*) FROM vectors").fetchone()[0]
            return int(embedded), self.chunk_count()

    @_damage_checked
    def stand_in_files(self) -> list[str]:
        """Files holding a vector made by a lane of another variant than the store's (a
        fallback stood in for the store's lane): the next update embeds them again."""
        with self.read():
            rows = self._conn.execute(
                "SELECT DISTINCT f.relpath FROM vectors v JOIN chunks c ON c.id = v.chunk_id "
                "JOIN files f ON f.id = c.file_id WHERE v.variant IS NOT NULL ORDER BY f.relpath"
            )
            return [relpath for (relpath,) in rows]

    @_damage_checked
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

    @_damage_checked
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

    @_damage_checked
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

    @_damage_checked
    def keyword_search(
        self, query: str, k: int, allowed: AbstractSet[int] | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` best chunks for ``query`` by BM25 (:data:`FTS_WEIGHTS`, :data:`MATCH_BUDGET`)
        as ``(chunk id, score)``, higher better, among the ``allowed`` chunks if given."""
        if k <= 0 or (allowed is not None and not allowed):
            return []
        with self.read():
            items = self._keyword_items(query_items(query))
            if not items:
                return []
            expression = " OR ".join(item_expression(parts) for parts in items)
            weights = ", ".join(str(w) for w in FTS_WEIGHTS)
            select = f"SELECT rowid, bm25(chunks_fts, {weights}) AS score FROM chunks_fts "
            rows: Iterable[tuple[int, float]]
            if allowed is None:
                rows = self._conn.execute(
                    select + "WHERE chunks_fts MATCH ? ORDER BY score, rowid LIMIT ?",
                    (expression, k),
                )
            elif len(allowed) <= _IN_LIST_MAX:
                # "+rowid": a filter on the matches; a bare rowid IN makes FTS5 run the query
                # once per allowed id.
                rows = self._conn.execute(
                    select + "WHERE chunks_fts MATCH ? AND +rowid IN "
                    "(SELECT value FROM json_each(?)) ORDER BY score, rowid LIMIT ?",
                    (expression, json.dumps([int(i) for i in allowed]), k),
                )
            else:
                everything = self._conn.execute(
                    select + "WHERE chunks_fts MATCH ? ORDER BY score, rowid", (expression,)
                )
                rows = islice((row for row in everything if row[0] in allowed), k)
            return [(int(i), -float(s)) for i, s in rows]

    def _check_caches(self) -> None:
        """Empty the per-generation caches when another write has committed since."""
        generation = -1 if self._in_write else self.generation  # uncommitted: no caching
        if generation != self._cache_generation or generation < 0:
            self._counts.clear()
            self._filtered.clear()
            self._heads.clear()
            self._stems = None
            self._cache_generation = generation

    def _keyword_items(self, items: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
        """The query items worth ranking with, in query order (see :data:`MATCH_BUDGET`)."""
        if len(items) <= 1:
            return items
        self._check_caches()
        if len(self._counts) > 8192:
            self._counts.clear()
        counts = self._counts
        if () not in counts:
            counts[()] = self.chunk_count()
        total = counts[()]
        if total <= MATCH_BUDGET:
            return items  # a small store: rank with every word
        for parts in items:
            if parts not in counts:
                counts[parts] = self._conn.execute(
                    "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?",
                    (item_expression(parts),),
                ).fetchone()[0]
        kept: set[tuple[str, ...]] = set()
        ranked = 0
        for parts in sorted((p for p in items if counts[p] > 0), key=counts.__getitem__):
            count = counts[parts]
            if kept and (2 * count > total or ranked + count > MATCH_BUDGET):
                break
            kept.add(parts)
            ranked += count
        return [parts for parts in items if parts in kept]

    @_damage_checked
    def filter_ids(
        self,
        path_globs: Sequence[str] = (),
        exts: Sequence[str] = (),
        langs: Sequence[str] = (),
    ) -> set[int] | None:
        """Ids of the chunks whose file passes the filters, or ``None`` when none is given.

        ``path_globs``: gitignore-style patterns (``src/**/test_*.py``) on the relative path;
        ``exts``: extensions with or without the dot; ``langs``: language names (both ignore
        case). A file passes with an include of each kind given and no ``!`` exclude."""
        if not (path_globs or exts or langs):
            return None
        key = (tuple(path_globs), tuple(exts), tuple(langs))
        with self.read():
            self._check_caches()
            found = self._filtered.get(key)
            if found is None:
                if len(self._filtered) >= 16:
                    self._filtered.clear()
                found = self._filtered[key] = frozenset(self._filter(path_globs, exts, langs))
        return set(found)

    def _filter(
        self, path_globs: Sequence[str], exts: Sequence[str], langs: Sequence[str]
    ) -> list[int]:
        path_in, path_out = _split_filters(path_globs, "path")
        ext_in, ext_out = (tuple(map(_ext, group)) for group in _split_filters(exts, "ext"))
        lang_in, lang_out = ({v.lower() for v in group} for group in _split_filters(langs, "lang"))
        if lang_in | lang_out:
            self._check_languages(lang_in | lang_out)
        globs_in, globs_out = ([compile_filter(g) for g in group] for group in (path_in, path_out))
        file_ids: list[int] = []
        for file_id, relpath, language in self._conn.execute(
            "SELECT id, relpath, language FROM files"
        ):
            lower, lang = relpath.lower(), (language or "").lower()
            if (
                (not globs_in or any(glob.matches(relpath) for glob in globs_in))
                and (not ext_in or lower.endswith(ext_in))
                and (not lang_in or lang in lang_in)
                and not any(glob.matches(relpath) for glob in globs_out)
                and not lower.endswith(ext_out)
                and lang not in lang_out
            ):
                file_ids.append(file_id)
        rows = self._conn.execute(
            "SELECT c.id FROM json_each(?) j JOIN chunks c ON c.file_id = j.value",
            (json.dumps(file_ids),),
        )
        return [row[0] for row in rows]

    @_damage_checked
    def languages(self) -> dict[str, int]:
        """How many stored files each language has (files of no known language left out)."""
        rows = self._conn.execute(
            "SELECT language, count(*) FROM files WHERE language IS NOT NULL "
            "GROUP BY language ORDER BY count(*) DESC, language"
        )
        return dict(rows.fetchall())

    def _check_languages(self, names: AbstractSet[str]) -> None:
        """A :class:`SearchError` listing the languages when one of ``names`` is none."""
        held = self.languages()
        known = {spec.name for spec in LANGUAGES} | set(held)
        unknown = sorted(names - known)
        if unknown:
            here = ", ".join(f"{name} ({count})" for name, count in held.items()) or "none"
            raise SearchError(
                f"unknown language {', '.join(map(repr, unknown))}; the index holds: {here}; "
                f"known: {', '.join(sorted(known))}"
            )

    @_damage_checked
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

    @contextmanager
    def budget(self, seconds: float) -> Iterator[None]:
        """Stop any statement of this connection that runs past ``seconds`` from now with
        a :class:`SearchError` (SQLite's progress handler, every few thousand steps):
        a backstop so that no one request can hold a reader."""
        deadline = time.monotonic() + seconds
        self._conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        try:
            yield
        except sqlite3.OperationalError as exc:
            if "interrupted" in str(exc):
                raise SearchError(
                    f"the search ran past its {seconds:g} s budget; narrow it (fewer or "
                    "rarer words, a --path filter)"
                ) from exc
            raise
        finally:
            self._conn.set_progress_handler(None, 0)

    def check(self) -> str:
        """``"ok"``, or what SQLite's ``PRAGMA quick_check`` finds wrong (the first
        problems, or the error it stops with): about 0.5 s a 100k-chunk store."""
        try:
            rows = self._conn.execute("PRAGMA quick_check(5)").fetchall()
        except sqlite3.DatabaseError as exc:
            return str(exc)
        return "; ".join(str(row[0]) for row in rows) or "ok"

    def integrity_check(self) -> str:
        """SQLite's ``PRAGMA integrity_check`` result (``"ok"``) plus the FTS5 index's own."""
        result = str(self._conn.execute("PRAGMA integrity_check").fetchone()[0])
        try:
            self._conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('integrity-check')")
        except sqlite3.DatabaseError as exc:
            return f"fts: {exc}" if result == "ok" else f"{result}; fts: {exc}"
        return result

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
