"""The approximate vector index of a large store: built by the writer above a size, mapped
by readers, changes searchable at once through the vector log, folded in by merges, and
every bad file (truncated, damaged, another store's, a full disk) reported and rebuilt."""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from anekit.search import ann
from anekit.search.ann import (
    ANN_STAMP,
    AnnIndex,
    AnnStamp,
    AnnUnusable,
    ExactFallback,
    maintain,
    open_vectors,
)
from anekit.search.store import ChunkRecord, FileRecord, Store, StoreIdentity, store_dir
from anekit.search.vectors import VectorIndex

DIM = 32
IDENTITY = StoreIdentity("mini", "int8", "ts-1", 256, DIM)


def unit(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    out: np.ndarray = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


def put(store: Store, relpath: str, vectors: np.ndarray) -> list[int]:
    """Store a file with one chunk per vector; the chunk ids."""
    chunks = [
        ChunkRecord(i + 1, i + 1, f"{relpath} {i}", "", "code", hashlib.sha256(b"x").hexdigest())
        for i in range(len(vectors))
    ]
    with store.write():
        store.put_file(FileRecord(relpath, 1, 1, "0" * 64, "python"), chunks, vectors)
    return _ids(store, relpath)


def _ids(store: Store, relpath: str) -> list[int]:
    rows = store._conn.execute(
        "SELECT c.id FROM chunks c JOIN files f ON f.id = c.file_id WHERE f.relpath = ? "
        "ORDER BY c.id",
        (relpath,),
    )
    return [row[0] for row in rows]


def exact(store: Store, query: np.ndarray, k: int, allowed: set[int] | None = None) -> list[int]:
    """The exact top-k chunk ids by cosine over the fp16 vectors, in float64."""
    ids, vectors = store.vector_matrix()
    x = vectors.astype(np.float64)
    scores = x @ query.astype(np.float64) / np.linalg.norm(x, axis=1)
    order = np.lexsort((ids, -scores))
    return [int(ids[i]) for i in order if allowed is None or int(ids[i]) in allowed][:k]


@pytest.fixture
def small_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    """A graph for stores of 100 chunks or more; merges after 50 changes."""
    monkeypatch.setattr(ann, "MIN_ROWS", 100)
    monkeypatch.setattr(ann, "MERGE_CHANGES", 50)


class _ExactGraph:
    """A mapped graph whose searches are usearch's exact (brute-force) ones: the tests of
    masking, merging and filtering then do not depend on the graph's recall, which a
    multi-threaded build makes vary from run to run (test_the_graph_recalls_... checks it)."""

    def __init__(self, graph: object) -> None:
        self._graph = graph

    def search(self, query: np.ndarray, count: int, threads: int = 0) -> object:
        return self._graph.search(query, count, threads=threads, exact=True)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._graph, name)


@pytest.fixture
def exact_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    real = ann._map
    monkeypatch.setattr(ann, "_map", lambda path, stamp: _ExactGraph(real(path, stamp)))


@pytest.fixture
def store(tmp_path: Path, small_threshold: None, exact_graph: None) -> Iterator[Store]:
    """600 chunks in 6 files, the graph built."""
    with Store(store_dir(tmp_path)) as s:
        s.ensure_identity(IDENTITY)
        for number in range(6):
            put(s, f"f{number}.py", unit(100, number))
        done = maintain(s, s.chunk_count())
        assert done is not None and done.startswith("built (none yet)")
        yield s


def graph_files(store: Store) -> list[str]:
    return sorted(path.name for path in store.directory.glob("vectors-*.usearch"))


def test_the_writer_builds_a_stamped_graph_above_the_size_and_none_below(
    tmp_path: Path, small_threshold: None
) -> None:
    with Store(store_dir(tmp_path)) as s:
        s.ensure_identity(IDENTITY)
        put(s, "a.py", unit(99, 1))
        assert maintain(s, s.chunk_count()) is None  # 99 < 100: exact search, no files
        assert graph_files(s) == [] and not (s.directory / ANN_STAMP).exists()
        assert s.vector_log_count(0) == 0  # the log is not kept for a small store
        put(s, "b.py", unit(1, 2))
        assert str(maintain(s, s.chunk_count())).startswith("built")
        stamp = AnnStamp.read(s.directory)
        assert stamp is not None
        assert (stamp.store_id, stamp.identity, stamp.count) == (s.store_id, IDENTITY.key(), 100)
        assert graph_files(s) == [stamp.file]
        assert s.ann_seq == stamp.log_seq == s.vector_log_end()
        assert s.vector_log_count(0) == 0  # folded in: trimmed
        with s.write():
            s.remove_file("a.py")
        assert maintain(s, s.chunk_count()) == "removed (the store is small: exact search)"
        assert graph_files(s) == [] and not (s.directory / ANN_STAMP).exists()


