"""The SQLite store: schema, identity, atomic file replacement, keyword search, filters and
what survives a kill -9 or a concurrent reader."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anekit.errors import DamagedStoreError, SearchError
from anekit.search import store_connection, store_keyword, store_schema
from anekit.search.store import (
    DB_FILE,
    SCHEMA_VERSION,
    STORE_DIR,
    ChunkRecord,
    FileRecord,
    Store,
    StoreIdentity,
    store_dir,
)
from anekit.search.terms import index_terms

DIM = 8
IDENTITY = StoreIdentity(
    model="mini", variant="int8", chunker="ts-1", max_length=256, dimension=DIM
)


def chunk(text: str, symbol: str = "", kind: str = "code", line: int = 1) -> ChunkRecord:
    digest = hashlib.sha256(text.encode()).hexdigest()
    return ChunkRecord(line, line + text.count("\n"), text, symbol, kind, digest)


def record(relpath: str, language: str | None = "python", size: int = 100) -> FileRecord:
    return FileRecord(relpath, size, 1_000, "0" * 64, language)


def vectors(n: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    unit: np.ndarray = v / np.linalg.norm(v, axis=1, keepdims=True)
    return unit


def put(store: Store, relpath: str, texts: list[str]) -> None:
    with store.write():
        store.put_file(
            record(relpath),
            [chunk(t, line=10 * i + 1) for i, t in enumerate(texts)],
            vectors(len(texts), seed=len(relpath)),
        )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(store_dir(tmp_path)) as s:
        s.ensure_identity(IDENTITY)
        yield s


def raw(store: Store) -> sqlite3.Connection:
    """A second, independent connection to the store's database."""
    return sqlite3.connect(store.directory / DB_FILE)


def orphan_counts(conn: sqlite3.Connection) -> tuple[int, int]:
    """(chunks without a vector, vectors without a chunk)."""
    no_vector = conn.execute(
        "SELECT count(*) FROM chunks c LEFT JOIN vectors v ON v.chunk_id = c.id "
        "WHERE v.chunk_id IS NULL"
    ).fetchone()[0]
    no_chunk = conn.execute(
        "SELECT count(*) FROM vectors v LEFT JOIN chunks c ON c.id = v.chunk_id WHERE c.id IS NULL"
    ).fetchone()[0]
    return no_vector, no_chunk


# -- opening --------------------------------------------------------------------------------


def test_new_store_layout(tmp_path: Path) -> None:
    directory = store_dir(tmp_path)
    assert directory == tmp_path / STORE_DIR
    with Store(directory) as s:
        assert s.identity is None
        assert s.generation == 0
        assert s.chunk_count() == 0
    assert (directory / ".gitignore").read_text().splitlines()[-1] == "*"
    conn = sqlite3.connect(directory / DB_FILE)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_open_without_create_needs_a_store(tmp_path: Path) -> None:
    with pytest.raises(SearchError, match="no search store"):
        Store(store_dir(tmp_path), create=False)
    assert not store_dir(tmp_path).exists()
    Store(store_dir(tmp_path)).close()
    Store(store_dir(tmp_path), create=False).close()


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    Store(store_dir(tmp_path)).close()
    conn = sqlite3.connect(store_dir(tmp_path) / DB_FILE)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(SearchError, match="newer anekit"):
        Store(store_dir(tmp_path))


def test_a_file_that_is_not_a_store(tmp_path: Path) -> None:
    store_dir(tmp_path).mkdir()
    (store_dir(tmp_path) / DB_FILE).write_bytes(b"this is not sqlite" * 500)
    with pytest.raises(DamagedStoreError, match=r"the index is damaged .*run `anekit index`"):
        Store(store_dir(tmp_path))


