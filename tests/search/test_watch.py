"""``Watcher``: OS file events keep the index current, through the real CPU lane.

Each change is made, the watcher's round for it awaited, and at the end the watched
store must hold exactly what a clean index of the final tree holds.
"""

from __future__ import annotations

import os
import queue
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from anekit.lanes.lane import Lane
from anekit.lanes.scheduler import Scheduler
from anekit.search.cache import VectorCache
from anekit.search.index import Index
from anekit.search.watch import BURST, Round, Watcher


def _module(name: str, body: str = "return 1") -> str:
    return f'def {name}(value):\n    """Does {name.replace("_", " ")}."""\n    {body}\n'


class Watched:
    """A watcher on its own thread, its rounds in a queue."""

    def __init__(self, root: Path, cache: VectorCache) -> None:
        self.root = root
        self.rounds: queue.Queue[Round] = queue.Queue()
        self.index = Index(root, lanes=["cpu"], cache=cache, wait=None)
        self.watcher = Watcher(self.index, quiet_ms=200, on_round=self.rounds.put)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        first = self.next_round()
        assert first.error is None and first.whole and first.first_event is None

    def _run(self) -> None:
        try:
            self.watcher.run()
        finally:
            self.index.close()  # its connections belong to this thread

    def next_round(self, timeout: float = 60.0) -> Round:
        return self.rounds.get(timeout=timeout)

    def round_for(self, *relpaths: str, whole: bool = False, timeout: float = 60.0) -> Round:
        """The first round (skipping others) that indexed all of ``relpaths``."""
        deadline = time.monotonic() + timeout
        seen: set[str] = set()
        while True:
            done = self.next_round(max(deadline - time.monotonic(), 0.01))
            assert done.error is None, done.error
            if done.whole:
                return done
            assert not whole, f"expected a whole-tree round, got {done.paths}"
            seen.update(done.paths)
            if seen >= set(relpaths):
                return done

    def stop(self) -> None:
        self.watcher.stop()
        self.thread.join(30)
        assert not self.thread.is_alive()


def _contents(root: Path, store: Path | None = None) -> set[tuple[str, int, int, str]]:
    db = sqlite3.connect((store or root / ".anekit") / "store.db")
    try:
        rows = db.execute(
            "SELECT f.relpath, c.start_line, c.end_line, c.text_hash "
            "FROM chunks c JOIN files f ON f.id = c.file_id"
        ).fetchall()
    finally:
        db.close()
    return {tuple(row) for row in rows}


def _cpu_lane(index: Index) -> Lane:
    pool = index._pool
    assert isinstance(pool, Scheduler)
    return pool.lanes["cpu"]


def _has_lanes(index: Index) -> bool:
    return index.has_lanes  # a call: mypy does not narrow it across the loop below


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[VectorCache]:
    shared = VectorCache(tmp_path / "vectors.db")
    yield shared
    shared.close()


@pytest.fixture
def watched(tmp_path: Path, cache: VectorCache) -> Iterator[Watched]:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "alpha.py").write_text(_module("compute_alpha"))
    (root / "pkg" / "beta.py").write_text(_module("compute_beta"))
    (root / "README.md").write_text("# repo\n\nIt computes alpha and beta.\n")
    running = Watched(root, cache)
    yield running
    running.stop()


def _assert_like_a_clean_index(root: Path, tmp_path: Path, cache: VectorCache) -> None:
    copy = tmp_path / "clean"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".anekit"))
    with Index(copy, lanes=["cpu"], cache=cache) as clean:
        clean.update()
    assert _contents(root) == _contents(copy)


def test_edits_deletes_renames_and_editor_saves_are_indexed(
    watched: Watched, tmp_path: Path, cache: VectorCache
) -> None:
    root = watched.root
    (root / "pkg" / "alpha.py").write_text(_module("compute_alpha", "return 2"))  # edit
    watched.round_for("pkg/alpha.py")
    (root / "pkg" / "gamma.py").write_text(_module("compute_gamma"))  # new
    watched.round_for("pkg/gamma.py")
    (root / "pkg" / "beta.py").unlink()  # delete
    watched.round_for("pkg/beta.py")
    os.rename(root / "pkg" / "gamma.py", root / "pkg" / "delta.py")  # rename
    watched.round_for("pkg/gamma.py", "pkg/delta.py")
    # An editor's save: write a hidden temporary file, then rename it over the original.
    temporary = root / "pkg" / ".alpha.py.swp~"
    temporary.write_text(_module("compute_alpha_saved"))
    os.replace(temporary, root / "pkg" / "alpha.py")
    done = watched.round_for("pkg/alpha.py")
    assert done.summary is not None and done.summary.indexed == 1
    os.rename(root / "pkg", root / "lib")  # a folder renamed: its files move
    watched.round_for("pkg", "lib")
    assert {relpath for relpath, *_ in _contents(root)} == {
        "README.md",
        "lib/alpha.py",
        "lib/delta.py",
    }
    with Index(root, cache=False) as reader:
        (hit,) = reader.search("compute_alpha_saved", k=1, mode="keyword")
        assert hit.path == "lib/alpha.py"
    _assert_like_a_clean_index(root, tmp_path, cache)


