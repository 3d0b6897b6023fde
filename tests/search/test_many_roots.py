"""Many repositories (issue 37, item 3): the registry of indexed roots, ``anekit search
--all``/``--root`` merged by score, ``anekit status --all``, the MCP ``search`` tool's
``roots``, and one lane pool for every root ``anekit serve`` watches.

Two tiny roots are indexed once for the module (the CPU lane); tests work on copies, so
that a root can be moved, emptied or damaged. Fan-out, merge and pool sharing are also
tested with stand-ins, which run in milliseconds.
"""

from __future__ import annotations

import json
import queue
import shutil
import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from click.testing import CliRunner, Result

from anekit.cli import cli
from anekit.errors import DamagedStoreError, SearchError
from anekit.search import roots as registry
from anekit.search.fanout import fan_out, merge
from anekit.search.index import SearchHit
from anekit.search.shared_lanes import SharedLanes

PARSE = 'def parse_duration(text):\n    """Seconds in a duration such as 1h30m."""\n    return 0\n'
NET = (
    "def retry_request(url):\n"
    '    """Send the request again when the connection drops."""\n'
    "    return url\n"
)


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """Two indexed roots (alpha: parse_duration; beta: retry_request) and the home whose
    registry their index runs wrote."""
    home = tmp_path_factory.mktemp("home")
    base = tmp_path_factory.mktemp("built")
    alpha, beta = base / "alpha", base / "beta"
    (alpha / "app").mkdir(parents=True)
    (alpha / "app" / "parse.py").write_text(PARSE)
    (beta / "lib").mkdir(parents=True)
    (beta / "lib" / "net.py").write_text(NET)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ANEKIT_HOME", str(home))
        for root in (alpha, beta):
            result = _run("index", str(root), "--lane", "cpu", "--json")
            assert result.exit_code == 0, result.output
    return alpha, beta, home


