"""``anekit mcp``: the MCP tools over stdio, driven by the official SDK's own client."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

SESSION = '''"""HTTP sessions."""


class Session:
    """Keeps cookies across requests."""

    def request(self, method: str, url: str) -> bytes:
        """Send one request, retrying on a dropped connection."""
        return f"{method} {url}".encode()


def parse_duration(text: str) -> float:
    """Seconds in a duration such as 1h30m."""
    return 0.0
'''


def _repo(root: Path) -> Path:
    (root / "app").mkdir(parents=True)
    (root / "app" / "session.py").write_text(SESSION)
    (root / "README.md").write_text("# app\n\nSessions and durations.\n")
    return root


async def _session(root: Path, home: Path) -> dict[str, Any]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "anekit", "mcp", str(root), "--lane", "cpu"],
        env={"ANEKIT_HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    seen: dict[str, Any] = {}
    async with Client(params, read_timeout_seconds=120) as client:
        listed = await client.list_tools()
        seen["tools"] = [tool.model_dump(exclude_none=True) for tool in listed.tools]

        async def call(name: str, arguments: dict[str, Any]) -> Any:
            result = await client.call_tool(name, arguments)
            if result.is_error:
                return {"error": result.content[0].text}  # type: ignore[union-attr]
            return result.structured_content

        seen["before"] = await call("search", {"query": "parse_duration"})
        seen["files_before"] = await call("files", {})
        seen["store_before"] = (root / ".anekit" / "store.db").exists()
        index = await call("index", {"budget_seconds": 120})
        while index.get("state") == "running":
            index = await call("index", {"budget_seconds": 60})
        seen["index"] = index
        seen["search"] = await call("search", {"query": "parse_duration", "k": 3})
        seen["keyword"] = await call(
            "search", {"query": "retrying", "mode": "keyword", "path": ["app/"]}
        )
        seen["read"] = await call("read", {"path": "app/session.py", "start_line": 4})
        seen["outside"] = await call("read", {"path": "../secrets.txt"})
        seen["absolute_outside"] = await call("read", {"path": str(root.parent / "secrets.txt")})
        seen["store"] = await call("read", {"path": ".anekit/store.db"})
        seen["files"] = await call("files", {"prefix": "app/"})
        seen["status"] = await call("status", {})
        seen["bad_mode"] = await call("search", {"query": "x", "mode": "fuzzy"})
    return seen


def test_mcp_over_stdio_with_the_sdk_client(tmp_path: Path) -> None:
    root = _repo(tmp_path / "repo")
    (tmp_path / "secrets.txt").write_text("not for agents\n")
    seen = asyncio.run(_session(root, tmp_path / "home"))

    names = [tool["name"] for tool in seen["tools"]]
    assert names == ["search", "read", "files", "status", "index"]
    # tools/list stays small: well under 1,000 tokens (about 4 characters a token).
    assert len(json.dumps(seen["tools"])) < 3400

    assert "the index is empty" in seen["before"]["error"]  # a refusal, not a crash
    assert "call the index tool" in seen["before"]["error"]
    assert "call the index tool" in seen["files_before"]["error"]
    assert not seen["store_before"]  # asking did not make an empty store
    assert seen["index"]["state"] == "done"
    assert seen["index"]["summary"]["indexed"] == 2
    first = seen["search"]["hits"][0]
    assert (first["path"], first["symbol"]) == ("app/session.py", "parse_duration")
    assert [hit["path"] for hit in seen["keyword"]["hits"]] == ["app/session.py"]
    assert seen["read"]["start_line"] == 4 and seen["read"]["text"].startswith("class Session:")
    assert seen["read"]["total_lines"] == SESSION.count("\n")
    for refused in ("outside", "absolute_outside"):
        assert "outside the served roots" in seen[refused]["error"], seen[refused]
    assert "the index leaves it out" in seen["store"]["error"]
    assert seen["files"]["files"] == ["app/session.py"]
    (status,) = seen["status"]["roots"]
    assert status["files"] == 2 and status["indexing"]["state"] == "done"
    assert "Input should be 'hybrid', 'vector' or 'keyword'" in seen["bad_mode"]["error"]


class _ScriptedIndex:
    """Stands in for search.index.Index in SearchService: each update waits for its
    release, then reports the number of the run as its count of indexed files."""

    runs: ClassVar[list[threading.Event]] = []

    def __init__(self, root: Path, **_: Any) -> None:
        self.root = root

    def __enter__(self) -> _ScriptedIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def update(self, progress: Any = None) -> Any:
        from anekit.search.index import IndexSummary

        release = threading.Event()
        _ScriptedIndex.runs.append(release)
        release.wait(30)
        return IndexSummary(files=2, indexed=len(_ScriptedIndex.runs))


def test_a_run_reported_as_running_is_reported_when_done_not_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent that saw "running" and calls index again gets that run's summary, even
    when the run ended in between; only the call after that starts a new run."""
    from anekit.search import server

    monkeypatch.setattr(server, "Index", _ScriptedIndex)
    monkeypatch.setattr(_ScriptedIndex, "runs", [])
    service = server.SearchService([_repo(tmp_path / "repo")])
    first = service.index(budget_seconds=0)
    assert first["state"] == "running"
    while not _ScriptedIndex.runs:
        time.sleep(0.01)
    _ScriptedIndex.runs[0].set()
    (run,) = service._runs.values()
    assert run.finished.wait(10)
    again = service.index(budget_seconds=0)
    assert again["state"] == "done" and again["summary"]["indexed"] == 1  # the first run
    assert len(_ScriptedIndex.runs) == 1
    third = service.index(budget_seconds=0)  # reported: this call starts a new run
    assert third["state"] == "running"
    while len(_ScriptedIndex.runs) < 2:
        time.sleep(0.01)
    _ScriptedIndex.runs[1].set()
    assert service.index(budget_seconds=10)["summary"]["indexed"] == 2


