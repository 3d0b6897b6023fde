"""The code search store's connection (:class:`StoreConnection`, the base of
:class:`~anekit.search.store.Store`): opening ``store.db`` with its pragmas, making and
migrating its schema, its meta values, the :meth:`~StoreConnection.write` and
:meth:`~StoreConnection.read` transactions, a statement time budget and integrity checks."""

from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Self

from anekit.errors import SearchError
from anekit.search.store_damage import damage_checked, damaged, is_damage, is_io_error
from anekit.search.store_records import StoreIdentity
from anekit.search.store_schema import (
    DB_FILE,
    SCHEMA,
    SCHEMA_VERSION,
    STAND_IN_INDEX,
    VECTOR_LOG,
    fts_values,
)
from anekit.search.terms import TERMS_VERSION

__all__ = ["BUSY_TIMEOUT_S", "PAGE_CACHE_KIB", "StoreConnection"]

BUSY_TIMEOUT_S = 5.0
"""How long a write waits for another writer before :class:`SearchError` says it is locked."""

PAGE_CACHE_KIB = 32_768
"""SQLite's page cache of the store's connection, at most (its default: 2,000 KiB; the second
connection keeps the default). A store's pages fill it only as far as they are read, so a
small store's connection holds no more than the store; a large one's fills it in a few
hundred searches, per reader (a server's READERS threads: 4 x 32 MB). At 1M chunks (1.8
GB) the keyword half reads FTS5's posting lists and each match's size row: hybrid p50 /
p95 12.4 / 26.3 ms with 2 MB, 11.6 / 23.6 with 32 MB, 11.3 / 23.8 with 64 MB (2 cores,
one process, blocks alternated; 2026-12-07)."""


def _statements(script: str) -> list[str]:
    """The SQL statements of ``script``, one by one (a trigger's body holds semicolons;
    ``executescript`` would commit the transaction it runs in)."""
    found: list[str] = []
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                found.append(pending.strip())
            pending = ""
    return found


def _write_new(path: Path, text: str) -> None:
    """Write ``path`` unless something (a file, a link) is there already."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0))
    except FileExistsError:
        return
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)


class StoreConnection:
    """One connection to the store in ``directory`` and the state the parts of
    :class:`~anekit.search.store.Store` share (its docstring says what opening does)."""

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
        #: A second connection, for reads run on another thread beside this one's (opened
        #: when first needed: :meth:`_side_connection`), and the deadline of the
        #: :meth:`budget` in force, which its statements keep too.
        self._side: sqlite3.Connection | None = None
        self._deadline: float | None = None
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
        if is_io_error(exc):
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

    def _side_connection(self) -> sqlite3.Connection:
        """The second connection, opened on first use: a reader of the same file with the
        same busy timeout, used by one other thread at a time while this connection's
        thread waits for it (:meth:`StoreKeyword.keyword_search`, which checks that its
        read saw the same state as this connection's)."""
        if self._side is None:
            try:
                side = sqlite3.connect(
                    self.path, isolation_level=None, timeout=self._timeout, check_same_thread=False
                )
                side.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
            except sqlite3.DatabaseError as exc:
                raise self._open_error(exc) from exc
            self._side = side
        return self._side

    def _close_side(self) -> None:
        side, self._side = self._side, None
        if side is not None:
            with suppress(sqlite3.Error):
                side.close()

    def _reopen(self) -> None:
        """A new connection to the store (the old one's files were taken from under it)."""
        self._close_side()
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
            conn.execute(f"PRAGMA cache_size = {-PAGE_CACHE_KIB}")
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
                elif now == version:  # not migrated meanwhile
                    if version < 2:
                        conn.execute("ALTER TABLE vectors ADD COLUMN variant TEXT")
                        conn.execute(STAND_IN_INDEX)
                    if version < 3:
                        for statement in _statements(VECTOR_LOG):
                            conn.execute(statement)
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        if self._meta("terms_version") != TERMS_VERSION:
            with self.write():
                if self._meta("terms_version") != TERMS_VERSION:
                    self._rebuild_fts()

    def _create_schema(self) -> None:
        for statement in _statements(SCHEMA):
            self._conn.execute(statement)
        self._set_meta("store_id", uuid.uuid4().hex)
        self._set_meta("generation", 0)
        self._set_meta("terms_version", TERMS_VERSION)
        self._set_meta("created", time.time())
        self._conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self) -> None:
        """Close the connections (idempotent)."""
        self._close_side()
        self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @damage_checked
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
    def embedded_below(self) -> int:
        """Every chunk of a smaller id has its vector (0: not known)."""
        raw = self._meta("embedded_below")
        return 0 if raw is None else int(raw)

    @property
    def ann_seq(self) -> int:
        """The vector log seq the approximate index was last built or caught up to by a
        writer (the log holds nothing at or before it); 0: never."""
        raw = self._meta("ann_seq")
        return 0 if raw is None else int(raw)

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

    @property
    def model_folder(self) -> Path | None:
        """The model folder the store was indexed with when one was named by its path
        (``--model PATH``; None: a model known by name, or never recorded)."""
        raw = self._meta("model_folder")
        return None if raw is None else Path(raw)

    def set_model_folder(self, folder: Path | None) -> None:
        """Record the model folder named by path that the vectors are made with (or None)."""
        value = None if folder is None else str(folder)
        if self._meta("model_folder") == value:
            return
        with self.write():
            if value is None:
                self._snapshot.pop("model_folder", None)
                self._conn.execute("DELETE FROM meta WHERE key = 'model_folder'")
            else:
                self._set_meta("model_folder", value)

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
            [(i, *fts_values(text, path, symbol)) for i, text, path, symbol in rows.fetchall()],
        )
        self._set_meta("terms_version", TERMS_VERSION)

    def _check_caches(self) -> None:
        """Empty the per-generation caches when another write has committed since."""
        generation = -1 if self._in_write else self.generation  # uncommitted: no caching
        if generation != self._cache_generation or generation < 0:
            self._counts.clear()
            self._filtered.clear()
            self._heads.clear()
            self._stems = None
            self._cache_generation = generation

    @contextmanager
    def budget(self, seconds: float) -> Iterator[None]:
        """Stop any statement of this connection that runs past ``seconds`` from now with
        a :class:`SearchError` (SQLite's progress handler, every few thousand steps):
        a backstop so that no one request can hold a reader."""
        deadline = time.monotonic() + seconds
        self._conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        self._deadline = deadline
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
            self._deadline = None
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