def _garbled(tmp_path: Path) -> Path:
    """A store of 40 files with 32 KiB of garbage written over the middle of its file."""
    directory = store_dir(tmp_path)
    with Store(directory) as s:
        s.ensure_identity(IDENTITY)
        for n in range(40):
            put(s, f"m{n}.py", [f"alpha {n} " * 60, f"beta {n} " * 60])
    db = directory / DB_FILE
    size = db.stat().st_size
    with open(db, "r+b") as raw:
        raw.seek(size // 2)
        raw.write(bytes(range(256)) * 128)
    return directory


def test_a_damaged_store_is_found_by_check_and_never_a_raw_sqlite_error(tmp_path: Path) -> None:
    directory = _garbled(tmp_path)
    refused = 0
    with Store(directory, create=False) as s:
        assert s.check() != "ok"
        for call in (
            lambda: s.keyword_search("alpha", 5),
            lambda: s.chunks(list(range(1, 81))),
            s.vector_matrix,
            s.files,
            s.stats,
        ):
            try:
                call()
            except DamagedStoreError as error:
                refused += "the index is damaged" in str(error)
            # a call that reads no damaged page may answer; a raw sqlite3 error fails
    assert refused >= 2


def test_check_of_a_healthy_store(store: Store) -> None:
    put(store, "a.py", ["alpha"])
    assert store.check() == "ok"


def test_a_linked_store_file_is_refused_not_written_through(tmp_path: Path) -> None:
    directory = store_dir(tmp_path / "repo")
    directory.mkdir(parents=True)
    target = tmp_path / "authorized_keys"
    (directory / DB_FILE).symlink_to(target)
    (directory / ".gitignore").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(SearchError, match="a symbolic link"):
        Store(directory)
    assert not target.exists() and not (tmp_path / "elsewhere").exists()


def test_reopen_keeps_everything(tmp_path: Path) -> None:
    with Store(store_dir(tmp_path)) as s:
        s.ensure_identity(IDENTITY)
        put(s, "a.py", ["alpha one", "alpha two"])
        generation = s.generation
    with Store(store_dir(tmp_path), create=False) as s:
        assert s.identity == IDENTITY
        assert s.generation == generation
        assert s.chunk_count() == 2
        assert len(s.keyword_search("alpha", 10)) == 2


def test_every_connection_has_the_larger_page_cache(tmp_path: Path) -> None:
    """A store made, opened again, and reconnected after its file was replaced: each
    connection reads with PAGE_CACHE_KIB of cache, not SQLite's 2,000 KiB."""
    wanted = -store_connection.PAGE_CACHE_KIB
    assert wanted < -2000
    with Store(store_dir(tmp_path)) as s:
        assert s._conn.execute("PRAGMA cache_size").fetchone()[0] == wanted
    with Store(store_dir(tmp_path), create=False) as s:
        assert s._conn.execute("PRAGMA cache_size").fetchone()[0] == wanted
        s._reopen()
        assert s._conn.execute("PRAGMA cache_size").fetchone()[0] == wanted


def test_keyword_index_rebuilt_when_terms_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Store(store_dir(tmp_path)) as s:
        s.ensure_identity(IDENTITY)
        put(s, "a.py", ["value = getUserName()"])
    # A newer terms module that also indexes a made-up term; the store must re-index.
    monkeypatch.setattr(store_connection, "TERMS_VERSION", 999)
    monkeypatch.setattr(store_schema, "index_terms", lambda text: index_terms(text) + " zzextra")
    with Store(store_dir(tmp_path)) as s:
        assert [c.relpath for c in s.chunks([i for i, _ in s.keyword_search("zzextra", 5)])] == [
            "a.py"
        ]
        assert s.integrity_check() == "ok"


# -- identity -------------------------------------------------------------------------------


def test_identity_set_on_empty_store(tmp_path: Path) -> None:
    with Store(store_dir(tmp_path)) as s:
        assert s.ensure_identity(IDENTITY) is False
        assert s.identity == IDENTITY
        assert s.ensure_identity(IDENTITY) is False


@pytest.mark.parametrize(
    "change",
    [
        {"model": "other"},
        {"variant": "fp16"},
        {"chunker": "ts-2"},
        {"max_length": 512},
        {"dimension": 16},
        {"numerics": 2},
    ],
)
def test_identity_change_resets(store: Store, change: dict[str, Any]) -> None:
    put(store, "a.py", ["alpha beta", "gamma"])
    put(store, "b.py", ["alpha"])
    before = store.generation
    other = dataclasses.replace(IDENTITY, **change)
    assert store.ensure_identity(other) is True
    assert store.identity == other
    assert store.files() == {}
    assert store.chunk_count() == 0
    assert store.keyword_search("alpha", 10) == []
    ids, vecs = store.vector_matrix()
    assert ids.size == 0
    assert vecs.shape == (0, other.dimension)
    assert store.generation > before
    conn = raw(store)
    assert conn.execute("SELECT count(*) FROM vectors").fetchone()[0] == 0
    assert store.ensure_identity(other) is False


def test_identity_key_names_numerics_only_past_the_first_version(tmp_path: Path) -> None:
    """A store written before ``numerics`` existed keeps its key (and its vector cache's
    namespace) at version 1, and reads back as version 1; version 2 is another key."""
    written_before = json.dumps(
        {
            "chunker": "ts-1",
            "dimension": DIM,
            "max_length": 256,
            "model": "mini",
            "variant": "int8",
        },
        sort_keys=True,
    )
    assert IDENTITY.numerics == 1 and IDENTITY.key() == written_before
    calibrated = dataclasses.replace(IDENTITY, numerics=2)
    assert json.loads(calibrated.key())["numerics"] == 2
    with Store(store_dir(tmp_path)) as s:
        with s.write():
            s._set_meta("identity", written_before)
        assert s.identity == IDENTITY
        assert s.ensure_identity(calibrated) is True  # embedded again
        assert s.identity == calibrated


def test_put_needs_identity(tmp_path: Path) -> None:
    with Store(store_dir(tmp_path)) as s, s.write(), pytest.raises(SearchError, match="identity"):
        s.put_file(record("a.py"), [chunk("x")], vectors(1))


# -- writes ---------------------------------------------------------------------------------


def test_put_outside_write_is_refused(store: Store) -> None:
    with pytest.raises(SearchError, match=r"inside a Store\.write"):
        store.put_file(record("a.py"), [chunk("x")], vectors(1))
    with pytest.raises(SearchError, match=r"inside a Store\.write"):
        store.remove_file("a.py")
    with pytest.raises(SearchError, match=r"inside a Store\.write"):
        store.touch_file("a.py", 1, 1)


def test_write_does_not_nest(store: Store) -> None:
    with store.write(), pytest.raises(SearchError, match="nest"), store.write():
        pass


@pytest.mark.parametrize(
    ("chunks", "vecs", "message"),
    [
        ([chunk("a"), chunk("b")], vectors(1), "shape"),
        ([chunk("a")], np.ones((1, DIM + 1)), "shape"),
        ([chunk("a")], np.ones(DIM), "shape"),
        ([chunk("a")], np.full((1, DIM), np.nan), "NaN or inf"),
        ([chunk("a")], np.full((1, DIM), np.inf), "NaN or inf"),
        ([chunk("a")], np.full((1, DIM), 1e6), "NaN or inf"),  # overflows fp16
        ([chunk("a")], np.zeros((1, DIM)), "zero vector"),
        ([chunk("a")], np.ones((1, DIM), dtype=np.int64), "floats"),
        ([chunk("a", kind="prose")], vectors(1), "kind"),
        ([ChunkRecord(5, 4, "a", "", "code", "h")], vectors(1), "line span"),
        ([ChunkRecord(0, 4, "a", "", "code", "h")], vectors(1), "line span"),
    ],
)
def test_put_refuses_bad_input_and_changes_nothing(
    store: Store, chunks: list[ChunkRecord], vecs: np.ndarray, message: str
) -> None:
    put(store, "a.py", ["alpha"])
    generation = store.generation
    with store.write(), pytest.raises(ValueError, match=message):
        store.put_file(record("a.py"), chunks, vecs)
    assert store.generation == generation
    assert [c.text for c in store.chunks(store.vector_matrix()[0].tolist())] == ["alpha"]


def test_put_stores_fp16_vectors(store: Store) -> None:
    v = vectors(3, seed=7)
    with store.write():
        store.put_file(record("a.py"), [chunk(f"c{i}") for i in range(3)], v)
    ids, stored = store.vector_matrix()
    assert stored.dtype == np.float16
    assert np.all(np.diff(ids) > 0)
    np.testing.assert_array_equal(stored, v.astype(np.float16))


def test_chunks_may_wait_for_their_vectors_which_come_by_text_hash(store: Store) -> None:
    """Searchable at once: a file's chunks go in with the vectors known (None for the
    rest); unembedded() lists those waiting, put_vectors fills every chunk of a hash that
    waits (not one that has its vector), and refuses what put_file refuses."""
    v = vectors(3, seed=3)
    same = chunk("shared text", line=1)
    with store.write():
        store.put_file(record("a.py"), [same, chunk("alone", line=5)], [v[0], None])
        store.put_file(record("b.py"), [same], [None])
    waiting = [(c.relpath, c.start_line, h) for c, h in store.unembedded()]
    assert waiting == [("a.py", 5, chunk("alone").text_hash), ("b.py", 1, same.text_hash)]
    assert store.embedded_counts() == (1, 3)
    assert store.stats()["embedded_fraction"] == round(1 / 3, 4)
    with store.write():  # a.py's chunk of that hash keeps its vector: one chunk gets this
        assert store.put_vectors([(same.text_hash, v[1], IDENTITY.variant)]) == 1
        assert store.put_vectors([(chunk("alone").text_hash, v[2], "fp16")]) == 1
        with pytest.raises(ValueError, match="zero vector"):
            store.put_vectors([("x", np.zeros(DIM), None)])
        with pytest.raises(ValueError, match="NaN or inf"):
            store.put_vectors([("x", np.full(DIM, np.nan), None)])
    assert store.unembedded() == [] and store.embedded_counts() == (3, 3)
    assert store.stand_in_files() == ["a.py"]  # the fp16 vector is marked
    _, stored = store.vector_matrix()
    np.testing.assert_array_equal(stored[0], v[0].astype(np.float16))  # not overwritten
    with pytest.raises(ValueError, match="2 vectors for 1 chunk"), store.write():
        store.put_file(record("c.py"), [chunk("c")], [None, v[0]])


def test_file_without_chunks(store: Store) -> None:
    with store.write():
        store.put_file(record("empty.py"), [], np.zeros((0, DIM)))
        store.put_file(record("empty2.py"), [], np.array([]))
    assert set(store.files()) == {"empty.py", "empty2.py"}
    assert store.chunk_count() == 0


def test_reput_replaces_chunks_vectors_and_keyword_rows(store: Store) -> None:
    put(store, "src/a.py", ["def oldName(): alphaword", "alphaword again", "third"])
    put(store, "src/b.py", ["unrelated betaword"])
    old_ids = {i for i, _ in store.keyword_search("alphaword", 10)}
    assert len(old_ids) == 2
    put(store, "src/a.py", ["def newName(): gammaword"])
    assert store.keyword_search("alphaword", 10) == []
    assert store.keyword_search("oldName", 10) == []
    assert store.keyword_search("old_name", 10) == []
    [(new_id, _)] = store.keyword_search("gammaword", 10)
    assert new_id not in old_ids
    assert store.chunk_count() == 2
    ids, _ = store.vector_matrix()
    assert sorted(ids.tolist()) == sorted(
        [new_id, *[i for i, _ in store.keyword_search("betaword", 5)]]
    )
    assert orphan_counts(raw(store)) == (0, 0)
    assert store.integrity_check() == "ok"


def test_ids_are_never_reused(store: Store) -> None:
    put(store, "a.py", ["one", "two"])
    first = set(store.vector_matrix()[0].tolist())
    with store.write():
        store.remove_file("a.py")
    put(store, "a.py", ["one", "two"])
    assert first.isdisjoint(store.vector_matrix()[0].tolist())
    assert store.chunks(sorted(first)) == []


def test_remove_file(store: Store) -> None:
    put(store, "a.py", ["alphaword"])
    put(store, "b.py", ["betaword"])
    with store.write():
        assert store.remove_file("a.py") is True
        assert store.remove_file("missing.py") is False
    assert set(store.files()) == {"b.py"}
    assert store.keyword_search("alphaword", 10) == []
    assert store.chunk_count() == 1
    assert orphan_counts(raw(store)) == (0, 0)
    assert raw(store).execute("SELECT count(*) FROM vectors").fetchone()[0] == 1


def test_touch_file(store: Store) -> None:
    put(store, "a.py", ["alpha"])
    generation = store.generation
    with store.write():
        store.touch_file("a.py", 123, 456)
    assert store.files()["a.py"].size == 123
    assert store.files()["a.py"].mtime_ns == 456
    assert store.generation == generation
    with store.write(), pytest.raises(KeyError):
        store.touch_file("missing.py", 1, 1)


def test_generation_moves_only_with_committed_changes(store: Store) -> None:
    g0 = store.generation
    with store.write():
        pass
    assert store.generation == g0
    put(store, "a.py", ["alpha"])
    assert store.generation == g0 + 1
    with store.write():
        store.put_file(record("b.py"), [chunk("beta")], vectors(1))
        store.put_file(record("c.py"), [chunk("gamma")], vectors(1))
    assert store.generation == g0 + 2
    with store.write():
        assert not store.remove_file("missing.py")
    assert store.generation == g0 + 2


def test_a_read_sees_one_generation_and_the_next_read_sees_a_later_write(store: Store) -> None:
    """A read transaction keeps the meta values it read (its snapshot's): a write committed
    by another connection meanwhile shows in the next read, not in this one."""
    put(store, "a.py", ["alpha"])
    other = Store(store.directory)
    try:
        with store.read():
            before = store.generation
            put(other, "b.py", ["beta"])
            assert store.generation == before  # the snapshot's
            assert store.files_named(["b"]) == []
        assert store.generation == before + 1
        with store.read():  # a new snapshot: the values kept by the last are gone
            assert store.generation == before + 1
            assert store.files_named(["b"]) == ["b.py"]
    finally:
        other.close()


def test_failed_write_rolls_back(store: Store) -> None:
    put(store, "a.py", ["alphaword"])
    generation = store.generation

    def failing_batch() -> None:
        with store.write():
            store.put_file(record("a.py"), [chunk("betaword")], vectors(1))
            store.put_file(record("b.py"), [chunk("betaword")], vectors(1))
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        failing_batch()
    assert store.generation == generation
    assert set(store.files()) == {"a.py"}
    assert len(store.keyword_search("alphaword", 5)) == 1
    assert store.keyword_search("betaword", 5) == []


def test_locked_by_another_writer(tmp_path: Path) -> None:
    with Store(store_dir(tmp_path)) as a, Store(store_dir(tmp_path), timeout=0.2) as b:
        with a.write(), pytest.raises(SearchError, match="locked by another writer"), b.write():
            pass
        with b.write():  # free again
            pass


# -- reads ----------------------------------------------------------------------------------


def test_files_and_chunks(store: Store) -> None:
    with store.write():
        store.put_file(
            FileRecord("src/m.rs", 42, 7, "ab" * 32, "rust"),
            [chunk("fn main() {}", symbol="main", line=3), chunk("# Notes", kind="docs", line=9)],
            vectors(2),
        )
    assert store.files() == {"src/m.rs": FileRecord("src/m.rs", 42, 7, "ab" * 32, "rust")}
    ids = store.vector_matrix()[0].tolist()
    got = store.chunks([ids[1], 10**9, ids[0]])
    assert [c.id for c in got] == [ids[1], ids[0]]
    assert got[1].relpath == "src/m.rs"
    assert (got[1].start_line, got[1].end_line, got[1].symbol) == (3, 3, "main")
    assert (got[1].kind, got[1].language, got[1].text) == ("code", "rust", "fn main() {}")
    assert got[0].kind == "docs"


def test_known_vectors(store: Store) -> None:
    v = vectors(2, seed=3)
    with store.write():
        store.put_file(record("a.py"), [chunk("one"), chunk("two")], v)
    known = store.known_vectors([chunk("two").text_hash, chunk("three").text_hash])
    assert list(known) == [chunk("two").text_hash]
    np.testing.assert_array_equal(known[chunk("two").text_hash], v[1].astype(np.float16))


def test_stand_in_vectors_are_marked_and_not_reused(store: Store) -> None:
    assert IDENTITY.variant != "fp16"
    v = vectors(3, seed=4)
    with store.write():
        store.put_file(
            record("a.py"),
            [chunk("one"), chunk("two"), chunk("three")],
            v,
            [None, "fp16", IDENTITY.variant],  # the store's own variant is not a mark
        )
        store.put_file(record("b.py"), [chunk("four")], vectors(1, seed=5))
    assert store.stand_in_files() == ["a.py"]
    assert store.stats()["stand_ins"] == {"fp16": 1}
    hashes = [chunk(text).text_hash for text in ("one", "two", "three")]
    assert sorted(store.known_vectors(hashes)) == sorted([hashes[0], hashes[2]])
    with pytest.raises(ValueError, match="2 variants for 3 chunk"), store.write():
        store.put_file(record("a.py"), [chunk("x"), chunk("y"), chunk("z")], v, [None, None])
    with store.write():  # embedded again: the mark goes with the old vector
        store.put_file(record("a.py"), [chunk("one"), chunk("two"), chunk("three")], v)
    assert store.stand_in_files() == [] and store.stats()["stand_ins"] == {}


def test_a_schema_1_store_gains_the_variant_column(tmp_path: Path) -> None:
    directory = store_dir(tmp_path)
    with Store(directory) as s:
        s.ensure_identity(IDENTITY)
        put(s, "a.py", ["one", "two"])
    conn = sqlite3.connect(directory / DB_FILE)  # back to schema 1: no variant column
    conn.executescript(
        "CREATE TABLE old AS SELECT chunk_id, vector FROM vectors; DROP TABLE vectors;"
        "CREATE TABLE vectors (chunk_id INTEGER PRIMARY KEY REFERENCES chunks(id) "
        "ON DELETE CASCADE, vector BLOB NOT NULL);"
        "INSERT INTO vectors SELECT * FROM old; DROP TABLE old; DROP TABLE vector_log;"
        "PRAGMA user_version = 1;"
    )
    conn.close()
    with Store(directory) as s:
        assert s.stand_in_files() == []
        assert sorted(s.known_vectors([chunk("one").text_hash, chunk("two").text_hash]))
        assert s.chunk_count() == 2
    conn = sqlite3.connect(directory / DB_FILE)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 3
    triggers = {
        row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
    }
    assert triggers == {"vectors_log_insert", "vectors_log_update", "vectors_log_delete"}
    columns = [row[1] for row in conn.execute("PRAGMA table_info(vectors)")]
    assert columns == ["chunk_id", "vector", "variant"]
    indexes = {row[1] for row in conn.execute("PRAGMA index_list(vectors)")}
    assert "vectors_stand_ins" in indexes  # stand_in_files needs no scan of every vector
    conn.close()
    with Store(store_dir(tmp_path / "fresh")) as fresh:
        plan = fresh._conn.execute(
            "EXPLAIN QUERY PLAN SELECT chunk_id FROM vectors WHERE variant IS NOT NULL"
        ).fetchall()
        assert "vectors_stand_ins" in str(plan)


def test_stats(store: Store) -> None:
    put(store, "a.py", ["one", "two"])
    stats = store.stats()
    assert stats["files"] == 1
    assert stats["chunks"] == 2
    assert stats["bytes"] > 0
    assert stats["identity"]["model"] == "mini"
    assert stats["generation"] == store.generation
    assert stats["last_write"] == pytest.approx(time.time(), abs=60)


# -- keyword search -------------------------------------------------------------------------

FORMS = ["getUserName", "get_user_name", "get user name"]


@pytest.mark.parametrize("query", FORMS)
def test_keyword_forms_meet(store: Store, query: str) -> None:
    for i, form in enumerate(FORMS):
        put(store, f"f{i}.py", [f"x = {form}\nprint(x)"])
    put(store, "other.py", ["print(username)"])
    found = {c.relpath for c in store.chunks([i for i, _ in store.keyword_search(query, 10)])}
    assert {"f0.py", "f1.py", "f2.py"} <= found


def test_keyword_path_and_symbol(store: Store) -> None:
    with store.write():
        store.put_file(
            record("src/parser/config_loader.py"),
            [chunk("return 1", symbol="ConfigLoader.load")],
            vectors(1),
        )
    assert len(store.keyword_search("configLoader", 5)) == 1
    assert len(store.keyword_search("parser", 5)) == 1


def test_keyword_symbol_outranks_body(store: Store) -> None:
    filler = " ".join(f"word{i}" for i in range(30))
    with store.write():
        store.put_file(record("a.py"), [chunk(f"{filler} parseConfig", symbol="other")], vectors(1))
        store.put_file(record("b.py"), [chunk(filler, symbol="parseConfig")], vectors(1, 1))
    ranked = store.chunks([i for i, _ in store.keyword_search("parseConfig", 5)])
    assert [c.relpath for c in ranked] == ["b.py", "a.py"]


def test_keyword_scores_descend(store: Store) -> None:
    put(store, "a.py", ["alpha beta gamma", "alpha beta", "alpha", "delta"])
    hits = store.keyword_search("alpha beta gamma", 10)
    assert len(hits) == 3
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True)
    texts = [c.text for c in store.chunks([i for i, _ in hits])]
    assert texts == ["alpha beta gamma", "alpha beta", "alpha"]