@pytest.mark.slow
def test_a_burst_of_files_is_one_run_of_the_whole_tree(
    watched: Watched, tmp_path: Path, cache: VectorCache
) -> None:
    root = watched.root
    burst = root / "generated"
    burst.mkdir()
    count = 500
    assert count > BURST
    for n in range(count):
        (burst / f"mod_{n:03}.py").write_text(_module(f"handler_{n:03}"))
    done = watched.round_for(whole=True, timeout=300)
    assert done.summary is not None
    indexed = done.summary.indexed
    while indexed < count:  # events that came late make a second round
        more = watched.round_for(timeout=300)
        assert more.summary is not None
        indexed += more.summary.indexed
    _assert_like_a_clean_index(root, tmp_path, cache)


@pytest.mark.slow
def test_lane_workers_start_on_demand_leave_when_idle_and_a_crash_costs_a_retry(
    tmp_path: Path, cache: VectorCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANEKIT_LANE_IDLE", "1")  # a worker idle for 1 s leaves
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "alpha.py").write_text(_module("compute_alpha"))
    watched = Watched(root, cache)  # its catch-up round started the CPU lane's worker
    try:
        lane = _cpu_lane(watched.index)
        first = lane.process
        assert first is not None
        assert first.wait(60) == 0  # it left on its own, idle
        deadline = time.monotonic() + 30  # the watcher drops the lanes at its next timeout
        while _has_lanes(watched.index):
            assert time.monotonic() < deadline, "the idle lanes were kept"
            time.sleep(0.1)
        while not watched.rounds.empty():  # the catch-up's second, whole round
            assert watched.next_round().error is None
        # The next save starts a worker on demand; each worker from now on dies (as with
        # kill -9) on its second batch.
        monkeypatch.setenv("ANEKIT_LANE_IDLE", "300")
        monkeypatch.setenv("ANEKIT_FAULT", "cpu:batch:2")
        (root / "pkg" / "gamma.py").write_text(_module("compute_gamma"))
        done = watched.round_for("pkg/gamma.py")
        assert done.summary is not None and done.summary.embedded == 1
        assert _has_lanes(watched.index)  # started again
        lane = _cpu_lane(watched.index)
        second = lane.process
        assert second is not None and second.pid != first.pid and second.poll() is None
        (root / "pkg" / "delta.py").write_text(_module("compute_delta"))
        done = watched.round_for("pkg/delta.py")  # its batch killed the worker: retried
        assert done.summary is not None and done.summary.embedded == 1
        assert done.summary.failed == {} and done.summary.stand_ins == 0
        assert second.wait(10) == 137  # the fault's abrupt exit (anekit.lanes.worker)
        # Each new worker proves itself with one batch, so the retry may cost another.
        assert 1 <= lane.restarts <= 3 and lane.state == "ready"
        assert lane.process is not None and lane.process.pid != second.pid
        assert watched.thread.is_alive()
    finally:
        watched.stop()
    _assert_like_a_clean_index(root, tmp_path, cache)


