"""The vector index: exact cosine search, filters before ranking, and a cache file that is
used only when its stamp matches the store and it reads back whole."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from anekit.search import vectors as vectors_module
from anekit.search.store import ChunkRecord, FileRecord, Store, StoreIdentity, store_dir
from anekit.search.vectors import VECTORS_FILE, IndexStamp, VectorIndex

DIM = 16
IDENTITY = StoreIdentity("mini", "int8", "ts-1", 256, DIM)
STAMP = IndexStamp("test", 1, "id")


def unit(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    out: np.ndarray = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


def reference(
    ids: np.ndarray, vecs: np.ndarray, query: np.ndarray, k: int, allowed: set[int] | None
) -> list[int]:
    """Exact top-k ids by cosine, in float64 over the fp16 vectors."""
    x = vecs.astype(np.float64)
    scores = x @ query.astype(np.float64) / np.linalg.norm(x, axis=1) / np.linalg.norm(query)
    order = np.argsort(-scores, kind="stable")
    return [int(ids[i]) for i in order if allowed is None or int(ids[i]) in allowed][:k]


@pytest.fixture(params=["float32", "int8"])
def index(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> VectorIndex:
    """2,000 rows, scanned first in float32 (a small index) or in int8 (a large one's)."""
    if request.param == "int8":
        monkeypatch.setattr(vectors_module, "FLOAT_SCAN_ROWS", 0)
    ids = np.arange(1, 2001, dtype=np.int64) * 3  # ids are not row numbers
    return VectorIndex(ids, unit(2000, 0).astype(np.float16), STAMP)


def test_a_small_index_scans_in_float32_and_a_large_one_in_int8(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ids = np.arange(1, 101, dtype=np.int64)
    small = VectorIndex(ids, unit(100, 1).astype(np.float16), STAMP)
    small.search(unit(1, 2)[0], 3)
    assert isinstance(small._scan, vectors_module._Float32Scan)
    monkeypatch.setattr(vectors_module, "FLOAT_SCAN_ROWS", 99)
    large = VectorIndex(ids, unit(100, 1).astype(np.float16), STAMP)
    large.search(unit(1, 2)[0], 3)
    assert isinstance(large._scan, vectors_module._Int8Scan)


def test_unfiltered_is_exact(index: VectorIndex) -> None:
    for seed in range(5):
        q = unit(1, 100 + seed)[0]
        got = index.search(q, 10)
        assert [i for i, _ in got] == reference(index.ids, index.vectors, q, 10, None)
        cosines = [c for _, c in got]
        assert cosines == sorted(cosines, reverse=True)
        row = int(np.searchsorted(index.ids, got[0][0]))
        expected = float(index.vectors[row].astype(np.float64) @ q) / float(
            np.linalg.norm(index.vectors[row].astype(np.float64))
        )
        assert cosines[0] == pytest.approx(expected, abs=2e-3)


@pytest.mark.parametrize("fraction", [0.002, 0.05, 0.19, 0.21, 0.5, 0.9, 0.999])
def test_allowed_applies_before_ranking(index: VectorIndex, fraction: float) -> None:
    rng = np.random.default_rng(1)
    pool = index.ids[rng.random(len(index)) < fraction]
    allowed = {int(i) for i in pool} | {10**9, -5}  # ids not in the index are ignored
    for seed in range(3):
        q = unit(1, 200 + seed)[0]
        got = [i for i, _ in index.search(q, 10, allowed)]
        assert got == reference(index.ids, index.vectors, q, 10, allowed)
        assert len(got) == min(10, pool.size)


def test_allowed_far_from_the_query(index: VectorIndex) -> None:
    """A large allowed set whose rows are all far from the query: ranking the whole matrix
    finds too few of them among its best rows and must fall back, not return fewer."""
    q = unit(1, 300)[0]
    scores = index.vectors.astype(np.float32) @ q
    worst = index.ids[np.argsort(scores)[: int(len(index) * 0.6)]]
    allowed = {int(i) for i in worst}
    got = [i for i, _ in index.search(q, 25, allowed)]
    assert got == reference(index.ids, index.vectors, q, 25, allowed)
    assert len(got) == 25


def test_near_ties_are_ranked_in_float32(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows whose int8 scores tie (their cosines differ by less than int8's step) come
    out in float32 order: the first pass only chooses which rows are re-scored."""
    rng = np.random.default_rng(7)
    query = np.zeros(DIM, np.float32)
    query[0] = 1.0
    cosines = [0.9990, 0.9994, 0.9998, 0.9992, 0.9996]
    near = []
    for cosine in cosines:
        side = rng.standard_normal(DIM).astype(np.float32)
        side[0] = 0.0
        side /= np.linalg.norm(side)
        near.append(cosine * query + np.sqrt(1 - cosine**2) * side)
    decoys = unit(500, 8) * np.array([0.0] + [1.0] * (DIM - 1), np.float32)  # orthogonal
    vecs = np.concatenate([np.stack(near), decoys]).astype(np.float16)
    ids = np.arange(1, len(vecs) + 1, dtype=np.int64)
    index = VectorIndex(ids, vecs, STAMP)
    monkeypatch.setattr(vectors_module, "FLOAT_SCAN_ROWS", 0)  # the int8 first pass
    got = index.search(query, 5)
    assert [i for i, _ in got] == [3, 5, 2, 4, 1]  # by cosine, not by id or int8 score
    assert [c for _, c in got] == pytest.approx(sorted(cosines, reverse=True), abs=1e-3)
    scan = vectors_module._Int8Scan(vecs)
    assert len(set(scan.scores(query)[:5].tolist())) < 5, "the int8 scores should tie"


def test_edges(index: VectorIndex) -> None:
    q = unit(1, 5)[0]
    assert index.search(q, 0) == []
    assert index.search(q, 5, set()) == []
    assert index.search(q, 5, {1, 2}) == []  # none of them indexed
    assert len(index.search(q, 10**6)) == len(index)
    assert [i for i, _ in index.search(q, 10**6, {3, 6})] in ([3, 6], [6, 3])
    empty = VectorIndex(np.zeros(0, np.int64), np.zeros((0, DIM), np.float16), STAMP)
    assert empty.search(q, 5) == []
    with pytest.raises(ValueError, match="dimension"):
        index.search(np.ones(DIM + 1), 5)
    with pytest.raises(ValueError, match="zero or not finite"):
        index.search(np.zeros(DIM), 5)
    with pytest.raises(ValueError, match="zero or not finite"):
        index.search(np.full(DIM, np.nan), 5)
    with pytest.raises(ValueError, match="ascending"):
        VectorIndex(np.array([2, 1]), np.ones((2, DIM)), STAMP)
    with pytest.raises(ValueError, match="do not match"):
        VectorIndex(np.array([1, 2]), np.ones((3, DIM)), STAMP)


# -- built from the store, cached on disk ----------------------------------------------------


def put(store: Store, relpath: str, n: int, seed: int) -> None:
    chunks = [
        ChunkRecord(i + 1, i + 1, f"{relpath} {i}", "", "code", hashlib.sha256(b"x").hexdigest())
        for i in range(n)
    ]
    with store.write():
        store.put_file(FileRecord(relpath, 1, 1, "0" * 64, "python"), chunks, unit(n, seed))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(store_dir(tmp_path)) as s:
        s.ensure_identity(IDENTITY)
        put(s, "a.py", 30, 1)
        put(s, "b.py", 20, 2)
        yield s


def count_builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = Store.vector_matrix

    def counted(self: Store) -> tuple[np.ndarray, np.ndarray]:
        calls.append(1)
        return real(self)

    monkeypatch.setattr(Store, "vector_matrix", counted)
    return calls


def test_open_builds_saves_then_loads(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    builds = count_builds(monkeypatch)
    first = VectorIndex.open(store)
    assert (store.directory / VECTORS_FILE).is_file()
    assert len(builds) == 1
    again = VectorIndex.open(store)
    assert len(builds) == 1  # from the file
    np.testing.assert_array_equal(again.ids, first.ids)
    np.testing.assert_array_equal(again.vectors, first.vectors)
    ids, vecs = store.vector_matrix()
    np.testing.assert_array_equal(again.ids, ids)
    np.testing.assert_array_equal(again.vectors, vecs)
    assert again.generation == store.generation
    assert again.is_current(store)
    q = unit(1, 9)[0]
    assert again.search(q, 5) == first.search(q, 5)


def test_stale_index_is_rebuilt(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    old = VectorIndex.open(store)
    put(store, "c.py", 5, 3)
    assert not old.is_current(store)
    builds = count_builds(monkeypatch)
    new = old.refresh(store)
    assert len(builds) == 1
    assert len(new) == 55
    assert new.is_current(store)
    assert new.refresh(store) is new
    # a file put again: its old ids are gone from the rebuilt index
    put(store, "a.py", 2, 4)
    newest = VectorIndex.open(store)
    assert len(newest) == 27
    assert not set(old.ids.tolist()[:30]) & set(newest.ids.tolist())


def test_identity_change_is_not_mixed(store: Store) -> None:
    VectorIndex.open(store)
    store.ensure_identity(StoreIdentity("other", "fp16", "ts-1", 256, DIM))
    assert len(VectorIndex.open(store)) == 0


def test_recreated_store_does_not_reuse_the_file(tmp_path: Path) -> None:
    """A deleted and recreated store can reach the same generation; its id tells them apart."""
    directory = store_dir(tmp_path)
    with Store(directory) as s:
        s.ensure_identity(IDENTITY)
        put(s, "a.py", 3, 1)
        VectorIndex.open(s)
    cached = (directory / VECTORS_FILE).read_bytes()
    for name in ("store.db", "store.db-wal", "store.db-shm"):
        (directory / name).unlink(missing_ok=True)
    with Store(directory) as s:
        s.ensure_identity(IDENTITY)
        put(s, "b.py", 4, 2)
        (directory / VECTORS_FILE).write_bytes(cached)
        index = VectorIndex.open(s)
        np.testing.assert_array_equal(index.ids, s.vector_matrix()[0])
        assert len(index) == 4


def _corruptions(data: bytes) -> dict[str, bytes]:
    payload_at = len(data) - 50 * 8 - 50 * DIM * 2
    flipped = bytearray(data)
    flipped[-7] ^= 0x40
    flipped_id = bytearray(data)
    flipped_id[payload_at + 3] ^= 0x01
    header = bytearray(data)
    header[14] = ord("{")
    return {
        "empty": b"",
        "magic": b"XXXXXXXX" + data[8:],
        "truncated": data[:-3],
        "too long": data + b"\0",
        "header only": data[:payload_at],
        "vector byte flipped": bytes(flipped),
        "id byte flipped": bytes(flipped_id),
        "bad header": bytes(header),
        "huge header length": data[:8] + b"\xff\xff\xff\x7f" + data[12:],
        "garbage": bytes(range(256)) * 10,
    }


@pytest.mark.parametrize("case", list(_corruptions(b"\0" * 4000)))
def test_unreadable_file_is_rebuilt(
    store: Store, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    VectorIndex.open(store)
    path = store.directory / VECTORS_FILE
    path.write_bytes(_corruptions(path.read_bytes())[case])
    builds = count_builds(monkeypatch)
    index = VectorIndex.open(store)
    assert len(builds) == 1
    ids, vecs = store.vector_matrix()
    np.testing.assert_array_equal(index.ids, ids)
    np.testing.assert_array_equal(index.vectors, vecs)
    assert VectorIndex.load(path, IndexStamp.of(store)) is not None  # rewritten whole


def test_a_failed_save_still_gives_an_index(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: VectorIndex, path: Path) -> None:
        raise PermissionError("read-only")

    monkeypatch.setattr(VectorIndex, "save", refuse)
    assert len(VectorIndex.open(store)) == 50
    assert not (store.directory / VECTORS_FILE).exists()


def test_save_is_atomic_and_cleans_old_temporaries(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = store.directory / f".{VECTORS_FILE}-dead.tmp"
    stale.write_bytes(b"left by a killed save")
    monkeypatch.setattr(vectors_module, "_STALE_TEMP_S", -1.0)
    VectorIndex.open(store)
    assert not stale.exists()
    assert [p.name for p in store.directory.glob(f".{VECTORS_FILE}-*")] == []