@pytest.mark.parametrize(
    "query", ["", '"', "a:b", "NOT", "(", "AND OR", "NEAR(a b)", "*", "-x", "text:alpha", "💥"]
)
def test_keyword_query_syntax_never_raises(store: Store, query: str) -> None:
    put(store, "a.py", ["alpha not near text b"])
    assert isinstance(store.keyword_search(query, 5), list)


@pytest.mark.parametrize("in_list_max", [0, 10**6])
def test_keyword_allowed_applies_before_ranking(
    store: Store, monkeypatch: pytest.MonkeyPatch, in_list_max: int
) -> None:
    monkeypatch.setattr(store_keyword, "_IN_LIST_MAX", in_list_max)
    # 20 strong matches in tests/, 6 weaker ones in src/: the best 5 are all in tests/.
    with store.write():
        for i in range(20):
            store.put_file(record(f"tests/t{i}.py"), [chunk("needle needle needle")], vectors(1))
        for i in range(6):
            store.put_file(record(f"src/s{i}.py"), [chunk(f"needle and {'hay ' * 20}")], vectors(1))
    allowed = store.filter_ids(["!tests/"])
    assert allowed is not None
    assert len(allowed) == 6
    hits = store.keyword_search("needle", 5, allowed)
    assert len(hits) == 5
    assert {i for i, _ in hits} <= allowed
    assert store.keyword_search("needle", 5, set()) == []