def test_events_in_the_store_hidden_and_ignored_folders_wake_nothing(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    with Index(root, cache=False) as index:
        watcher = Watcher(index)
        wanted = [
            ("src/app.py", True),
            (".gitignore", True),
            ("src/.anekitignore", True),
            (".git/info/exclude", True),
            (".anekit/store.db-wal", False),
            (".git/objects/ab/cdef", False),
            ("node_modules/x/index.js", False),
            ("pkg.egg-info/PKG-INFO", False),
            ("src/.app.py.swp", False),
            (".hidden/app.py", False),
        ]
        for relpath, expected in wanted:
            assert watcher._wanted(None, str(root / relpath)) is expected, relpath
        assert not watcher._wanted(None, str(tmp_path / "elsewhere.py"))


def test_a_link_out_of_the_root_is_set_aside_once_and_the_watch_goes_on(
    watched: Watched, tmp_path: Path
) -> None:
    root = watched.root
    secret = tmp_path / "outside" / "credentials.py"
    secret.parent.mkdir()
    secret.write_text("PASSWORD = 'hunter2'\n")
    (root / "pkg" / "creds.py").symlink_to(secret)
    done = watched.round_for("pkg/creds.py")
    assert [(s.relpath, s.reason) for s in done.set_aside] == [("pkg/creds.py", "symlink")]
    (root / "everything").symlink_to("/")  # a recursive watch would walk the file system
    watched.round_for("everything")
    (root / "fresh" / "deeper").mkdir(parents=True)  # a new folder: watched from now on
    (root / "fresh" / "deeper" / "new.py").write_text(_module("compute_fresh"))
    watched.round_for("fresh")
    (root / "fresh" / "deeper" / "later.py").write_text(_module("compute_later"))
    watched.round_for("fresh/deeper/later.py")
    secret.write_text("PASSWORD = 'changed'\n")  # outside the root: wakes nothing
    (root / "pkg" / "creds.py").unlink()
    (root / "pkg" / "creds.py").symlink_to(secret)
    done = watched.round_for("pkg/creds.py")
    assert done.set_aside == []  # reported once
    (root / "etc").symlink_to(tmp_path / "outside")
    (root / "pkg" / "gamma.py").write_text(_module("compute_gamma"))
    done = watched.round_for("etc", "pkg/gamma.py")
    assert done.summary is not None and done.summary.indexed >= 1
    assert "pkg/creds.py" not in {s.relpath for s in done.set_aside}  # reported once
    (root / "pkg" / "delta.py").write_text(_module("compute_delta"))  # and the watch goes on
    watched.round_for("pkg/delta.py")
    files = {relpath for relpath, *_ in _contents(root)}
    assert files == {
        "README.md",
        "pkg/alpha.py",
        "pkg/beta.py",
        "pkg/gamma.py",
        "pkg/delta.py",
        "fresh/deeper/new.py",
        "fresh/deeper/later.py",
    }
    with Index(root, cache=False) as reader:
        assert reader.search("hunter2 PASSWORD", k=5, mode="keyword") == []


def test_a_root_gone_before_its_watch_starts_ends_the_watch_with_a_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder goes between the catch-up's walk and the watch's start: watchfiles
    refuses to watch it (FileNotFoundError), and the watcher says the root is gone instead
    of dying with the error in its thread."""
    import watchfiles

    root = tmp_path / "repo"
    root.mkdir()
    rounds: list[Round] = []

    def gone_first(*folders: str, **options: object) -> Iterator[set[tuple[object, str]]]:
        shutil.rmtree(root)
        if folders:  # always: a generator, as watchfiles.watch is, that raises at its start
            raise FileNotFoundError(2, "No such file or directory", folders[0])
        yield set()

    monkeypatch.setattr(watchfiles, "watch", gone_first)
    with Index(root, cache=False) as index:
        monkeypatch.setattr(Watcher, "_index", lambda self, relpaths, **kw: True)
        watcher = Watcher(index, on_round=rounds.append)
        watcher.run()  # returns: no exception
    assert watcher.gone and [done.gone for done in rounds] == [True]
    assert "the folder is gone" in str(rounds[0].error)


def test_a_root_gone_before_the_walk_for_its_watch_ends_the_watch_with_a_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder goes right after the catch-up round, before the walk that lists the
    folders to watch: the walk refuses a root that is not a folder (SearchError), and the
    watcher ends with its gone round instead of its thread dying with the error (as it did
    under ``anekit serve a b`` when one root was deleted at that moment)."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / "app.py").write_text(_module("compute_alpha"))
    rounds: list[Round] = []

    def catch_up_then_gone(self: Watcher, relpaths: set[str], **options: object) -> bool:
        rounds.append(Round(sorted(relpaths), True))
        shutil.rmtree(root)  # gone between the catch-up and the walk for the watch
        return True

    with Index(root, cache=False) as index:
        monkeypatch.setattr(Watcher, "_index", catch_up_then_gone)
        watcher = Watcher(index, on_round=rounds.append)
        worker = threading.Thread(target=watcher.run, daemon=True)
        worker.start()
        worker.join(30)
        assert not worker.is_alive()
    assert watcher.gone and [done.gone for done in rounds] == [False, True]
    assert "the folder is gone" in str(rounds[1].error)
