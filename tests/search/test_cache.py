"""The machine-wide vector cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from anekit.search.cache import VectorCache, cache_key


def _vector(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(8).astype(np.float16)


def test_vectors_come_back_by_model_and_text(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path / "vectors.db")
    int8, fp16 = cache_key("minilm|int8|1|256", "abc"), cache_key("minilm|fp16|1|256", "abc")
    cache.put([(int8, _vector(1))])
    found = cache.get([int8, fp16], 8)
    assert list(found) == [int8]  # another variant of the same text is another vector
    assert np.array_equal(found[int8], _vector(1))
    assert (cache.hits, cache.misses) == (1, 1)
    cache.close()
    again = VectorCache(tmp_path / "vectors.db")  # another process, later
    assert np.array_equal(again.get([int8], 8)[int8], _vector(1))


def test_a_vector_of_another_dimension_is_not_served(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path / "vectors.db")
    key = cache_key("m", "t")
    cache.put([(key, _vector(2))])
    assert cache.get([key], 384) == {}


def test_the_least_recently_used_vectors_go_past_the_cap(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path / "vectors.db", max_bytes=(16 + 64) * 3)  # three vectors
    keys = [cache_key("m", str(index)) for index in range(5)]
    for index, key in enumerate(keys):
        cache.put([(key, _vector(index))])
    assert sorted(cache.get(keys, 8)) == sorted(keys[2:])


def test_an_unreadable_cache_is_set_aside_and_started_afresh(tmp_path: Path) -> None:
    path = tmp_path / "vectors.db"
    path.write_bytes(b"this is not an SQLite database" * 100)
    cache = VectorCache(path)
    key = cache_key("m", "t")
    assert cache.get([key], 8) == {}
    cache.put([(key, _vector(3))])
    assert np.array_equal(cache.get([key], 8)[key], _vector(3))
    assert (tmp_path / "vectors.db.bad").read_bytes().startswith(b"this is not")