def test_keyword_prunes_common_words_but_finds_rare_ones(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_keyword, "MATCH_BUDGET", 10)
    with store.write():
        for i in range(40):
            store.put_file(record(f"c{i}.py"), [chunk(f"the common thing {i}")], vectors(1))
        store.put_file(record("rare.py"), [chunk("the zebra")], vectors(1))
    hits = store.keyword_search("the zebra", 5)
    assert store.chunks([hits[0][0]])[0].relpath == "rare.py"
    assert len(store.keyword_search("the", 5)) == 5  # only common words: still answered
    assert len(store.keyword_search("common thing", 5)) == 5


def _exact_selection(
    store: Store, items: list[tuple[str, ...]], budget: int
) -> list[tuple[str, ...]]:
    """MATCH_BUDGET's choice of query items from every item's exact count."""
    from anekit.search.terms import item_expression

    sql = "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?"
    counts = {p: raw(store).execute(sql, (item_expression(p),)).fetchone()[0] for p in items}
    total, ranked = store.chunk_count(), 0
    kept: list[tuple[str, ...]] = []
    for parts in sorted((p for p in items if counts[p]), key=counts.__getitem__):
        if kept and (2 * counts[parts] > total or ranked + counts[parts] > budget):
            break
        kept.append(parts)
        ranked += counts[parts]
    return [parts for parts in items if parts in kept]


