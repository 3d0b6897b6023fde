"""The HTTP daemon's guard against slow, idle, oversized and wrongly authorised clients,
on a real uvicorn server in this process (the timeouts shortened)."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from anekit.search import http

TOKEN = "ab" * 32


class _Echo:
    """Stands in for the MCP SDK's server: its app answers with the body it read."""

    def streamable_http_app(self, **_: Any) -> Any:
        async def app(scope: Any, receive: Any, send: Any) -> None:
            body = b""
            while True:
                message = await receive()
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"echo:" + body})

        return app


@pytest.fixture
def url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    import uvicorn

    monkeypatch.setattr(http, "HEADER_TIMEOUT_S", 0.5)  # 10 s in the daemon
    monkeypatch.setattr(http, "BODY_TIMEOUT_S", 0.5)
    monkeypatch.setattr(http, "MAX_CONNECTIONS", 20)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = uvicorn.Config(
        http.http_app(_Echo(), TOKEN), host="127.0.0.1", port=port, log_level="error",
        http=http.protocol(),
    )  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=5)
    return sock


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closes ``sock`` (within the socket's 5 s timeout)."""
    try:
        return sock.recv(1024) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_partial_headers_are_dropped_and_health_answers_meanwhile(url: str) -> None:
    slow = [_connect(url) for _ in range(10)]
    for sock in slow:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
    assert httpx.get(f"{url}/health", timeout=5).json() == {"status": "ok"}
    assert all(_closed_by_server(sock) for sock in slow)
    idle = _connect(url)  # connects and sends nothing at all
    assert _closed_by_server(idle)


def test_a_byte_every_so_often_does_not_keep_headers_open(url: str) -> None:
    sock = _connect(url)
    started = time.monotonic()
    closed = False
    for byte in b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 40:
        try:
            sock.sendall(bytes([byte]))
        except OSError:
            closed = True
            break
        time.sleep(0.05)
    # The timer counts from the first byte: 2 s of trickling outlived a 0.5 s budget.
    assert closed or _closed_by_server(sock), time.monotonic() - started


def test_a_slow_body_gets_408_and_an_oversized_one_413(url: str) -> None:
    sock = _connect(url)
    sock.sendall(
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + TOKEN.encode()
        + b"\r\nContent-Length: 100\r\n\r\n0123456789"
    )  # fmt: skip
    assert sock.recv(1024).startswith(b"HTTP/1.1 408")
    headers = {"Authorization": f"Bearer {TOKEN}"}
    big = httpx.post(f"{url}/mcp", content=b"x" * (http.MAX_BODY_BYTES + 1), headers=headers)
    assert big.status_code == 413
    ok = httpx.post(f"{url}/mcp", content=b"hello", headers=headers)
    assert (ok.status_code, ok.content) == (200, b"echo:hello")


def test_past_the_limit_the_longest_idle_connection_makes_room(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http, "HEADER_TIMEOUT_S", 30.0)  # no timer frees them meanwhile
    held = [_connect(url) for _ in range(http.MAX_CONNECTIONS)]
    for sock in held:
        sock.sendall(b"GET /health HTTP/1.1\r\n")  # headers never finished
    time.sleep(0.1)
    # a flood of idle connections does not keep out a client that asks at once
    assert httpx.get(f"{url}/health", timeout=5).json() == {"status": "ok"}
    assert _closed_by_server(held[0])  # the one that had waited longest
    for sock in held:
        sock.close()


@pytest.mark.parametrize(
    ("authorization", "status"),
    [
        (f"Bearer {TOKEN}", 200),
        (f"bearer {TOKEN}", 200),  # the scheme is case-insensitive (RFC 7235 §2.1)
        (f"BEARER {TOKEN}", 200),
        (f"Basic {TOKEN}", 401),
        (f"Bearer {TOKEN.upper()}", 401),  # the token is not
        (f"Bearer {TOKEN[:-1]}", 401),
        (TOKEN, 401),
        ("", 401),
    ],
)
def test_the_bearer_scheme_in_any_case_and_only_the_token(
    url: str, authorization: str, status: int
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    assert httpx.post(f"{url}/mcp", content=b"x", headers=headers).status_code == status


def test_rotate_token_never_writes_through_a_planted_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANEKIT_HOME", str(tmp_path / "home"))
    serve = tmp_path / "home" / "serve"
    serve.mkdir(parents=True)
    victim, other = tmp_path / "victim.txt", tmp_path / "other.txt"
    victim.write_text("keep me\n")
    other.write_text("keep me too\n")
    (serve / "token.new").symlink_to(victim)  # the old temporary name
    (serve / "token").symlink_to(other)
    token = http.rotate_token()
    assert victim.read_text() == "keep me\n" and other.read_text() == "keep me too\n"
    path = serve / "token"
    assert not path.is_symlink() and path.read_text().strip() == token
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert http.read_token() == token
    path.unlink()
    path.symlink_to(other)
    with pytest.raises(Exception, match="a symbolic link"):
        http.read_token()


def test_health_answers_while_a_search_is_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search runs on a reader thread: the server's event loop answers meanwhile."""
    import asyncio

    import uvicorn

    from anekit.search.index import Index
    from anekit.search.server import SearchService, mcp_server

    root = tmp_path / "repo"
    root.mkdir()
    (root / "a.py").write_text("def parse_duration(text):\n    return 0\n")
    with Index(root, lanes=["cpu"], cache=False) as index:
        index.update()
    entered, release = threading.Event(), threading.Event()

    def held(self: Index, *args: Any, **kwargs: Any) -> list[Any]:
        entered.set()
        assert release.wait(30)
        return []

    monkeypatch.setattr(Index, "search", held)
    service = SearchService([root])
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = http.http_app(mcp_server(service), TOKEN)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", http=http.protocol())
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"

    async def session() -> list[int]:
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            httpx.AsyncClient(headers=headers, timeout=60) as client,
            Client(streamable_http_client(f"{url}/mcp", http_client=client)) as mcp,
        ):
            search = asyncio.ensure_future(mcp.call_tool("search", {"query": "duration"}))
            while not entered.is_set():
                await asyncio.sleep(0.01)
            answers = []
            async with httpx.AsyncClient(timeout=5) as plain:
                for _ in range(3):
                    answers.append((await plain.get(f"{url}/health")).status_code)
            assert not search.done()
            release.set()
            await search
            return answers

    try:
        deadline = time.monotonic() + 20
        while not server.started:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert asyncio.run(session()) == [200, 200, 200]
    finally:
        release.set()
        server.should_exit = True
        thread.join(10)
        service.close()