@pytest.fixture
def copies(built: tuple[Path, Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    """Copies of both roots, stores included, recorded in this test's own registry."""
    made = []
    for source in built[:2]:
        copy = tmp_path / source.name
        shutil.copytree(source, copy)
        registry.record(copy, copy / ".anekit")
        made.append(copy)
    return made[0], made[1]


def _hit(path: str, score: float) -> SearchHit:
    return SearchHit(path, 1, 2, path.upper(), "code", "python", score, "text")


# --- the registry ---------------------------------------------------------------------


def test_an_index_run_records_its_resolved_root_once(
    built: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alpha, beta, home = built
    monkeypatch.setenv("ANEKIT_HOME", str(home))
    assert registry.registered() == [
        registry.RegisteredRoot(alpha.resolve(), alpha.resolve() / ".anekit"),
        registry.RegisteredRoot(beta.resolve(), beta.resolve() / ".anekit"),
    ]
    monkeypatch.setenv("ANEKIT_HOME", str(tmp_path / "home"))
    link = tmp_path / "linked"
    link.symlink_to(alpha)  # a root reached through a link is recorded as what it is
    assert registry.record(link, link / ".anekit")
    assert not registry.record(alpha, alpha / ".anekit")  # the same entry: no write
    assert registry.registered() == [
        registry.RegisteredRoot(alpha.resolve(), alpha.resolve() / ".anekit")
    ]
    assert registry.record(alpha, tmp_path / "elsewhere")  # one entry per root: replaced
    (entry,) = registry.registered()
    assert entry.store == (tmp_path / "elsewhere").resolve()
    assert entry.missing() == "no index"
    listed = sorted(path.name for path in registry.registry_path().parent.iterdir())
    assert listed == ["roots.json", "roots.json.lock"]  # no temporary file left behind
    assert registry.forget(alpha) and registry.registered() == []
    assert not registry.forget(alpha)


def test_a_corrupt_registry_is_set_aside_and_said_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(registry, "_warned", set())
    path = registry.registry_path()
    path.parent.mkdir(parents=True)
    path.write_text('{"roots": [{"root": "/x"')  # cut short mid-write by someone else
    assert registry.registered() == []
    assert registry.registered() == []
    said = capsys.readouterr()
    assert said.out == ""
    assert said.err.count("unreadable") == 1 and "starting empty" in said.err
    assert path.with_name("roots.json.corrupt").read_text().startswith('{"roots"')
    root = tmp_path / "repo"
    root.mkdir()
    assert registry.record(root, root / ".anekit")  # starts anew
    assert [entry.root for entry in registry.registered()] == [root.resolve()]
    for bad in ("[1, 2]", '{"roots": [{"store": "/s"}]}', "\x00\x01"):
        path.write_text(bad)
        assert registry.registered() == []  # never a crash


def test_a_home_that_cannot_be_written_never_fails_an_index_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(registry, "_warned", set())
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("ANEKIT_HOME", str(blocker))
    assert registry.record(tmp_path, tmp_path / ".anekit") is False
    assert registry.record(tmp_path, tmp_path / ".anekit") is False
    assert capsys.readouterr().err.count("cannot record") == 1


# --- merging and fanning out ----------------------------------------------------------


def test_merge_orders_by_score_across_roots_and_names_each_hits_root() -> None:
    a, b = Path("/a"), Path("/b")
    merged = merge(
        [(a, [_hit("a1", 0.9), _hit("a2", 0.3)]), (b, [_hit("b1", 0.5), _hit("b2", 0.3)])], 3
    )
    assert [(item.root, item.hit.path) for item in merged] == [(a, "a1"), (b, "b1"), (a, "a2")]
    assert merged[1].as_dict()["root"] == "/b" and merged[1].as_dict()["path"] == "b1"
    tied = merge([(b, [_hit("b", 0.3)]), (a, [_hit("a", 0.3)])], 2)  # ties: the roots' order
    assert [item.root for item in tied] == [b, a]


@dataclass
class _StandIn:
    """Stands in for an Index in fan_out: its store's identity model, or a damage."""

    root: Path
    model: str | None = "all-MiniLM-L6-v2"
    damaged: bool = False
    hits: tuple[SearchHit, ...] = ()

    @property
    def directory(self) -> Path:
        return self.root / ".anekit"

    @property
    def store(self) -> Any:
        if self.damaged:
            raise DamagedStoreError("file is not a database")
        return SimpleNamespace(identity=self.model and SimpleNamespace(model=self.model))

    def search(self, query: str, **_: Any) -> list[SearchHit]:
        return list(self.hits)


def test_fan_out_reports_each_unsearchable_root_and_searches_the_rest(tmp_path: Path) -> None:
    made = {}
    for name in ("good", "other", "empty", "damaged", "bare", "second"):
        (tmp_path / name / ".anekit").mkdir(parents=True)
        (tmp_path / name / ".anekit" / "store.db").write_text("")
        made[name] = _StandIn(tmp_path / name)
    made["good"].hits = (_hit("good.py", 0.2),)
    made["second"].hits = (_hit("second.py", 0.4),)
    made["other"].model = "bge-small"
    made["empty"].model = None
    made["damaged"].damaged = True
    (tmp_path / "bare" / ".anekit" / "store.db").unlink()
    gone = tmp_path / "gone"
    order = [gone, *(made[name].root for name in made)]
    open_index: Any = lambda root: made[root.name]  # noqa: E731
    found = fan_out(order, open_index, "q", k=5, model_id="all-MiniLM-L6-v2")
    assert [(item.root.name, item.hit.path) for item in found.hits] == [
        ("second", "second.py"),
        ("good", "good.py"),
    ]
    assert found.searched == [made["good"].root, made["second"].root]
    reasons = {root.name: why for root, why in found.skipped}
    assert reasons == {
        "gone": "missing folder",
        "other": "a different embedding model (bge-small, not all-MiniLM-L6-v2)",
        "empty": "no index (empty)",
        "damaged": "damaged store: file is not a database",
        "bare": "no index",
    }
    keyword = fan_out([made["other"].root], open_index, "q", mode="keyword", model_id="m")
    assert keyword.searched == [made["other"].root]  # no query vector: any model will do
    with pytest.raises(SearchError, match="no root could be searched") as refused:
        fan_out([gone, made["damaged"].root], open_index, "q")
    assert f"{gone}: missing folder" in str(refused.value)
    assert "damaged: damaged store" in str(refused.value)


# --- the CLI ---------------------------------------------------------------------------


def test_search_all_merges_every_registered_root_and_skips_the_gone(
    copies: tuple[Path, Path], tmp_path: Path
) -> None:
    alpha, beta = copies
    moved = tmp_path / "moved"
    (moved / "src").mkdir(parents=True)
    registry.record(moved, moved / ".anekit")
    shutil.rmtree(moved)  # deleted since it was indexed
    result = _run("search", "--all", "retry the request when the connection drops", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["roots"] == [str(alpha.resolve()), str(beta.resolve())]
    assert out["skipped"] == [{"root": str(moved.resolve()), "reason": "missing folder"}]
    hits = out["hits"]
    assert [(hit["root"], hit["path"]) for hit in hits] == [
        (str(beta.resolve()), "lib/net.py"),
        (str(alpha.resolve()), "app/parse.py"),
    ]
    assert hits[0]["score"] >= hits[1]["score"]
    named = _run("search", "parse_duration", "--root", str(alpha / "app"), "--json", "-k", "1")
    assert [(h["root"], h["symbol"]) for h in json.loads(named.output)["hits"]] == [
        (str(alpha.resolve()), "parse_duration")
    ]
    text = _run("search", "--all", "parse_duration", "--mode", "keyword")
    assert text.exit_code == 0
    assert "[alpha] app/parse.py:1-3" in text.output
    assert f"skipped {moved.resolve()}: missing folder" in text.output


def test_search_fails_only_when_no_root_could_be_searched(
    copies: tuple[Path, Path], tmp_path: Path
) -> None:
    alpha, beta = copies
    (alpha / ".anekit" / "store.db").write_bytes(b"this is no SQLite database" * 100)
    for derived in ("store.db-wal", "store.db-shm"):
        (alpha / ".anekit" / derived).unlink(missing_ok=True)
    plain = tmp_path / "plain"
    plain.mkdir()
    result = _run("search", "--all", "--root", str(plain), "retry", "--json")
    out = json.loads(result.output)
    assert result.exit_code == 0 and out["roots"] == [str(beta.resolve())]
    reasons = {item["root"]: item["reason"] for item in out["skipped"]}
    assert reasons[str(alpha.resolve())].startswith("damaged store")
    assert reasons[str(plain.resolve())] == "no index"
    shutil.rmtree(beta)
    failed = _run("search", "--all", "retry", "--json")
    assert failed.exit_code == 2
    message = json.loads(failed.output)["message"]
    assert "no root could be searched" in message
    assert f"{beta.resolve()}: missing folder" in message and str(alpha.resolve()) in message


def test_status_all_lists_every_root_reports_the_missing_and_prunes_them(
    copies: tuple[Path, Path],
) -> None:
    alpha, beta = copies
    shutil.rmtree(beta / ".anekit")  # its index deleted
    gone = alpha.parent / "gone"
    shutil.copytree(alpha, gone)
    registry.record(gone, gone / ".anekit")
    shutil.rmtree(gone)
    result = _run("status", "--all", "--json")
    assert result.exit_code == 0, result.output
    rows = {row["root"]: row for row in json.loads(result.output)["roots"]}
    ok = rows[str(alpha.resolve())]
    assert (ok["state"], ok["health"], ok["files"], ok["chunks"]) == ("ok", "ok", 1, 1)
    assert ok["bytes"] > 0 and ok["last_write"] and ok["model"] == "all-MiniLM-L6-v2"
    assert rows[str(beta.resolve())]["state"] == "no index"
    assert rows[str(gone.resolve())]["state"] == "missing folder"
    text = _run("status", "--all")
    assert "missing folder" in text.output and "--prune" in text.output
    pruned = _run("status", "--all", "--prune", "--json")
    assert sorted(json.loads(pruned.output)["forgotten"]) == sorted(
        [str(beta.resolve()), str(gone.resolve())]
    )
    assert [entry.root for entry in registry.registered()] == [alpha.resolve()]
    assert _run("status", "--prune").exit_code == 2  # --prune goes with --all


# --- the MCP search tool ---------------------------------------------------------------


def test_mcp_search_fans_out_over_served_roots_and_survives_one_going(
    copies: tuple[Path, Path], tmp_path: Path
) -> None:
    from anekit.search.server import SearchService

    alpha, beta = (root.resolve() for root in copies)
    fresh = tmp_path.resolve() / "fresh"  # served, never indexed
    fresh.mkdir()
    service = SearchService([alpha, beta, fresh])
    try:
        found = service.search("retry the request when the connection drops", roots=["all"])
        assert found["roots"] == [str(alpha), str(beta)]
        assert found["skipped"] == [{"root": str(fresh), "reason": "no index"}]
        assert [(hit["root"], hit["path"]) for hit in found["hits"]] == [
            (str(beta), "lib/net.py"),
            (str(alpha), "app/parse.py"),
        ]
        # both roots were searched by meaning with one query model, loaded once
        shared = [service._shared[root].models for root in (alpha, beta)]
        assert shared[0] is shared[1] and len(shared[0].loaded()) == 1
        named = service.search("parse_duration", k=1, roots=["alpha", str(beta)])
        assert [hit["root"] for hit in named["hits"]] == [str(alpha)]
        one = service.search("parse_duration", k=1, root="alpha")  # as before
        assert one["root"] == str(alpha) and "root" not in one["hits"][0]
        for bad, why in (
            ({"roots": ["nowhere"]}, "not a served root"),
            ({"roots": []}, "roots is empty"),
            ({"roots": ["all"], "root": "alpha"}, "root or roots"),
        ):
            with pytest.raises(SearchError, match=why):
                service.search("x", **bad)
        shutil.rmtree(beta)  # gone while served
        after = service.search("retry the request", roots=["all"])
        assert after["roots"] == [str(alpha)]
        assert {"root": str(beta), "reason": "missing folder"} in after["skipped"]
        status = {row["root"]: row for row in service.status()["roots"]}
        assert "gone" in status[str(beta)]["missing"] and status[str(alpha)]["files"] == 1
        with pytest.raises(SearchError, match="the folder is gone"):
            service.search("retry", root="beta")
    finally:
        service.close()


# --- one lane pool for every root ------------------------------------------------------


class _FakePool:
    """A pool whose streams record how many run at once."""

    def __init__(self, log: list[_FakePool]) -> None:
        self.running = 0
        self.most = 0
        self.closed = False
        self.idle = False
        self.summary = SimpleNamespace(fallback=None)
        log.append(self)

    def stream(self, token_ids: Any) -> Iterator[Any]:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            for position in range(len(token_ids)):
                time.sleep(0.01)
                yield position, [1.0], None, "cpu"
        finally:
            self.running -= 1

    def workers_gone_idle(self) -> bool:
        return self.idle

    def status(self) -> list[dict[str, Any]]:
        return [{"lane": "cpu", "state": "ready"}]

    def node_rates(self) -> list[dict[str, Any]]:
        return []

    def close(self) -> None:
        self.closed = True


def _closed(pool: Any) -> bool:
    """Whether a stand-in pool was closed (read anew: not narrowed by an earlier assert)."""
    return bool(pool.closed)


def test_shared_lanes_open_one_pool_stream_in_turn_and_close_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from anekit.lanes import pool as pool_module

    pools: list[_FakePool] = []
    monkeypatch.setattr(pool_module, "open_pool", lambda *a, **k: _FakePool(pools))
    share = SharedLanes(["cpu"])
    model = SimpleNamespace(model_id="all-MiniLM-L6-v2")
    borrowed = [share.borrow(model), share.borrow(model)]  # type: ignore[arg-type]
    rows: list[int] = []

    def embed(pool: Any) -> None:
        rows.extend(position for position, *_ in pool.stream([[1]] * 20))

    threads = [threading.Thread(target=embed, args=(pool,)) for pool in borrowed]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(pools) == 1 and share.opened == 1 and len(rows) == 40
    assert pools[0].most == 1  # one stream at a time
    borrowed[0].close()  # a borrower's close leaves the pool alone
    assert not pools[0].closed
    stream = cast(Generator[Any, None, None], borrowed[0].stream([[1]] * 3))
    next(stream)  # a stream under way: the idle pool is not dropped from under it
    pools[0].idle = True
    assert not borrowed[1].workers_gone_idle() and not _closed(pools[0])
    stream.close()  # ends its turn
    assert borrowed[1].workers_gone_idle() and _closed(pools[0]) and not share.open
    list(borrowed[0].stream([[1]]))  # the next stream opens it again
    assert len(pools) == 2
    with pytest.raises(SearchError, match="embed with all-MiniLM-L6-v2"):
        share.borrow(SimpleNamespace(model_id="bge-small"))  # type: ignore[arg-type]
    share.close()
    assert pools[1].closed and not share.open


def test_serve_watches_every_root_with_one_pool_and_outlives_a_root_going(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RootWatchers, as ``anekit serve a b`` runs them: two fresh roots embedded through
    one pool; one root deleted ends its watcher with a line, the other goes on."""
    from anekit.cli.watch import round_line
    from anekit.lanes import pool as pool_module
    from anekit.search.watch import Round
    from anekit.search.watch_roots import RootWatchers

    real_open = pool_module.open_pool
    opened: list[Any] = []

    def counting_open(*args: Any, **kwargs: Any) -> Any:
        opened.append(real_open(*args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(pool_module, "open_pool", counting_open)
    alpha, beta = tmp_path.resolve() / "alpha", tmp_path.resolve() / "beta"
    (alpha / "app").mkdir(parents=True)
    (alpha / "app" / "parse.py").write_text(PARSE)
    (beta / "lib").mkdir(parents=True)
    (beta / "lib" / "net.py").write_text(NET)
    rounds: dict[Path, queue.Queue[Round]] = {alpha: queue.Queue(), beta: queue.Queue()}
    watchers = RootWatchers(
        [alpha, beta],
        lanes=["cpu"],
        quiet_ms=200,
        on_round=lambda root, done: rounds[root].put(done),
    )
    watchers.start()
    try:
        for root in (alpha, beta):
            first = rounds[root].get(timeout=120)
            assert first.error is None and first.summary is not None
            assert first.summary.embedded == 1, root  # each root embedded its chunk
        assert len(opened) == 1 and watchers.lanes.opened == 1  # one pool for both
        shutil.rmtree(beta)
        deadline = time.monotonic() + 60
        while True:
            done = rounds[beta].get(timeout=max(deadline - time.monotonic(), 0.01))
            if done.gone:
                break
        assert "the folder is gone" in round_line(done) and "tried again" not in round_line(done)
        assert watchers.watchers[beta].stop_event.is_set()
        (alpha / "app" / "more.py").write_text(NET.replace("retry_request", "resend"))
        deadline = time.monotonic() + 60
        while True:  # the other root's watch goes on
            done = rounds[alpha].get(timeout=max(deadline - time.monotonic(), 0.01))
            assert done.error is None, done.error
            indexed = done.summary is not None and done.summary.indexed
            if indexed and ("app/more.py" in done.paths or done.whole):
                break
        assert len(opened) == 1
    finally:
        watchers.stop()
    assert not watchers.lanes.open
    assert sorted(entry.root for entry in registry.registered()) == [alpha, beta]  # recorded


def test_a_watch_that_fails_is_reported_as_its_last_round_and_the_others_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error a root's watch cannot go on from (here: its run raises) ends that root's
    watch with a last round naming the root and the error, not a thread dying with a
    traceback on stderr while serve prints nothing for that root."""
    from anekit.cli.watch import round_line
    from anekit.search.watch import Round, Watcher
    from anekit.search.watch_roots import RootWatchers

    alpha, beta = tmp_path.resolve() / "alpha", tmp_path.resolve() / "beta"
    alpha.mkdir()
    beta.mkdir()
    ran: list[Path] = []

    def run(self: Watcher) -> None:
        ran.append(self.root)
        if self.root == beta:
            raise OSError(24, "Too many open files")

    monkeypatch.setattr(Watcher, "run", run)
    rounds: list[tuple[Path, Round]] = []
    watchers = RootWatchers(
        [alpha, beta], lanes=["cpu"], on_round=lambda root, done: rounds.append((root, done))
    )
    watchers.start()
    watchers.stop()
    assert sorted(ran) == [alpha, beta]
    assert [(root, done.last, done.gone) for root, done in rounds] == [(beta, True, False)]
    line = round_line(rounds[0][1])
    assert line == f"error: {beta}: the watch stopped: OSError: [Errno 24] Too many open files"
    assert not watchers.lanes.open


def test_the_index_tool_embeds_through_the_services_one_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each root's index run borrows the service's SharedLanes (serve's, shared with the
    watchers), never a pool of its own; the service closes only a pool it made."""
    from anekit.search import server
    from anekit.search.index import IndexSummary

    given: list[Any] = []

    class Recorder:
        def __init__(self, root: Path, **options: Any) -> None:
            given.append(options.get("shared_lanes"))

        def __enter__(self) -> Recorder:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def update(self, progress: Any = None) -> IndexSummary:
            return IndexSummary()

    monkeypatch.setattr(server, "Index", Recorder)
    folders = [tmp_path / "a", tmp_path / "b"]
    for folder in folders:
        folder.mkdir()
    share = SharedLanes(["cpu"])
    closed: list[bool] = []
    monkeypatch.setattr(share, "close", lambda: closed.append(True))
    service = server.SearchService(folders, shared_lanes=share)
    for name in ("a", "b"):
        assert service.index(budget_seconds=10, root=name)["state"] == "done"
    service.close()
    assert given == [share, share] and closed == []  # the caller's pool: not the service's
    own = server.SearchService(folders)
    assert isinstance(own.shared_lanes, SharedLanes)
    own.index(budget_seconds=10, root="a")
    assert given[-1] is own.shared_lanes
    own.close()
