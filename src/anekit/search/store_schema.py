"""The code search store's on-disk layout: where it lives, its schema version, the SQL that
makes its tables, and what its FTS5 index holds for a chunk (:mod:`anekit.search.store`)."""

from __future__ import annotations

from pathlib import Path

from anekit.search.store_records import CHUNK_KINDS
from anekit.search.terms import FTS_TOKENIZER, index_terms

__all__ = [
    "DB_FILE",
    "SCHEMA",
    "SCHEMA_VERSION",
    "STAND_IN_INDEX",
    "STORE_DIR",
    "VECTOR_LOG",
    "fts_values",
    "store_dir",
]

#: 2: vectors.variant (a vector made by a lane of another variant than the store's).
#: 3: vector_log (which chunks' vectors changed, for the approximate index to catch up).
SCHEMA_VERSION = 3
STORE_DIR = ".anekit"
DB_FILE = "store.db"

# The few stand-in vectors, found without scanning every vector: each update looks for
# them (a scan took 31 ms at 100k chunks).
STAND_IN_INDEX = "CREATE INDEX vectors_stand_ins ON vectors(variant) WHERE variant IS NOT NULL"

# Every insert, update and delete of a vector appends its chunk id, so that the approximate
# vector index (anekit.search.ann), built at one seq, catches up with the changes since
# without reading every vector; the writer that folds them into the index deletes them.
VECTOR_LOG = """
CREATE TABLE vector_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, chunk_id INTEGER NOT NULL);
CREATE TRIGGER vectors_log_insert AFTER INSERT ON vectors
    BEGIN INSERT INTO vector_log(chunk_id) VALUES (new.chunk_id); END;
CREATE TRIGGER vectors_log_update AFTER UPDATE OF vector ON vectors
    BEGIN INSERT INTO vector_log(chunk_id) VALUES (new.chunk_id); END;
CREATE TRIGGER vectors_log_delete AFTER DELETE ON vectors
    BEGIN INSERT INTO vector_log(chunk_id) VALUES (old.chunk_id); END;
"""

SCHEMA = f"""
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
{STAND_IN_INDEX};
{VECTOR_LOG}
-- Contentless: the text is in `chunks`. Rows are removed with the 'delete' command and the
-- values they were indexed with (fts_values), which terms.TERMS_VERSION keeps reproducible.
CREATE VIRTUAL TABLE chunks_fts USING fts5(
    text, path, symbol, content='', tokenize='{FTS_TOKENIZER}'
);
"""


def store_dir(root: Path) -> Path:
    """The store directory of an indexed root: ``root/.anekit``."""
    return Path(root) / STORE_DIR


def fts_values(text: str, relpath: str, symbol: str) -> tuple[str, ...]:
    """What the FTS index holds for a chunk: each column plus its code-aware terms."""
    return tuple(f"{value}\n{index_terms(value)}" for value in (text, relpath, symbol))
