"""``anekit mcp``: the MCP tools over stdio, driven by the official SDK's own client."""

from __future__ import annotations

import asyncio
import json
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
    assert "inside the index's own store" in seen["store"]["error"]
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


def test_read_never_leaves_the_served_roots(tmp_path: Path) -> None:
    """A symbolic link inside a root that leads out, ``..`` and absolute paths are
    refused; a link that stays inside reads its target."""
    from anekit.errors import SearchError
    from anekit.search.server import READ_MAX_LINES, SearchService

    root = _repo(tmp_path / "repo")
    outside = tmp_path / "secrets.txt"
    outside.write_text("not for agents\n")
    (root / "app" / "leak.py").symlink_to(outside)
    (root / "app" / "alias.py").symlink_to(root / "app" / "session.py")
    (root / "long.txt").write_text("".join(f"line {n}\n" for n in range(1, 1001)))
    service = SearchService([root])
    try:
        for path in ("app/leak.py", "../secrets.txt", str(outside), "app/../../secrets.txt"):
            with pytest.raises(SearchError, match="outside the served roots"):
                service.read(path)
        with pytest.raises(SearchError, match="no such file"):
            service.read("app/missing.py")
        alias = service.read("app/alias.py", 1, 1)
        assert (alias["path"], alias["text"]) == ("app/session.py", '"""HTTP sessions."""')
        capped = service.read("long.txt", 10)
        assert (capped["start_line"], capped["end_line"]) == (10, 10 + READ_MAX_LINES - 1)
        assert capped["text"].splitlines()[0] == "line 10"
    finally:
        service.close()