def test_the_graph_recalls_the_exact_top_ten(tmp_path: Path, small_threshold: None) -> None:
    """The real graph (no exact search): 1,000 vectors in 50 clusters, as embeddings
    cluster; a graph that lost its keys or vectors would recall next to nothing."""
    rng = np.random.default_rng(5)
    centres = unit(50, 3)
    rows = centres[rng.integers(0, 50, 1000)] + rng.standard_normal((1000, DIM)) * 0.05
    with Store(store_dir(tmp_path)) as s:
        s.ensure_identity(IDENTITY)
        put(s, "a.py", rows.astype(np.float32))
        maintain(s, s.chunk_count())
        index = open_vectors(s)
        assert isinstance(index, AnnIndex) and not isinstance(index.graph, _ExactGraph)
        recalls = []
        for seed in range(20):
            query = rows[seed * 7] + np.random.default_rng(seed).standard_normal(DIM) * 0.05
            found = {i for i, _ in index.search(query, 10, store=s)}
            recalls.append(len(found & set(exact(s, query, 10))) / 10)
        assert np.mean(recalls) >= 0.9


def test_searches_find_the_exact_top_ten(store: Store) -> None:
    index = open_vectors(store)
    assert isinstance(index, AnnIndex) and len(index) == 600
    for seed in range(10):
        query = unit(1, 1000 + seed)[0]
        got = index.search(query, 10, store=store)
        assert [i for i, _ in got] == exact(store, query, 10)
        _, vectors = store.vectors_of([got[0][0]])
        expected = float(vectors[0].astype(np.float32) @ query) / float(
            np.linalg.norm(vectors[0].astype(np.float32))
        )
        assert got[0][1] == pytest.approx(expected, abs=1e-6)  # re-scored exactly