def test_keyword_items_counted_up_to_the_budget_are_chosen_as_by_exact_counts(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each item's matches are counted only up to the budget (+1); whole counts only when
    every matching item is over it, to find the rarest. The choice is exact counts'."""
    from anekit.search.terms import query_items

    budget = 10
    monkeypatch.setattr(store_keyword, "MATCH_BUDGET", budget)
    monkeypatch.setattr(store_keyword, "_COUNT_CAP", budget + 1)
    words = {"the": 60, "is": 45, "send": 30, "client": 25, "limit": 12, "zebra": 6, "okapi": 2}
    with store.write():
        for i in range(70):
            text = " ".join(word for word, count in words.items() if i < count)
            store.put_file(
                record(f"c{i}.py"), [chunk(f"{text} run_until_complete {i}")], vectors(1)
            )
    counted: list[str] = []
    store._conn.set_trace_callback(counted.append)
    queries = [
        "the zebra",  # one word under the budget: the others are only counted to it
        "the client send",  # every word over it: exact counts pick the rarest
        "is zebra okapi limit",
        "send client nothere",  # a word without a match is no reason to count exactly
        "the is run_until_complete",
        "nothere absent",
    ]
    for query in queries:
        store._counts.clear()
        counted.clear()
        items = query_items(query)
        with store.read():
            chosen = store._keyword_items(items)
        assert chosen == _exact_selection(store, items, budget), query
        whole = [sql for sql in counted if "MATCH" in sql and "LIMIT" not in sql]
        if query == "the zebra":
            assert not whole  # "the" was counted to 11, not to 60
        if query in ("the client send", "send client nothere"):
            assert len(whole) == len([p for p in items if p != ("nothere",)])
    store._conn.set_trace_callback(None)


def test_keyword_counts_follow_writes(store: Store) -> None:
    put(store, "a.py", ["zebra one"])
    assert len(store.keyword_search("zebra quokka", 5)) == 1  # quokka: no chunk yet
    put(store, "b.py", ["quokka two"])
    assert {
        c.relpath for c in store.chunks([i for i, _ in store.keyword_search("zebra quokka", 5)])
    } == {
        "a.py",
        "b.py",
    }


# -- filters --------------------------------------------------------------------------------


@pytest.fixture
def tree(store: Store) -> Store:
    layout = {
        "src/app/main.py": "python",
        "src/app/util.ts": "typescript",
        "src/types.d.ts": "typescript",
        "tests/test_main.py": "python",
        "docs/guide.md": "markdown",
        "README.MD": "markdown",
        "Makefile": None,
    }
    with store.write():
        for i, (path, lang) in enumerate(layout.items()):
            store.put_file(record(path, lang), [chunk(f"one {i}"), chunk(f"two {i}")], vectors(2))
    return store


def _paths(store: Store, ids: set[int] | None) -> set[str]:
    assert ids is not None
    return {c.relpath for c in store.chunks(sorted(ids))}


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"path_globs": ["*.py"]}, {"src/app/main.py", "tests/test_main.py"}),
        ({"path_globs": ["src/"]}, {"src/app/main.py", "src/app/util.ts", "src/types.d.ts"}),
        ({"path_globs": ["src/**/*.py"]}, {"src/app/main.py"}),
        (
            {"path_globs": ["!tests/", "!docs"]},
            {"src/app/main.py", "src/app/util.ts", "src/types.d.ts", "README.MD", "Makefile"},
        ),
        ({"path_globs": ["src/", "!*.ts"]}, {"src/app/main.py"}),
        ({"exts": ["md"]}, {"docs/guide.md", "README.MD"}),
        ({"exts": [".d.ts"]}, {"src/types.d.ts"}),
        (
            {"exts": ["py", "md"], "path_globs": ["!tests/"]},
            {"src/app/main.py", "docs/guide.md", "README.MD"},
        ),
        ({"langs": ["TypeScript"]}, {"src/app/util.ts", "src/types.d.ts"}),
        ({"langs": ["!python", "!markdown"]}, {"src/app/util.ts", "src/types.d.ts", "Makefile"}),
        ({"langs": ["python"], "exts": ["!py"]}, set()),
        ({"path_globs": ["src/"], "langs": ["python"]}, {"src/app/main.py"}),
    ],
)
def test_filter_ids(tree: Store, filters: dict[str, list[str]], expected: set[str]) -> None:
    assert _paths(tree, tree.filter_ids(**filters)) == expected