def test_read_serves_only_what_the_index_would_take(tmp_path: Path) -> None:
    """No symbolic link (out of the root or not), ``..``, absolute path outside, hidden
    file, ignored file, store of this or a nested root, binary or oversized file."""
    from anekit.errors import SearchError
    from anekit.search.server import READ_MAX_LINES, SearchService
    from anekit.search.walk import MAX_FILE_BYTES

    root = _repo(tmp_path / "repo")
    inner = _repo(root / "inner")
    outside = tmp_path / "secrets.txt"
    outside.write_text("not for agents\n")
    (root / "app" / "leak.py").symlink_to(outside)
    (root / "app" / "alias.py").symlink_to(root / "app" / "session.py")
    (root / "etc").symlink_to(tmp_path)
    (root / ".env").write_text("TOKEN=1\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[remote]\n")
    (root / ".gitignore").write_text("*.log\n")
    (root / "debug.log").write_text("ignored\n")
    for store in (root / ".anekit", inner / ".anekit"):
        store.mkdir()
        (store / "store.db").write_text("SQLite format 3")
    (root / "big.txt").write_bytes(b"x\n" * (MAX_FILE_BYTES // 2 + 1))
    (root / "blob.bin").write_bytes(b"\0\1\2")
    (root / "long.txt").write_text("".join(f"line {n}\n" for n in range(1, 1001)))
    service = SearchService([root, inner])
    try:
        refusals = {
            "../secrets.txt": "outside the served roots",
            str(outside): "outside the served roots",
            "app/../../secrets.txt": "outside the served roots",
            "app/leak.py": "not served: symlink",
            "app/alias.py": "not served: symlink",
            "etc/secrets.txt": "not served: symlink",
            str(root / "etc" / "secrets.txt"): "not served: symlink",
            ".env": "the index leaves it out",
            ".git/config": "the index leaves it out",
            "debug.log": "the index leaves it out",
            ".anekit/store.db": "the index leaves it out",
            "inner/.anekit/store.db": "the index leaves it out",
            str(inner / ".anekit" / "store.db"): "the index leaves it out",
            "big.txt": "not served: too large",
            "blob.bin": "not served: binary",
            "app": "a folder",
            "app/missing.py": "no such file in the served roots",
        }
        for path, why in refusals.items():
            with pytest.raises(SearchError, match=why):
                service.read(path)
        for start, end in ((0, None), (5, 4), (-3, 2)):
            with pytest.raises(SearchError, match=r"start_line|end_line"):
                service.read("long.txt", start, end)
        for spelled in ("./app/session.py", "app//session.py", "app/../app/session.py"):
            assert service.read(spelled, 1, 1)["path"] == "app/session.py"
        capped = service.read("long.txt", 10)
        assert (capped["start_line"], capped["end_line"]) == (10, 10 + READ_MAX_LINES - 1)
        assert capped["text"].splitlines()[0] == "line 10"
        nested = service.read(str(inner / "app" / "session.py"), 1, 1)
        assert (nested["root"], nested["text"]) == (str(root), '"""HTTP sessions."""')
    finally:
        service.close()


def test_search_arguments_are_refused_not_clamped(tmp_path: Path) -> None:
    from anekit.errors import SearchError
    from anekit.search.limits import MAX_QUERY_CHARS
    from anekit.search.server import SearchService

    service = SearchService([_repo(tmp_path / "repo")])
    try:
        for k in (0, -1, 101, 100000):
            with pytest.raises(SearchError, match="k must be between 1 and 100"):
                service.search("session", k=k)
        with pytest.raises(SearchError, match=f"the limit is {MAX_QUERY_CHARS}"):
            service.search("x" * (MAX_QUERY_CHARS + 1))
        for budget in (-1.0, 301.0):
            with pytest.raises(SearchError, match="budget_seconds must be between 0 and 300"):
                service.index(budget_seconds=budget)
    finally:
        service.close()


def test_a_store_from_before_links_were_refused_shows_nothing_through_them(
    tmp_path: Path,
) -> None:
    """A store that indexed a linked folder keeps its rows until the next update: search
    and files leave them out meanwhile, and the update drops them."""
    from anekit.search.index import Index
    from anekit.search.server import SearchService

    root = _repo(tmp_path / "repo")
    (root / "etc").mkdir()
    (root / "etc" / "shadow.py").write_text("ROOT_PASSWORD_HASH = 'abc'\n")
    with Index(root, lanes=["cpu"], cache=False) as index:
        index.update()
    outside = tmp_path / "real_etc"
    (root / "etc").rename(outside)
    (root / "etc").symlink_to(outside)  # the same path, now a link out of the root
    service = SearchService([root])
    try:
        found = asyncio.run(service.call(service.search, "ROOT_PASSWORD_HASH", mode="keyword"))
        assert found["hits"] == []
        listed = asyncio.run(service.call(service.files))
        assert listed["files"] == ["README.md", "app/session.py"]
    finally:
        service.close()
    with Index(root, lanes=["cpu"], cache=False) as index:
        summary = index.update()
        assert summary.removed == 1 and "etc/shadow.py" not in index.store.files()


def test_searches_run_concurrently_and_share_one_vector_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slow search does not hold the others (a pool of reader threads), and the readers
    of a root build its vector index and query model once between them."""
    from anekit.search import vectors
    from anekit.search.index import Index
    from anekit.search.server import READERS, SearchService

    root = _repo(tmp_path / "repo")
    with Index(root, lanes=["cpu"], cache=False) as index:
        index.update()
    opened: list[int] = []
    real_open = vectors.VectorIndex.open

    def counting_open(store: Any, **options: Any) -> Any:
        opened.append(threading.get_ident())
        return real_open(store, **options)

    monkeypatch.setattr(vectors.VectorIndex, "open", counting_open)
    release, entered = threading.Event(), threading.Event()
    real_search = Index.search

    def search(self: Index, query: str, *args: Any, **kwargs: Any) -> Any:
        if query == "slow":
            entered.set()
            assert release.wait(30)
        return real_search(self, query, *args, **kwargs)

    monkeypatch.setattr(Index, "search", search)
    service = SearchService([root])

    async def calls() -> list[Any]:
        slow = asyncio.ensure_future(service.call(service.search, "slow"))
        while not entered.is_set():
            await asyncio.sleep(0.01)
        quick = [
            await service.call(service.search, "parse a duration", 3) for _ in range(READERS * 2)
        ]
        assert not slow.done()  # the others answered while it was held
        release.set()
        made.extend(service._readers)  # each reader thread made its own Index
        return [*quick, await slow]

    made: list[Index] = []
    try:
        results = asyncio.run(calls())
    finally:
        release.set()
        service.close()
    assert all(result["hits"] for result in results)
    assert results[0]["hits"][0]["symbol"] == "parse_duration"
    assert len(opened) == 1  # one vector index for every reader thread
    assert 2 <= len(made) <= READERS


def test_requests_piped_in_are_all_answered_after_stdin_ends(tmp_path: Path) -> None:
    """A script writes its requests and closes stdin: every request read is answered before
    the server exits (the SDK alone cancels those in flight: python-sdk#2678)."""
    root = _repo(tmp_path / "repo")
    calls = [
        ("files", {}),
        ("status", {}),
        ("read", {"path": "app/session.py", "start_line": 1, "end_line": 3}),
        ("search", {"query": "parse_duration", "mode": "keyword"}),
        ("files", {"prefix": "app/"}),
    ]
    messages: list[dict[str, Any]] = [
        *_handshake(),
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    ]
    messages += [
        {
            "jsonrpc": "2.0",
            "id": number,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
        for number, (name, arguments) in enumerate(calls, start=2)
    ]
    done = subprocess.run(
        [sys.executable, "-m", "anekit", "mcp", str(root), "--lane", "cpu"],
        input=_piped(messages),
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **os.environ,
            "ANEKIT_HOME": str(tmp_path / "home"),
        },
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answers = {item["id"]: item for item in map(json.loads, done.stdout.splitlines())}
    assert sorted(answers) == list(range(len(messages) - 1)), done.stderr[-2000:]
    read = answers[4]["result"]["structuredContent"]
    assert read["path"] == "app/session.py" and '"""HTTP sessions."""' in read["text"]


def test_a_request_cancelled_before_stdin_ends_does_not_hold_the_exit(tmp_path: Path) -> None:
    """A cancelled request is never answered (the SDK drops it): the server must not wait
    for its answer after stdin ends (it would, for 120 s, if it counted it as owed)."""
    root = _repo(tmp_path / "repo")
    call = {"name": "index", "arguments": {"budget_seconds": 60}}
    messages: list[dict[str, Any]] = [
        *_handshake(),
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    done = subprocess.run(
        [sys.executable, "-m", "anekit", "mcp", str(root), "--lane", "cpu"],
        input=_piped(messages),
        capture_output=True,
        text=True,
        timeout=100,  # the drain's own limit is 120 s: past this, it waited for id 1
        env={**os.environ, "ANEKIT_HOME": str(tmp_path / "home")},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answered = {item["id"] for item in map(json.loads, done.stdout.splitlines())}
    assert {0, 2} <= answered  # id 1 may have finished before its cancellation arrived


def _handshake() -> list[dict[str, Any]]:
    """What a client sends first: ``initialize`` (id 0), then ``initialized``."""
    initialize = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "script", "version": "0"},
    }
    return [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": initialize},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]


def _piped(messages: list[dict[str, Any]]) -> str:
    """``messages`` as the lines a script writes to ``anekit mcp``'s stdin."""
    return "".join(json.dumps(message) + "\n" for message in messages)
