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

The class is made of parts, each in a module of its own: :mod:`~anekit.search.store_schema`
(where the store lives, its tables), :mod:`~anekit.search.store_records` (the records it takes
and gives), :mod:`~anekit.search.store_damage` (what a SQLite error means),
:mod:`~anekit.search.store_connection` (opening, migrating, meta values, transactions),
:mod:`~anekit.search.store_writes` (files, chunks and vectors in),
:mod:`~anekit.search.store_queries` (them out) and :mod:`~anekit.search.store_keyword`
(keyword search and filters).
"""

from __future__ import annotations

from anekit.search.store_connection import BUSY_TIMEOUT_S as BUSY_TIMEOUT_S
from anekit.search.store_damage import damaged as damaged
from anekit.search.store_damage import is_damage as is_damage
from anekit.search.store_keyword import FTS_WEIGHTS as FTS_WEIGHTS
from anekit.search.store_keyword import MATCH_BUDGET as MATCH_BUDGET
from anekit.search.store_keyword import StoreKeyword
from anekit.search.store_records import (
    CHUNK_KINDS,
    ChunkRecord,
    FileRecord,
    StoredChunk,
    StoreIdentity,
)
from anekit.search.store_schema import DB_FILE, SCHEMA_VERSION, STORE_DIR, store_dir
from anekit.search.store_writes import StoreWrites

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


class Store(StoreKeyword, StoreWrites):
    """The SQLite store in ``directory`` (the ``.anekit`` directory of an indexed root).

    Opens (or, with ``create``, makes) ``store.db`` in WAL mode with ``synchronous=NORMAL``
    (a committed write survives a killed process; a power cut may lose the last ones but never
    corrupts), foreign keys and a busy timeout. Raises :class:`SearchError` for a missing store
    (``create=False``), a file that is not a store, or a store of a newer schema.
    """