def test_filter_ids_none_and_errors(tree: Store) -> None:
    assert tree.filter_ids() is None
    with pytest.raises(SearchError, match="empty path filter"):
        tree.filter_ids(["!"])
    with pytest.raises(SearchError, match="empty ext filter"):
        tree.filter_ids(exts=[""])


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"path_globs": ["["]}, "is not a path glob"),
        ({"path_globs": ["src/[a-"]}, "is not a path glob"),
        ({"path_globs": ["x" * 1025]}, "the limit is 1024"),
        ({"exts": ["*.py"]}, "is not a file extension"),
        ({"exts": ["py/x"]}, "is not a file extension"),
        ({"langs": ["pyhton"]}, r"unknown language 'pyhton'; the index holds: .*python \(2\)"),
        ({"langs": ["!klingon"]}, "unknown language 'klingon'"),
    ],
)
def test_filter_ids_refuse_what_can_match_nothing(
    tree: Store, filters: dict[str, list[str]], message: str
) -> None:
    with pytest.raises(SearchError, match=message):
        tree.filter_ids(**filters)


def test_a_language_of_the_table_not_in_the_index_is_no_error(tree: Store) -> None:
    assert tree.filter_ids(langs=["rust"]) == set()


def test_backtracking_globs_match_in_linear_time(tree: Store) -> None:
    # With Python's re, the first took 19 s on a 3-file store and the second minutes.
    for glob in ("**/************x", "**/" + "*" * 50, "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*z"):
        with tree.write():
            tree.put_file(record("a" * 80 + "/" + "a" * 80, None), [chunk("long")], vectors(1))
        found = _paths(tree, tree.filter_ids([glob]))
        assert ("a" * 80 + "/" + "a" * 80 in found) == (glob == "**/" + "*" * 50), glob


def test_store_stats_count_languages(tree: Store) -> None:
    assert tree.stats()["languages"] == {"markdown": 2, "python": 2, "typescript": 2}


def test_filter_ids_follow_writes(tree: Store) -> None:
    first = tree.filter_ids(["src/"])
    assert first is not None
    first.clear()  # a caller's copy: the cache is not touched
    assert len(tree.filter_ids(["src/"]) or ()) == 6
    put(tree, "src/new.py", ["fresh"])
    assert "src/new.py" in _paths(tree, tree.filter_ids(["src/"]))
    with tree.write():
        tree.remove_file("src/app/util.ts")
    assert "src/app/util.ts" not in _paths(tree, tree.filter_ids(["src/"]))


