"""``anekit serve``: MCP over streamable HTTP on 127.0.0.1 behind a bearer token, with the
roots watched; refusals that never take the server down. A real server process."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from served import free_port, wait_until_up

MODULE = 'def parse_duration(text):\n    """Seconds in a duration such as 1h30m."""\n    return 0\n'


@dataclass
class Served:
    root: Path
    home: Path
    port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def token(self) -> str:
        return (self.home / "serve" / "token").read_text().strip()


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "ANEKIT_HOME": str(home), "HF_HUB_OFFLINE": "1"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("repo")
    (root / "app.py").write_text(MODULE)
    home = tmp_path_factory.mktemp("home")
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "anekit", "serve", str(root), "--port", str(port), "--lane", "cpu"],
        env=_env(home),
        stderr=subprocess.PIPE,
    )
    wait_until_up(process, port)
    yield Served(root, home, port, process)
    process.terminate()
    process.wait(30)


def _rpc(served: Served, body: bytes | dict[str, Any], token: str | None) -> httpx.Response:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    content = body if isinstance(body, bytes) else None
    return httpx.post(
        f"{served.url}/mcp",
        headers=headers,
        content=content,
        json=None if content is not None else (body or initialize),
        timeout=30,
    )


def _answers(served: Served) -> bool:
    reply = _rpc(served, {}, served.token)
    return reply.status_code == 200 and reply.json()["result"]["serverInfo"]["name"] == "anekit"


def test_health_is_open_and_everything_else_needs_the_token(served: Served) -> None:
    assert httpx.get(f"{served.url}/health").json() == {"status": "ok"}
    token_file = served.home / "serve" / "token"
    assert token_file.stat().st_mode & 0o777 == 0o600
    assert len(served.token) == 64  # 32 random bytes, hex
    # one hex digit off (a token ending in 0 gets a 1: "+ '0'" was the token itself)
    near = served.token[:-1] + ("1" if served.token.endswith("0") else "0")
    for token in (None, "wrong", near):
        reply = _rpc(served, {}, token)
        assert reply.status_code == 401, token
        assert "bearer token" in reply.json()["error"]
    assert httpx.get(f"{served.url}/mcp").status_code == 401
    assert _answers(served)


def test_bad_requests_get_errors_and_the_server_goes_on(served: Served) -> None:
    too_large = _rpc(served, b"x" * (10 * 1024 * 1024), served.token)
    assert too_large.status_code == 413
    assert _answers(served)
    malformed = _rpc(served, b"{not json", served.token)
    assert malformed.status_code == 400
    assert malformed.json()["error"]["code"] == -32700  # JSON-RPC parse error
    assert _answers(served)
    assert served.process.poll() is None


def test_a_taken_port_is_an_error_naming_its_holder(served: Served, tmp_path: Path) -> None:
    second = subprocess.run(
        [sys.executable, "-m", "anekit", "serve", str(served.root), "--port", str(served.port)],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert second.returncode == 2
    assert f"127.0.0.1:{served.port} is taken by process {served.process.pid} " in second.stderr
    assert "anekit serve" in second.stderr  # the holder's command line


async def _tools(served: Served) -> dict[str, Any]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {served.token}"}
    seen: dict[str, Any] = {}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        transport = streamable_http_client(f"{served.url}/mcp", http_client=http)
        async with Client(transport, read_timeout_seconds=60) as client:
            seen["tools"] = [tool.name for tool in (await client.list_tools()).tools]
            # The watcher indexes the root when the server starts, then each saved file.
            (served.root / "later.py").write_text("def compute_tariff_total(rows):\n    return 0\n")
            deadline = time.monotonic() + 60
            while True:
                result = await client.call_tool("search", {"query": "compute_tariff_total"})
                content = result.structured_content or {}
                hits = [] if result.is_error else content.get("hits", [])
                if hits and hits[0]["path"] == "later.py":
                    seen["found"] = hits[0]
                    break
                assert time.monotonic() < deadline, result
                await asyncio.sleep(0.2)
            outside = await client.call_tool("read", {"path": "/etc/passwd"})
            seen["outside"] = outside.content[0].text  # type: ignore[union-attr]
            unknown = await client.call_tool("no_such_tool", {})
            seen["unknown"] = (unknown.is_error, unknown.content[0].text)  # type: ignore[union-attr]
    return seen


def test_the_sdk_client_over_http_with_the_token(served: Served) -> None:
    seen = asyncio.run(_tools(served))
    assert seen["tools"] == ["search", "read", "files", "status", "index"]
    assert seen["found"]["symbol"] == "compute_tariff_total"
    assert "outside the served roots" in seen["outside"]
    assert seen["unknown"][0] and "no_such_tool" in seen["unknown"][1]
    assert served.process.poll() is None
