"""Searches while a large index run writes: the daemon's path (``SearchService``: the
``index`` tool's run on its writer thread, searches on the reader thread).

Every file of the repository is rewritten from version one to version two and the
index tool started; searches in every mode run back to back until it ends. Each must
succeed and see each file whole: all of a file's hits from one version, and (checked in
one read transaction between searches) every stored file with all its chunks of one
version. Keyword search finds every file at once; a rewritten file's chunks reach vector
search when their vectors are written, so a vector or hybrid search may find nothing
while none is (the queries' words are in every chunk, too common to count), and finds
every file once the run is done. File writes and checkpoints are made small and frequent
so that the store passes through many mixed states (some files at version two, the rest
at one), which the test requires it to have seen.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from anekit.search import index as index_module
from anekit.search import indexer as indexer_module
from anekit.search.chunk import chunk_file
from anekit.search.server import SearchService

pytestmark = pytest.mark.slow

FILES = 80
FUNCTIONS = 4
VERSIONS = ("version_one", "version_two")
QUERIES = (
    ("which function ledgers the parcel totals", "hybrid"),
    ("ledger parcel", "keyword"),
    ("sum the tariff rows of a parcel", "vector"),
)


def _module(n: int, version: str) -> str:
    parts = []
    for k in range(FUNCTIONS):
        parts.append(
            f"def ledger_parcel_{n}_{k}(rows):\n"
            f'    """Ledger {k} of parcel {n}: sums the tariff rows ({version})."""\n'
            f"    marker = '{version}'\n"
            f"    total = {n}\n"
            "    for row in rows:\n"
            f"        if row % {k + 2} == 0:\n"
            f"            total += row * {k + 1}\n"
            "        elif row < 0:\n"
            f"            total -= row // {k + 2}\n"
            "        else:\n"
            f"            total += {k}\n"
            f"    kept = [row for row in rows if row > {n % 7}]\n"
            f"    return total + len(kept) * {k + 3}\n"
        )
    return "\n\n".join(parts)


def _write(root: Path, version: str) -> None:
    for n in range(FILES):
        (root / f"parcel_{n:03}.py").write_text(_module(n, version))


def _chunks(version: str) -> dict[str, int]:
    """Chunks per file of a clean index of ``version``."""
    return {
        f"parcel_{n:03}.py": len(chunk_file(f"parcel_{n:03}.py", _module(n, version)))
        for n in range(FILES)
    }


def _version(text: str) -> str:
    found = {version for version in VERSIONS if version in text}
    assert len(found) == 1, text
    return found.pop()


CHUNKS = {version: _chunks(version) for version in VERSIONS}
assert min(CHUNKS[VERSIONS[1]].values()) >= 2


def _store_versions(db_path: Path) -> Counter[str]:
    """In one read transaction: every file whole and of one version; files per version
    (and, under "waiting", the chunks still waiting for a vector)."""
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        db.execute("BEGIN")
        rows = db.execute(
            "SELECT f.relpath, c.text, v.chunk_id IS NOT NULL FROM files f "
            "JOIN chunks c ON c.file_id = f.id LEFT JOIN vectors v ON v.chunk_id = c.id"
        ).fetchall()
        db.execute("COMMIT")
    finally:
        db.close()
    per_file: dict[str, set[str]] = {}
    chunks: Counter[str] = Counter()
    waiting = 0
    for relpath, text, has_vector in rows:
        waiting += not has_vector
        per_file.setdefault(relpath, set()).add(_version(text))
        chunks[relpath] += 1
    assert len(per_file) == FILES
    for relpath, versions in per_file.items():
        assert len(versions) == 1, (relpath, versions)
        assert chunks[relpath] == CHUNKS[next(iter(versions))][relpath], relpath
    found = Counter(versions.pop() for versions in per_file.values())
    if waiting:
        found["waiting"] = waiting
    return found


async def _search_until_done(
    service: SearchService, db_path: Path
) -> tuple[dict[str, int], dict[str, Any]]:
    """Search until the index run ends; what the searches saw, and the run's end state."""
    seen = {"searches": 0, "mixed": 0, "empty": 0}
    while True:
        status = await service.call(service.status)
        run = status["roots"][0]["indexing"]
        for query, mode in QUERIES:
            found = await service.call(service.search, query, 20, mode)
            hits = found["hits"]
            assert hits or mode != "keyword", (query, mode)
            seen["empty"] += not hits
            by_path: dict[str, set[str]] = {}
            for hit in hits:
                by_path.setdefault(hit["path"], set()).add(_version(hit["snippet"]))
            assert all(len(versions) == 1 for versions in by_path.values()), by_path
            seen["searches"] += 1
        if {VERSIONS[0], VERSIONS[1]} <= set(_store_versions(db_path)):
            seen["mixed"] += 1
        if run["state"] != "running":
            return seen, run


def test_searches_during_a_large_index_run_all_succeed_and_see_whole_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    _write(root, VERSIONS[0])
    monkeypatch.setenv("ANEKIT_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(indexer_module, "CHECKPOINT_SECONDS", 0.05)
    monkeypatch.setattr(indexer_module, "WRITE_CHUNKS", 8)  # a write every two files
    prepare = index_module.Index._prepare

    def paced(self: index_module.Index, *args: Any) -> Any:
        time.sleep(0.02)  # chunking 80 small files would take a few milliseconds
        return prepare(self, *args)

    monkeypatch.setattr(index_module.Index, "_prepare", paced)
    service = SearchService([root], lanes=["cpu"])
    try:
        first = service.index(budget_seconds=300)
        assert first["state"] == "done", first
        db_path = root / ".anekit" / "store.db"
        assert _store_versions(db_path) == {VERSIONS[0]: FILES}
        time.sleep(0.05)  # a later mtime for every rewritten file
        _write(root, VERSIONS[1])
        started = service.index(budget_seconds=0)
        assert started["state"] == "running", started
        seen, done = asyncio.run(_search_until_done(service, db_path))
        for query, mode in QUERIES:  # done: every mode finds version two
            hits = service.search(query, 20, mode)["hits"]
            assert hits and {_version(hit["snippet"]) for hit in hits} == {VERSIONS[1]}
    finally:
        service.close()
    assert done["state"] == "done", done
    summary = done["summary"]
    assert (summary["indexed"], summary["failed"]) == (FILES, [])
    assert summary["embedded"] == sum(CHUNKS[VERSIONS[1]].values())
    assert _store_versions(db_path) == {VERSIONS[1]: FILES}
    assert seen["searches"] >= 30 and seen["mixed"] >= 3, seen