# -- readers and crashes --------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import hashlib, sys
    from pathlib import Path
    import numpy as np
    from anekit.search.store import ChunkRecord, FileRecord, Store, StoreIdentity

    directory, files, per_write = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    store = Store(directory)
    store.ensure_identity(StoreIdentity("mini", "int8", "ts-1", 256, 8))
    rng = np.random.default_rng()
    version = int(store.generation) * 1000 + 1
    print("ready", flush=True)
    while True:
        with store.write():
            for _ in range(per_write):
                version += 1
                name = f"f{rng.integers(files)}.py"
                count = 1 + version % 5
                chunks = [
                    ChunkRecord(i + 1, i + 1, f"{name} v{version} part {i} of {count} zq{version}x",
                                "sym", "code", hashlib.sha256(str(i).encode()).hexdigest())
                    for i in range(count)
                ]
                vectors = rng.standard_normal((count, 8)).astype(np.float32) + 0.1
                if version % 7 == 0:
                    store.remove_file(name)
                else:
                    store.put_file(FileRecord(name, count, version, "0" * 64, "python"),
                                   chunks, vectors)
    """
)


def _check_consistent(store: Store) -> int:
    """Every file whole (one version, all its chunks), every chunk with a vector and its
    keyword row, no stray keyword rows. Returns how many chunks it saw."""
    with store.read():
        ids, vecs = store.vector_matrix()
        chunks = store.chunks(ids.tolist())
        files = store.files()
        assert store.chunk_count() == len(chunks) == len(ids)
        assert np.isfinite(vecs.astype(np.float32)).all()
        by_file: dict[str, list[str]] = {}
        for c in chunks:
            by_file.setdefault(c.relpath, []).append(c.text)
        assert set(by_file) == set(files)  # every file written has chunks
        for name, texts in by_file.items():
            versions = {t.split()[1] for t in texts}
            assert len(versions) == 1, f"{name} mixes versions {versions}"
            count = int(texts[0].split()[5])
            assert sorted(int(t.split()[3]) for t in texts) == list(range(count)), name
            assert files[name].size == count
            # its keyword rows are there, and no older version's
            token = texts[0].split()[6]
            assert len(store.keyword_search(token, 10)) == count
        return len(chunks)


def _spawn_writer(directory: Path, files: int, per_write: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(directory), str(files), str(per_write)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "ready", proc.stderr.read() if proc.stderr else line
    return proc


def test_reader_sees_whole_files_during_writes(tmp_path: Path) -> None:
    directory = store_dir(tmp_path)
    writer = _spawn_writer(directory, files=6, per_write=3)
    try:
        with Store(directory, create=False) as reader:
            seen_generations = set()
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline:
                _check_consistent(reader)
                seen_generations.add(reader.generation)
            assert writer.poll() is None, writer.stderr.read() if writer.stderr else ""
            assert len(seen_generations) > 3  # the writer really wrote meanwhile
    finally:
        writer.kill()
        writer.wait()


def test_kill_9_leaves_a_consistent_store(tmp_path: Path) -> None:
    directory = store_dir(tmp_path)
    rng = np.random.default_rng(0)
    total = 0
    for _round in range(4):
        writer = _spawn_writer(directory, files=12, per_write=4)
        time.sleep(0.15 + float(rng.random()) * 0.4)
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
        assert writer.returncode == -signal.SIGKILL
        with Store(directory, create=False) as s:  # the next run opens and resumes
            assert s.integrity_check() == "ok"
            assert orphan_counts(raw(s)) == (0, 0)
            duplicates = (
                raw(s)
                .execute(
                    "SELECT count(*) FROM (SELECT file_id, start_line FROM chunks "
                    "GROUP BY file_id, start_line HAVING count(*) > 1)"
                )
                .fetchone()[0]
            )
            assert duplicates == 0
            total = _check_consistent(s)
    assert total > 0


def test_a_wal_deleted_under_an_open_store_is_explained_and_nothing_is_lost(
    tmp_path: Path,
) -> None:
    directory = store_dir(tmp_path)
    holder = Store(directory)
    holder.ensure_identity(IDENTITY)
    put(holder, "a.py", ["alpha"])
    (directory / "store.db-wal").unlink()  # under an open connection
    put(holder, "b.py", ["beta"])
    with pytest.raises(SearchError, match="stop that process and try again") as refused:
        Store(directory, create=False)
    advice = str(refused.value).removeprefix(f"{directory / DB_FILE}: ")
    assert "index again" not in advice and "delete " not in advice
    holder.close()  # the holder writes its changes back as it exits
    with Store(directory, create=False) as reopened:
        assert sorted(reopened.files()) == ["a.py", "b.py"]


def test_replaced_tells_a_reader_its_store_was_made_anew(tmp_path: Path) -> None:
    directory = store_dir(tmp_path)
    with Store(directory) as first:
        first.ensure_identity(IDENTITY)
    reader = Store(directory, create=False)
    assert not reader.replaced()
    for leftover in directory.iterdir():
        leftover.unlink()
    with Store(directory) as second:
        second.ensure_identity(IDENTITY)
        put(second, "new.py", ["fresh"])
    assert reader.replaced()
    reader.close()


def test_a_budget_stops_a_statement_that_runs_past_it(store: Store) -> None:
    put(store, "a.py", ["alpha"])
    slow = (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000000) "
        "SELECT count(*) FROM n"
    )
    with pytest.raises(SearchError, match=r"ran past its 0\.05 s budget"), store.budget(0.05):
        store._conn.execute(slow).fetchone()
    with store.budget(30):  # a search inside its budget answers, and the handler goes after
        assert store.keyword_search("alpha", 5)
    assert store._conn.execute("SELECT count(*) FROM files").fetchone()[0] == 1


def test_a_large_stores_keyword_search_ranks_two_halves_at_once(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From SPLIT_MIN_CHUNKS chunks on (here: any), an unfiltered keyword search ranks the
    chunks above the middle id on the store's second connection, on another thread, with
    the same hits (BM25 with the whole index's statistics, ties by id) as one search; not
    with a filter, nor when the caller says not to, nor inside a write."""
    import threading

    for number in range(12):
        words = ["alpha"] * (number % 4 + 1) + ["beta"] * (number % 3) + [f"word{number}"]
        put(store, f"f{number:02d}.py", [" ".join(words), f"gamma {number}"])
    ran_on: list[str] = []
    deadlines: list[float | None] = []
    real_rows = store_keyword._rows

    def rows(*args: Any) -> Any:
        ran_on.append(threading.current_thread().name)
        deadlines.append(args[1])
        return real_rows(*args)

    monkeypatch.setattr(store_keyword, "_rows", rows)
    queries = ["alpha", "alpha beta", "gamma", "word3 alpha", "nothing"]
    monkeypatch.setattr(store_keyword, "SPLIT_MIN_CHUNKS", 10**9)
    whole = {query: store.keyword_search(query, 5) for query in queries}
    assert not ran_on and store._side is None
    monkeypatch.setattr(store_keyword, "SPLIT_MIN_CHUNKS", 1)
    middle = store._split_at()
    assert middle is not None
    ids = [row[0] for row in store._conn.execute("SELECT id FROM chunks ORDER BY id")]
    assert ids[0] <= middle < ids[-1]
    for query in queries:
        assert store.keyword_search(query, 5) == whole[query], query
    assert len(ran_on) == len(queries)
    assert all(name.startswith("anekit-keyword-half") for name in ran_on)
    assert deadlines == [None] * len(queries)
    with store.budget(30):  # the second half keeps the search's budget
        store.keyword_search("alpha", 5)
        assert deadlines[-1] == store._deadline and store._deadline is not None
    ran_on.clear()
    assert {i for i, _ in whole["alpha"]} & {i for i in ids if i > middle}  # both halves hit
    assert {i for i, _ in whole["alpha"]} & {i for i in ids if i <= middle}
    ran_on.clear()
    store.keyword_search("alpha", 5, split=False)
    store.keyword_search("alpha", 5, allowed=set(ids[:6]))
    with store.write():
        store.keyword_search("alpha", 5)
    assert not ran_on


