"""Crash safety of indexing: a real ``Index.update`` process (with its CPU lane workers)
killed with SIGKILL while it chunks (nothing written), right after a checkpoint of
vectors, in the middle of one and after the last write, then resumed.

After each kill the store passes SQLite's and FTS5's integrity checks, holds no duplicate
chunk, and each file in it is exactly as a clean index has it (never half written), its
vectors those of a clean index where it has them (a chunk may wait for its vector); no
worker is left running. The next run indexes only the files that were missing, embeds
only what neither the store nor the machine cache holds, and ends equal to a clean index
of the same files (the same chunks, vectors within int8 batch noise, the same top hits).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from anekit.search import index as index_module
from anekit.search import indexer as indexer_module
from anekit.search.cache import VectorCache, cache_key
from anekit.search.index import Index, IndexSummary
from generated_repo import (
    FILES,
    Snapshot,
    assert_like_clean,
    checked_store,
    write_repo,
)

#: The killed runs' checkpoint interval (the default, 30 s, would give one checkpoint).
CHECKPOINT_SECONDS = 0.4
#: The killed runs wait this long as each file is chunked, and a tenth of it as each
#: vector is made (so each run chunks for ~2 s and has several checkpoints, however fast
#: the machine embeds).
PACE_SECONDS = 0.03
QUERIES = (
    "audit_raven_parcel_17_2",
    "which guide archives willow records from the zephyr ledger",
    "keep the tallied saffron tariff items up to the limit",
)

# The indexing process: argv is root, hook, cache (on/off), checkpoint seconds, report file.
# The hook "in-checkpoint" kills the process group (this process and its lane workers) in the
# first checkpoint of vectors after one was committed, once half its vectors are inserted,
# after writing the text hashes of the checkpoint's vectors to the report file. "hold" waits
# once the update is done, for the poller to kill it. Every run is paced (PACE_SECONDS).
RUNNER = """
import json, os, signal, sys, time
from anekit.search import index, indexer
from anekit.search.store import Store

root, hook, cache, report = sys.argv[1], sys.argv[2], sys.argv[3] == "on", sys.argv[5]
indexer.CHECKPOINT_SECONDS = float(sys.argv[4])
PACE = float(sys.argv[6])
flushes, dying = 0, False

prepare = index.Index._prepare
def paced_prepare(self, *args):
    time.sleep(PACE)
    return prepare(self, *args)
index.Index._prepare = paced_prepare

add = index._Writer.add
def paced_add(self, *args):
    time.sleep(PACE / 10)
    return add(self, *args)
index._Writer.add = paced_add

flush = index._Writer.flush
def hooked_flush(self):
    global flushes, dying
    if hook == "in-checkpoint" and flushes and self.pending:
        with open(report, "w") as out:
            json.dump([text_hash for text_hash, _, _ in self.pending], out)
        dying = True
    flush(self)
    flushes += 1
index._Writer.flush = hooked_flush