def test_filters_are_exact_small_or_large(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    allowed = set(_ids(store, "f2.py")) | set(_ids(store, "f4.py"))
    index = open_vectors(store)
    query = unit(1, 77)[0]
    small = index.search(query, 10, allowed, store=store)
    assert [i for i, _ in small] == exact(store, query, 10, allowed)
    monkeypatch.setattr(ann, "EXACT_ALLOWED", 0)  # through the graph, filtered
    calls: list[int] = []
    monkeypatch.setattr(index, "graph", _Spy(index.graph, calls))
    large = index.search(query, 10, allowed, store=store)
    assert calls and calls[0] >= 64 * 3  # a third of the rows allowed: three times the count
    assert [i for i, _ in large] == exact(store, query, 10, allowed)


def test_a_search_begun_on_another_thread_finishes_as_one_search(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """first_pass asks the graph (it takes no store: nothing is read from one) on any
    thread; the function it gives re-scores from the store, as search does: with chunks
    changed since the graph was built, a narrow filter (exact, from the store) and a wide
    one (through the graph)."""
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(ann, "MERGE_CHANGES", 1000)
    query = unit(1, 31)[0]
    added = put(store, "new.py", np.stack([query, unit(1, 32)[0]]))
    index = open_vectors(store)
    assert isinstance(index, AnnIndex)
    calls: list[int] = []
    monkeypatch.setattr(index, "graph", _Spy(index.graph, calls))
    wide = set(_ids(store, "f1.py")) | set(_ids(store, "f5.py")) | set(added)
    cases = [(None, 20_000, True), (set(_ids(store, "f2.py")), 20_000, False), (wide, 0, True)]
    with ThreadPoolExecutor(1) as pool:
        for allowed, exact_allowed, through_graph in cases:
            monkeypatch.setattr(ann, "EXACT_ALLOWED", exact_allowed)
            calls.clear()
            finish = pool.submit(index.first_pass, query, 10, allowed).result()
            assert bool(calls) == through_graph
            asked = list(calls)
            got = finish(store)
            assert calls == asked  # the store's part asks the graph nothing
            assert got == index.search(query, 10, allowed, store=store)
            assert [i for i, _ in got] == exact(store, query, 10, allowed)
            if allowed is None or added[0] in allowed:
                assert got[0][0] == added[0]  # a change since the graph, scored exactly


class _Spy:
    """A graph that records the counts asked of it."""

    def __init__(self, graph: object, calls: list[int]) -> None:
        self._graph, self._calls = graph, calls

    def search(self, query: np.ndarray, count: int, threads: int = 0) -> object:
        self._calls.append(count)
        return self._graph.search(query, count, threads=threads)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._graph, name)


def test_a_change_is_searchable_at_once_without_a_new_graph(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ann, "MERGE_CHANGES", 1000)
    reader = open_vectors(store)
    before = graph_files(store)
    query = unit(1, 4242)[0]
    added = put(store, "new.py", np.stack([query, unit(1, 5)[0]]))
    with store.write():
        store.remove_file("f3.py")
    gone = set(_ids(store, "f3.py"))
    assert not gone
    assert maintain(store, store.chunk_count()) is None  # 102 changes: under 1000
    assert graph_files(store) == before
    assert not reader.is_current(store)
    caught = open_vectors(store, reader)
    assert caught is reader  # caught up, not reopened
    got = caught.search(query, 10, store=store)
    assert got[0] == (added[0], pytest.approx(1.0, abs=1e-3))
    assert [i for i, _ in got] == exact(store, query, 10)
    assert len(caught) == 600 - 100 + 2


def test_changes_are_folded_into_a_new_graph_and_readers_move_to_it(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ann, "MAX_REMOVED_SHARE", 2.0)
    reader = open_vectors(store)
    old = graph_files(store)
    for number in range(3):
        put(store, f"f{number}.py", unit(100, 50 + number))  # 600 log rows: replaced chunks
    done = maintain(store, store.chunk_count())
    assert done is not None and done.startswith("caught up (600 changes)")
    new = graph_files(store)
    assert new != old and len(new) == 1
    assert store.vector_log_count(store.ann_seq) == 0
    assert reader.refresh(store) is None  # the graph it maps was replaced
    moved = open_vectors(store, reader)
    assert isinstance(moved, AnnIndex) and moved is not reader and moved.changed == 0
    for seed in range(5):
        query = unit(1, 3000 + seed)[0]
        assert [i for i, _ in moved.search(query, 10, store=store)] == exact(store, query, 10)
    # the old reader's map stays valid after the unlink: it still answers
    assert len(reader.search(unit(1, 9)[0], 5, store=store)) == 5


def test_many_removed_nodes_make_a_new_graph_not_a_merge(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ann, "MAX_REMOVED_SHARE", 0.1)
    for number in range(2):
        put(store, f"f{number}.py", unit(100, 60 + number))
    done = maintain(store, store.chunk_count())
    assert done is not None and done.startswith("rebuilt (400 changes)")
    stamp = AnnStamp.read(store.directory)
    assert stamp is not None and stamp.removed == 0


@pytest.mark.parametrize("fault", ["truncated", "flipped", "another store", "stamp garbage"])
def test_a_bad_graph_is_reported_searched_exactly_and_rebuilt(
    store: Store, tmp_path: Path, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    stamp = AnnStamp.read(store.directory)
    assert stamp is not None
    path = store.directory / stamp.file
    if fault == "truncated":
        path.write_bytes(path.read_bytes()[:-100])
        why = "bytes, its stamp says"
    elif fault == "flipped":
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
        why = "CRC-32"
    elif fault == "another store":
        with Store(tmp_path / "other") as other:
            other.ensure_identity(IDENTITY)
            put(other, "x.py", unit(150, 9))
            maintain(other, other.chunk_count())
            theirs = AnnStamp.read(other.directory)
            assert theirs is not None
            shutil.copy(other.directory / theirs.file, store.directory / theirs.file)
            shutil.copy(other.directory / ANN_STAMP, store.directory / ANN_STAMP)
        why = "another store"
    else:
        (store.directory / ANN_STAMP).write_text("{not json")
        why = "malformed"
    with pytest.raises(AnnUnusable, match=why):
        AnnIndex.open(store)
    with caplog.at_level(logging.WARNING, logger="anekit.search.ann"):
        fallback = open_vectors(store)
    assert isinstance(fallback, ExactFallback) and fallback.is_current(store)
    assert "unusable" in caplog.text and why in caplog.text
    assert not (store.directory / "vectors.f16").exists()  # a large store's matrix not saved
    query = unit(1, 11)[0]
    assert [i for i, _ in fallback.search(query, 10)] == exact(store, query, 10)
    put(store, "later.py", unit(1, 12))  # a write meanwhile: still exact, still not saved
    again = open_vectors(store, fallback)
    assert isinstance(again, ExactFallback) and len(again) == 601
    assert not (store.directory / "vectors.f16").exists()
    done = maintain(store, store.chunk_count())
    assert done is not None and done.startswith("built (")
    assert not again.is_current(store)  # a new stamp: the graph is tried again
    rebuilt = open_vectors(store, again)
    assert isinstance(rebuilt, AnnIndex)
    assert [i for i, _ in rebuilt.search(query, 10, store=store)] == exact(store, query, 10)


def test_a_full_disk_during_a_build_leaves_the_store_whole_and_the_next_run_finishes(
    tmp_path: Path,
    small_threshold: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    Index = ann.usearch_index()

    with Store(store_dir(tmp_path)) as s:
        s.ensure_identity(IDENTITY)
        put(s, "a.py", unit(150, 1))
        real_save = Index.save

        def full(self: object, path: object = None, progress: object = None) -> None:
            Path(str(path)).write_bytes(b"partial")
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(Index, "save", full)
        with caplog.at_level(logging.WARNING, logger="anekit.search.ann"):
            assert maintain(s, s.chunk_count()) is None
        assert "No space left on device" in caplog.text and "the store is whole" in caplog.text
        assert sorted(p.name for p in s.directory.iterdir() if "usearch" in p.name) == []
        assert not (s.directory / ANN_STAMP).exists()
        assert s.check() == "ok" and s.chunk_count() == 150
        assert s.vector_log_count(0) == 150  # nothing trimmed: the next build needs nothing
        monkeypatch.setattr(Index, "save", real_save)
        assert str(maintain(s, s.chunk_count())).startswith("built")
        assert isinstance(open_vectors(s), AnnIndex)


def test_a_store_of_schema_two_gains_the_vector_log(tmp_path: Path) -> None:
    directory = store_dir(tmp_path)
    with Store(directory) as s:
        s.ensure_identity(IDENTITY)
    conn = sqlite3.connect(directory / "store.db")
    for trigger in ("insert", "update", "delete"):
        conn.execute(f"DROP TRIGGER vectors_log_{trigger}")
    conn.execute("DROP TABLE vector_log")
    conn.execute("PRAGMA user_version = 2")
    conn.commit()
    conn.close()
    with Store(directory) as s:
        ids = put(s, "a.py", unit(3, 1))
        assert s.vector_log_since(0)[1] == ids
        with s.write():
            s.remove_file("a.py")
        assert s.vector_log_since(0)[1] == ids  # each id once, however often it changed
        assert s.vector_log_count(0) == 6


def test_the_stamp_names_what_it_was_built_from(store: Store) -> None:
    raw = json.loads((store.directory / ANN_STAMP).read_text())
    assert set(raw) >= {"store_id", "identity", "log_seq", "count", "file", "size", "crc32"}
    assert raw["size"] == (store.directory / raw["file"]).stat().st_size


def test_a_store_that_grows_past_the_size_loses_its_exact_matrix(
    tmp_path: Path, small_threshold: None
) -> None:
    with Store(store_dir(tmp_path)) as s:
        s.ensure_identity(IDENTITY)
        put(s, "a.py", unit(50, 1))
        assert isinstance(open_vectors(s), VectorIndex)
        assert (s.directory / "vectors.f16").exists()  # a small store's matrix, saved
        put(s, "b.py", unit(60, 2))
        assert str(maintain(s, s.chunk_count())).startswith("built")
        assert not (s.directory / "vectors.f16").exists()


def test_a_graph_of_no_vectors_answers_from_the_changes_only(
    tmp_path: Path, small_threshold: None
) -> None:
    """Chunks written, none embedded yet (a first run stopped): the graph is empty."""
    with Store(store_dir(tmp_path)) as s:
        s.ensure_identity(IDENTITY)
        chunks = [
            ChunkRecord(i + 1, i + 1, f"t {i}", "", "code", hashlib.sha256(b"x").hexdigest())
            for i in range(120)
        ]
        with s.write():
            s.put_file(FileRecord("a.py", 1, 1, "0" * 64, "python"), chunks, [None] * 120)
        assert str(maintain(s, s.chunk_count())).startswith("built")
        index = open_vectors(s)
        assert isinstance(index, AnnIndex) and index.stamp.count == 0
        assert index.search(unit(1, 1)[0], 10, store=s) == []
        added = put(s, "b.py", unit(3, 2))
        caught = open_vectors(s, index)
        assert {i for i, _ in caught.search(unit(1, 1)[0], 10, store=s)} == set(added)


def test_a_narrow_filter_far_from_the_query_still_finds_its_chunks(
    tmp_path: Path, small_threshold: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real graph: the allowed chunks are all unlike the query, so none is among its
    first neighbours; the search looks wider, then exactly, and returns the best of them."""
    monkeypatch.setattr(ann, "EXACT_ALLOWED", 10)  # through the graph
    rng = np.random.default_rng(8)
    near = unit(1, 20)[0]
    close = near + rng.standard_normal((900, DIM)) * 0.1  # like the query
    far = -near + rng.standard_normal((100, DIM)) * 0.1  # the filter's: opposite
    with Store(store_dir(tmp_path)) as s:
        s.ensure_identity(IDENTITY)
        put(s, "close.py", close.astype(np.float32))
        allowed = set(put(s, "docs.py", far.astype(np.float32)))
        maintain(s, s.chunk_count())
        index = open_vectors(s)
        assert isinstance(index, AnnIndex)
        got = index.search(near, 10, allowed, store=s)
        assert [i for i, _ in got] == exact(s, near, 10, allowed)


def test_a_vector_replaced_in_place_is_scored_by_its_new_value(store: Store) -> None:
    """A stand-in's vector replaced where it is (same chunk id): the graph's old vector is
    masked, the new one scored; a masked id that no longer exists is never returned."""
    index = open_vectors(store)
    chunk_id = _ids(store, "f1.py")[0]
    query = unit(1, 999)[0]
    assert chunk_id not in [i for i, _ in index.search(query, 10, store=store)]
    with store.write():
        store._conn.execute(
            "UPDATE vectors SET vector = ? WHERE chunk_id = ?",
            (query.astype("<f2").tobytes(), chunk_id),
        )
        store._changed = True
    caught = open_vectors(store, index)
    assert caught is index and chunk_id in index._state[0]
    assert caught.search(query, 1, store=store)[0][0] == chunk_id
    with store.write():  # back to a vector far from the query: the graph's copy is not used
        store._conn.execute(
            "UPDATE vectors SET vector = ? WHERE chunk_id = ?",
            ((-query).astype("<f2").tobytes(), chunk_id),
        )
        store._changed = True
    again = open_vectors(store, caught)
    assert chunk_id not in [i for i, _ in again.search(query, 50, store=store)]
    # moved a little: the graph's old copy and the new vector both match a query near it;
    # the chunk is found once, by its new vector
    ids, vectors = store.vectors_of([_ids(store, "f2.py")[0]])
    near = vectors[0].astype(np.float32)
    with store.write():
        store._conn.execute(
            "UPDATE vectors SET vector = ? WHERE chunk_id = ?",
            ((near + 0.01).astype("<f2").tobytes(), int(ids[0])),
        )
        store._changed = True
    found = [i for i, _ in open_vectors(store, again).search(near, 20, store=store)]
    assert found[0] == int(ids[0]) and len(found) == len(set(found))


def test_a_writer_that_died_before_trimming_is_finished_by_the_next(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ann, "MAX_REMOVED_SHARE", 2.0)
    put(store, "f0.py", unit(100, 70))  # 200 changes: a merge is due
    real = Store.trim_vector_log

    def killed(self: Store, seq: int) -> None:
        raise KeyboardInterrupt  # the writer dies after writing the stamp

    monkeypatch.setattr(Store, "trim_vector_log", killed)
    with pytest.raises(KeyboardInterrupt):
        maintain(store, store.chunk_count())
    monkeypatch.setattr(Store, "trim_vector_log", real)
    stamp = AnnStamp.read(store.directory)
    assert stamp is not None and stamp.log_seq > store.ann_seq
    assert len(graph_files(store)) == 2  # the old graph is still there
    reader = open_vectors(store)  # readers use the new graph meanwhile
    assert isinstance(reader, AnnIndex) and reader.stamp == stamp
    assert maintain(store, store.chunk_count()) is None  # nothing due: only finished
    assert store.ann_seq == stamp.log_seq and store.vector_log_count(0) == 0
    assert graph_files(store) == [stamp.file]


@pytest.mark.parametrize(
    "change", [{"log_seq": None}, {"count": "many"}, {"file": "../../etc/passwd"}, {"size": -1}]
)
def test_a_stamp_of_wrong_types_is_unusable_not_a_crash(
    store: Store, change: dict[str, object]
) -> None:
    raw = json.loads((store.directory / ANN_STAMP).read_text())
    (store.directory / ANN_STAMP).write_text(json.dumps({**raw, **change}))
    with pytest.raises(AnnUnusable, match="malformed"):
        AnnIndex.open(store)
    assert isinstance(open_vectors(store), ExactFallback)
    assert str(maintain(store, store.chunk_count())).startswith("built (")


def test_a_new_model_empties_the_log_and_the_graph_is_built_anew(store: Store) -> None:
    other = StoreIdentity("other", "int8", "ts-1", 256, DIM)
    store.ensure_identity(other)
    assert store.vector_log_count(0) == 0  # not one row per vector deleted
    put(store, "a.py", unit(120, 3))
    done = maintain(store, store.chunk_count())
    assert done is not None and "another store or model" in done
    index = open_vectors(store)
    assert isinstance(index, AnnIndex) and len(index) == 120


def test_a_stamp_replaced_while_a_reader_opens_is_read_again(
    store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A merge publishes between the reader's read of the stamp and its map of the file
    (the old file unlinked): the reader reads the new stamp, not exact search."""
    monkeypatch.setattr(ann, "MAX_REMOVED_SHARE", 2.0)
    put(store, "f0.py", unit(100, 71))
    real = AnnIndex.open.__func__  # type: ignore[attr-defined]
    calls: list[int] = []

    def racing(cls: type[AnnIndex], s: Store) -> AnnIndex:
        if not calls:
            calls.append(1)
            maintain(s, s.chunk_count())  # the writer merges right now
            raise AnnUnusable("vectors-old.usearch unreadable: gone")
        return real(cls, s)  # type: ignore[no-any-return]

    monkeypatch.setattr(AnnIndex, "open", classmethod(racing))
    with caplog.at_level(logging.WARNING, logger="anekit.search.ann"):
        index = open_vectors(store)
    assert isinstance(index, AnnIndex) and "unusable" not in caplog.text


def test_a_process_that_builds_a_graph_can_load_a_query_model_after() -> None:
    """usearch's module before onnxruntime's crashes the process (SIGSEGV): ann imports
    onnxruntime first, so a writer that builds a graph and then searches lives on."""
    import subprocess
    import sys

    code = "from anekit.search import ann; ann.usearch_index(); import onnxruntime; print('ok')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr[-400:]


def test_the_graph_checked_in_the_background_is_not_read_again(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    ann._checked.clear()
    reads: list[str] = []
    real_open = open

    def counting(path: object, *args: object, **kwargs: object) -> object:
        if str(path).endswith(".usearch"):
            reads.append(str(path))
        return real_open(path, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr("builtins.open", counting)
    ann.check_in_background(store.directory)
    index = AnnIndex.open(store)  # waits for the thread's read, or finds it done
    assert len(reads) == 1 and len(index) == 600