def test_a_write_between_the_two_halves_is_not_half_seen(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The upper half reads on the second connection; when a write committed after the
    search's read began, that read sees another state, and the upper half is ranked again
    on the search's own connection: the hits are those of the search's one state."""
    for number in range(8):
        put(store, f"f{number}.py", [" ".join(["alpha"] * (number % 3 + 1)), f"beta {number}"])
    before = store.keyword_search("alpha", 5)
    monkeypatch.setattr(store_keyword, "SPLIT_MIN_CHUNKS", 1)
    other = Store(store.directory, create=False)
    real_rows = store_keyword._rows

    def rows(*args: Any) -> Any:
        if not other.chunk_count() > 16:  # once: a better match, above the middle id
            put(other, "late.py", ["alpha " * 6])
        return real_rows(*args)

    monkeypatch.setattr(store_keyword, "_rows", rows)
    with store.read():
        assert store.keyword_search("alpha", 5) == before
    after = store.keyword_search("alpha", 5)
    late = store._conn.execute("SELECT max(id) FROM chunks").fetchone()[0]
    assert after[0][0] == late  # the next search sees it
    other.close()


def test_the_second_connection_keeps_the_budget_and_closes_with_the_store(
    store: Store,
) -> None:
    slow = (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000000) "
        "SELECT count(*), 0.0 FROM n"
    )
    side = store._side_connection()
    timeout_ms = side.execute("PRAGMA busy_timeout").fetchone()[0]
    assert timeout_ms == store_connection.BUSY_TIMEOUT_S * 1000
    with store.budget(0.05):
        deadline = store._deadline
        assert deadline is not None
        with pytest.raises(sqlite3.OperationalError, match="interrupted"):
            store_keyword._rows(side, deadline, slow, ())
    assert store._deadline is None
    assert store_keyword._rows(side, None, "SELECT 1, 0.5", ())[1] == [(1, 0.5)]  # no handler
    store._reopen()
    assert store._side is None  # made again when next needed
    side = store._side_connection()
    store.close()
    with pytest.raises(sqlite3.ProgrammingError):
        side.execute("SELECT 1")


def test_an_io_error_while_opening_is_an_error_not_a_retry_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening again after an I/O error must not itself retry (it recursed until Python's
    limit), and a store left unopened tries again at its next call."""
    directory = store_dir(tmp_path)
    with Store(directory) as made:
        made.ensure_identity(IDENTITY)
        put(made, "a.py", ["alpha"])
    store = Store(directory, create=False)
    failing = {"left": 1000}
    real_execute = sqlite3.Connection.execute

    class Flaky(sqlite3.Connection):
        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
            if failing["left"] > 0:
                failing["left"] -= 1
                error = sqlite3.OperationalError("disk I/O error")
                error.sqlite_errorcode = 10
                raise error
            return real_execute(self, sql, *args)

    real_connect = sqlite3.connect
    monkeypatch.setattr(
        sqlite3, "connect", lambda *a, **k: real_connect(*a, **{**k, "factory": Flaky})
    )
    store._conn.close()
    store._conn = real_connect(directory / DB_FILE, isolation_level=None, factory=Flaky)
    with pytest.raises(SearchError, match="stop that process and try again"):
        store.files()
    assert failing["left"] > 990  # a few tries, not a loop
    failing["left"] = 0  # the holder went away
    assert sorted(store.files()) == ["a.py"]
    store.close()


def test_unembedded_reads_from_the_mark_and_the_mark_stops_at_a_chunk_still_waiting(
    store: Store,
) -> None:
    def waiting(relpath: str, texts: list[str]) -> None:
        with store.write():
            store.put_file(
                record(relpath),
                [chunk(t, line=10 * i + 1) for i, t in enumerate(texts)],
                [None] * len(texts),
            )

    put(store, "done.py", ["alpha", "beta"])
    waiting("a.py", ["gamma one", "delta two"])
    assert [c.text for c, _ in store.unembedded()] == ["gamma one", "delta two"]
    with store.write():
        store.advance_embedded_mark()
    first_waiting = min(c.id for c, _ in store.unembedded())
    assert store.embedded_below == first_waiting  # stops at the first chunk still waiting
    gamma = chunk("gamma one").text_hash
    with store.write():
        store.put_vectors([(gamma, vectors(1, seed=3)[0], None)])
        store.advance_embedded_mark()
    assert [c.text for c, _ in store.unembedded()] == ["delta two"]
    assert store.embedded_below == first_waiting + 1
    delta = chunk("delta two").text_hash
    with store.write():
        store.put_vectors([(delta, vectors(1, seed=4)[0], None)])
        store.advance_embedded_mark()
    assert store.unembedded() == []
    assert store.embedded_below == first_waiting + 2  # past the last chunk
    waiting("b.py", ["epsilon"])  # a new chunk: above the mark, found
    assert [c.text for c, _ in store.unembedded()] == ["epsilon"]
    with store.write():
        store.advance_embedded_mark()
    assert store.embedded_below == first_waiting + 2