put_vectors = Store.put_vectors
def hooked_put_vectors(self, items):
    if dying:
        put_vectors(self, items[: max(1, len(items) // 2)])
        os.killpg(0, signal.SIGKILL)
    return put_vectors(self, items)
Store.put_vectors = hooked_put_vectors

index.Index(root, lanes=["cpu"], cache=cache).update()
if hook == "hold":
    time.sleep(600)
"""

Span = tuple[str, int, int]  # relpath, start line, end line


@dataclass(frozen=True)
class Clean:
    """A clean index of the repository: its snapshot and its top hit for each query."""

    source: Path
    snapshot: Snapshot
    top: dict[str, str]


def _store_path(root: Path) -> Path:
    return root / ".anekit" / "store.db"


def _top_hits(index: Index) -> dict[str, str]:
    """Each query's first hit's file. Not its chunk: each generated module holds four
    near-identical functions, and int8 vectors move a little with the rows they were
    embedded beside (ONNX Runtime scales a batch's activations at once; cosine about
    0.995), so which sibling comes first may differ between two clean runs that group
    chunks differently (the vectors themselves are checked by _assert_like_clean)."""
    return {query: index.search(query, k=3)[0].path for query in QUERIES}


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Clean:
    """The repository, and a clean index of a copy of it (no machine cache)."""
    source = tmp_path_factory.mktemp("source")
    write_repo(source)
    root = tmp_path_factory.mktemp("clean")
    shutil.copytree(source, root, dirs_exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ANEKIT_HOME", str(tmp_path_factory.mktemp("clean-home")))
        patch.delenv("ANEKIT_STORE", raising=False)
        with Index(root, lanes=["cpu"], cache=False) as index:
            summary = index.update()
            top = _top_hits(index)
    assert (summary.indexed, summary.embedded, summary.failed) == (FILES, summary.chunks, {})
    snapshot = checked_store(_store_path(root))
    assert len(snapshot.files) == FILES and len(set(snapshot.chunks.values())) > 3 * FILES
    return Clean(source, snapshot, top)


@dataclass
class Watch:
    """What the poller saw of a running indexer: the store's counts as they changed (time,
    counts; -1s before the store has its tables) and the processes under it."""

    started: float
    counts: list[tuple[float, Counts]]
    workers: set[int]


@dataclass(frozen=True)
class Counts:
    files: int
    chunks: int
    vectors: int


def _counts(db_path: Path) -> Counts:
    try:
        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=1)
    except sqlite3.Error:
        return Counts(-1, -1, -1)
    try:
        files, chunks, vectors = (
            int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
            for table in ("files", "chunks", "vectors")
        )
        return Counts(files, chunks, vectors)
    except sqlite3.Error:
        return Counts(-1, -1, -1)
    finally:
        db.close()


def _file_count(db_path: Path) -> int:
    return _counts(db_path).files


def _descendants(pid: int) -> set[int]:
    found: set[int] = set()
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
        for task in tasks:
            for child in (task / "children").read_text().split():
                found |= {int(child)} | _descendants(int(child))
    except OSError:
        pass  # gone meanwhile
    return found


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


# When the poller kills the indexer, given what it saw and the time now; None: it dies alone.
Killer = Callable[[Watch, float], bool]


def _while_chunking(watch: Watch, now: float) -> bool:
    """Walking and chunking: the store is made, no file in it yet."""
    when, counts = watch.counts[-1]
    return counts.files == 0 and now - when >= 0.3


def _after_checkpoints(watch: Watch, now: float) -> bool:
    """Right after a checkpoint that gave a third of the chunks their vectors."""
    counts = watch.counts[-1][1]
    return counts.chunks // 3 <= counts.vectors < counts.chunks


def _after_the_last_write(watch: Watch, now: float) -> bool:
    counts = watch.counts[-1][1]
    return counts.files == FILES and counts.vectors == counts.chunks


def _index_and_kill(
    root: Path, home: Path, hook: str, cache: bool, killer: Killer | None
) -> tuple[Watch, list[str] | None]:
    """Run the indexer on ``root`` until it is killed (by ``killer``, or by its hook);
    assert it died by SIGKILL and left no worker running. Returns what the poller saw and
    the text hashes whose vectors the hook found waiting for their checkpoint."""
    report = home / "pending.json"
    log = home / "indexer.log"
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("ANEKIT_STORE", "ANEKIT_FAULT", "ANEKIT_LANES")
    }
    env.update(ANEKIT_HOME=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    command = [sys.executable, "-c", RUNNER, str(root), hook, "on" if cache else "off"]
    command += [str(CHECKPOINT_SECONDS), str(report), str(PACE_SECONDS)]
    db_path = _store_path(root)
    watch = Watch(time.monotonic(), [], set())
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, env=env, stdout=output, stderr=output, start_new_session=True
        )
        try:
            deadline = time.monotonic() + 180
            while process.poll() is None and time.monotonic() < deadline:
                watch.workers |= _descendants(process.pid)
                counts, now = _counts(db_path), time.monotonic()
                if not watch.counts or watch.counts[-1][1] != counts:
                    watch.counts.append((now, counts))
                if killer is not None and killer(watch, now):
                    os.killpg(process.pid, signal.SIGKILL)
                    break
                time.sleep(0.02)
        finally:
            if process.poll() is None and killer is None:
                os.killpg(process.pid, signal.SIGKILL)  # a hook that never fired
            process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL, log.read_text()[-3000:]
    for pid in watch.workers:  # the lane workers died with the indexer
        deadline = time.monotonic() + 10
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(pid), f"worker {pid} outlived the killed indexer"
    pending = json.loads(report.read_text()) if report.exists() else None
    return watch, pending


def _cached_hashes(path: Path, namespace: str, hashes: set[str]) -> set[str]:
    """The text hashes among ``hashes`` whose vector the machine cache at ``path`` holds."""
    if not path.exists():
        return set()
    db = sqlite3.connect(path)
    try:
        keys = {bytes(row[0]) for row in db.execute("SELECT key FROM vectors")}
    finally:
        db.close()
    return {text_hash for text_hash in hashes if cache_key(namespace, text_hash) in keys}


def _a_waiting_definition(db_path: Path) -> tuple[str, str]:
    """The path and symbol of a definition's chunk still waiting for its vector."""
    db = sqlite3.connect(db_path)
    try:
        row = db.execute(
            "SELECT f.relpath, c.symbol FROM chunks c JOIN files f ON f.id = c.file_id "
            "LEFT JOIN vectors v ON v.chunk_id = c.id "
            "WHERE v.chunk_id IS NULL AND c.symbol NOT IN ('', '__main__') "
            "ORDER BY c.id DESC LIMIT 1"
        ).fetchone()
    finally:
        db.close()
    assert row is not None
    return str(row[0]), str(row[1]).split(" > ")[-1]


@dataclass(frozen=True)
class Case:
    """A kill point: the poller's ``killer`` or the runner's ``hook``, with or without the
    machine cache (without it, a resumed run must embed again all that the store lacks)."""

    hook: str
    killer: Killer | None
    cache: bool
    #: What the killed run leaves in the store: "none" (no file), "some" (every file,
    #: some vectors) or "all" (every vector).
    leaves: str


CASES = {
    "while-chunking": Case("", _while_chunking, cache=True, leaves="none"),
    "after-a-checkpoint": Case("", _after_checkpoints, cache=True, leaves="some"),
    "in-a-checkpoint": Case("in-checkpoint", None, cache=False, leaves="some"),
    "after-the-last-write": Case("hold", _after_the_last_write, cache=False, leaves="all"),
}


#: Run by `make test`; the other kill points by `make test-slow`.
FAST_CASES = ("in-a-checkpoint", "after-a-checkpoint")


@pytest.mark.parametrize(
    "name",
    [pytest.param(name, marks=[] if name in FAST_CASES else [pytest.mark.slow]) for name in CASES],
)
def test_a_killed_index_run_leaves_a_whole_store_that_the_next_run_completes(
    name: str, clean: Clean, tmp_path: Path
) -> None:
    case = CASES[name]
    root, home = tmp_path / "repo", tmp_path / "home"
    shutil.copytree(clean.source, root)
    home.mkdir()
    watch, pending = _index_and_kill(root, home, case.hook, case.cache, case.killer)

    killed = checked_store(_store_path(root))
    assert_like_clean(killed, clean.snapshot)
    present = set(killed.files)
    if case.leaves == "none":
        assert present == set(), watch.counts
    else:  # every file is written (searchable) before the first vector is made
        assert len(present) == FILES, watch.counts
        assert watch.workers  # the lanes were up: the kill took them down too (checked)
    if case.leaves == "all":
        assert killed.waiting == set(), watch.counts
    elif case.leaves == "some":
        assert 0 < len(killed.vectors) < len(killed.chunks), watch.counts
    if case.hook == "in-checkpoint":
        assert pending, "the hook did not fire"
        stored = {killed.chunks[span] for span in killed.vectors}
        assert not stored & set(pending)  # uncommitted: no vector of the checkpoint
    if present:  # searching the killed store finds only what it holds (and stamps its
        # derived vector index with this generation, which the resumed run must outdate)
        with Index(root, lanes=["cpu"], cache=False) as index:
            hits = [hit for query in QUERIES for hit in index.search(query, k=5)]
            if killed.waiting:  # a chunk waiting for its vector is found by its words
                relpath, symbol = _a_waiting_definition(_store_path(root))
                found = index.search(symbol, k=10, mode="keyword")
                assert relpath in {hit.path for hit in found}, (symbol, found)
        assert hits and {hit.path for hit in hits} <= present
    # What the resumed run must embed: every chunk without a vector (one per model text).
    chunks = clean.snapshot.chunks.items()
    missing = {span: digest for span, digest in chunks if span not in killed.vectors}
    cache_path = home / "search" / "vectors.db"
    cached = _cached_hashes(cache_path, killed.namespace, set(missing.values()))
    assert case.cache or not cached

    cache = VectorCache(cache_path) if case.cache else False
    with Index(root, lanes=["cpu"], cache=cache) as index:
        summary: IndexSummary = index.update()
        top = _top_hits(index)
    # Only the missing files are indexed, and only what no cache holds is embedded.
    assert (summary.indexed, summary.unchanged) == (FILES - len(present), len(present))
    assert (summary.removed, summary.failed) == (0, {})
    from_cache = sum(1 for digest in missing.values() if digest in cached)
    assert (summary.cached, summary.embedded) == (from_cache, len(set(missing.values()) - cached))
    resumed = checked_store(_store_path(root))
    assert_like_clean(resumed, clean.snapshot)
    assert resumed.files == clean.snapshot.files
    assert resumed.chunks == clean.snapshot.chunks
    assert top == clean.top


def test_files_waiting_for_a_checkpoint_have_their_vectors_in_the_machine_cache(
    clean: Clean, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What makes a kill cheap (the module docstring of :mod:`anekit.search.indexer`): each
    embedded vector goes to the machine cache at once, so the files a kill keeps from the
    store are found in the cache. Checked as each checkpoint starts, every file a
    checkpoint (here: one per finished file) writes."""
    root = tmp_path / "repo"
    shutil.copytree(clean.source / "pkg0", root / "pkg0")
    path = tmp_path / "vectors.db"
    uncached: list[str] = []
    flushed: list[int] = []
    flush = index_module._Writer.flush

    def checked_flush(writer: index_module._Writer) -> None:
        identity = writer.store.identity
        assert identity is not None
        hashes = {text_hash for text_hash, _, _ in writer.pending}
        uncached.extend(hashes - _cached_hashes(path, identity.key(), hashes))
        flushed.append(len(writer.pending))
        flush(writer)

    monkeypatch.setattr(indexer_module, "CHECKPOINT_SECONDS", 0.0)
    monkeypatch.setattr(index_module._Writer, "flush", checked_flush)
    with Index(root, lanes=["cpu"], cache=VectorCache(path)) as index:
        summary = index.update()
    assert summary.indexed == len(list((root / "pkg0").iterdir())) > 1
    assert sum(flushed) == summary.embedded > 1 and uncached == []


def _cached_count(path: Path) -> int:
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)
    except sqlite3.Error:
        return 0
    try:
        return int(db.execute("SELECT count(*) FROM vectors").fetchone()[0])
    except sqlite3.Error:
        return 0
    finally:
        db.close()


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _serve(root: Path, home: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    """``anekit serve ROOT`` with the CPU lane: its watcher indexes the root at once."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("ANEKIT_STORE", "ANEKIT_FAULT", "ANEKIT_LANES")
    }
    env.update(ANEKIT_HOME=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    command = [sys.executable, "-m", "anekit", "serve", str(root), "--port", str(port)]
    with log.open("ab") as output:
        return subprocess.Popen([*command, "--lane", "cpu"], env=env, stderr=output)


@pytest.mark.slow
def test_a_daemon_killed_mid_index_resumes_when_restarted(clean: Clean, tmp_path: Path) -> None:
    """kill -9 of ``anekit serve`` (the daemon alone, as a user would) while its watcher's
    first round embeds: its lane workers leave on their own, the store is whole, and the
    restarted daemon (same port) embeds only what neither the store nor the machine cache
    holds and ends with the clean index."""
    root, home = tmp_path / "repo", tmp_path / "home"
    shutil.copytree(clean.source, root)
    home.mkdir()
    cache_path, log = home / "search" / "vectors.db", tmp_path / "serve.log"
    port = _free_port()
    daemon = _serve(root, home, port, log)
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 180
        # Mid-index: vectors are reaching the machine cache, not all are in the store.
        while _cached_count(cache_path) < 40 or (
            (counts := _counts(_store_path(root))).vectors >= counts.chunks
        ):
            assert daemon.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            workers |= _descendants(daemon.pid)
            time.sleep(0.02)
        workers |= _descendants(daemon.pid)
        daemon.kill()
        daemon.wait(30)
    finally:
        if daemon.poll() is None:
            daemon.kill()
    assert workers, "no lane worker was seen"
    for pid in workers:  # their stdin closed with the daemon: they leave
        deadline = time.monotonic() + 15
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(pid), f"worker {pid} outlived the killed daemon"
    killed = checked_store(_store_path(root))
    assert_like_clean(killed, clean.snapshot)
    assert len(killed.vectors) < len(clean.snapshot.chunks)
    missing = {d for span, d in clean.snapshot.chunks.items() if span not in killed.vectors}
    cached = _cached_hashes(cache_path, killed.namespace, missing)
    assert cached and len(cached) < len(missing)

    restarted = _serve(root, home, port, log)
    try:
        deadline = time.monotonic() + 180
        while "caught up" not in log.read_text():
            assert restarted.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.05)
    finally:
        restarted.terminate()
        restarted.wait(60)
    line = next(text for text in log.read_text().splitlines() if "caught up" in text)
    assert f"{FILES - len(killed.files)} indexed" in line, line
    assert f" {len(missing) - len(cached)} chunk(s) embedded" in line, line
    resumed = checked_store(_store_path(root))
    assert_like_clean(resumed, clean.snapshot)
    assert resumed.files == clean.snapshot.files
    assert resumed.chunks == clean.snapshot.chunks
    with Index(root, lanes=["cpu"], cache=False) as index:
        assert _top_hits(index) == clean.top
