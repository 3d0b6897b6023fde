"""The MCP server over streamable HTTP: 127.0.0.1 only, a bearer token, clear refusals.

:func:`http_app` wraps the MCP SDK's Starlette app (``/mcp``) so that ``GET /health`` is
open and everything else needs ``Authorization: Bearer <token>`` (the scheme in any case,
RFC 7235 §2.1; the token compared in constant time, :func:`hmac.compare_digest`); the
token lives in a mode-0600 file under ``ANEKIT_HOME`` (:func:`token_path`). Malformed
JSON-RPC and unknown tools get JSON-RPC errors from the SDK; the server answers the next
request as before. :func:`check_port` refuses a taken port, naming its holder.

No client can hold the server: a request's headers must arrive within
:data:`HEADER_TIMEOUT_S` of its first byte (:func:`protocol`, a uvicorn protocol with that
timer; uvicorn itself waits for ever) and its body within :data:`BODY_TIMEOUT_S` (else
408), a body over :data:`MAX_BODY_BYTES` gets 413 before it is read whole, and past
:data:`MAX_CONNECTIONS` open connections the one that has waited longest for its headers
is closed to make room (the newcomer only when every connection is busy with a request),
so that slow or idle clients can neither use up the process's file descriptors nor keep a
client that sends its request at once (``/health``) out.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hmac
import os
import secrets
import socket
import tempfile
from pathlib import Path
from typing import Any

from anekit import config
from anekit.errors import SearchError

__all__ = [
    "BODY_TIMEOUT_S",
    "DEFAULT_PORT",
    "HEADER_TIMEOUT_S",
    "HOST",
    "MAX_BODY_BYTES",
    "MAX_CONNECTIONS",
    "check_port",
    "http_app",
    "protocol",
    "read_token",
    "rotate_token",
    "token_path",
]

HOST = "127.0.0.1"
#: The fixed default port of ``anekit serve`` (a taken port is an error, not a move).
DEFAULT_PORT = 7433
#: The largest request body the MCP endpoint reads (bytes).
MAX_BODY_BYTES = 1 << 20
#: Seconds from a request's first byte to the end of its headers.
HEADER_TIMEOUT_S = 10.0
#: Seconds from the end of a request's headers to the end of its body.
BODY_TIMEOUT_S = 30.0
#: Open connections beyond which a new one is closed at once.
MAX_CONNECTIONS = 200


def token_path() -> Path:
    return config.home() / "serve" / "token"


def rotate_token() -> str:
    """Write a new token (32 random bytes, hex) to :func:`token_path`, mode 0600, and
    return it; the old one stops working when the server reads the file again. The new
    file is made under a fresh random name (``O_EXCL``: never an existing file or link)
    and renamed over the old, which replaces a link there rather than writing through it."""
    path = token_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(32)
    handle, temporary = tempfile.mkstemp(prefix=".token-", dir=path.parent)  # mode 0600
    try:
        with os.fdopen(handle, "w") as out:
            out.write(token + "\n")
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return token


def read_token() -> str:
    """The token, made on first use. A token file that others may read, or that is a
    symbolic link, is refused."""
    path = token_path()
    if not os.path.lexists(path):
        return rotate_token()
    if path.is_symlink():
        raise SearchError(
            f"{path}: a symbolic link, not a token; run `anekit serve --rotate-token`"
        )
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise SearchError(
            f"{path}: readable by others (mode {mode:o}); run `chmod 600 {path}` or "
            "`anekit serve --rotate-token`"
        )
    token = path.read_text(encoding="utf-8").strip()
    if len(token) < 32:
        raise SearchError(f"{path}: not a token; run `anekit serve --rotate-token`")
    return token


def check_port(port: int, host: str = HOST) -> None:
    """Raise :class:`SearchError` naming the holder when ``host:port`` is taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                raise SearchError(f"{host}:{port}: cannot listen ({error.strerror})") from error
            holder = _port_holder(port)
            raise SearchError(
                f"{host}:{port} is taken{f' by {holder}' if holder else ''}; stop it or "
                "choose another port with --port (anekit does not move to another port "
                "on its own: clients are registered with this one)"
            ) from error


def _port_holder(port: int) -> str:
    """The process listening on ``port`` (Linux: from /proc), or ""."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{inode}]")
    if not inodes:
        return ""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd) in inodes:
                    command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").strip()
                    return f"process {proc.name} ({command.decode(errors='replace')[:120]})"
    return "another process"


def http_app(server: Any, token: str, page: Any = None) -> Any:
    """The Starlette app: ``/mcp`` behind the bearer token, and an open ``GET /health``;
    with ``page`` (a :class:`~anekit.search.web.WebPage`), the search page at ``GET /``
    (open: it holds no data) and its API under ``/api/`` (behind the token), both refused
    for a foreign Host or Origin."""
    from starlette.responses import JSONResponse

    from anekit.search.web import API_PREFIX

    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        json_response=True,
        max_request_body_size=MAX_BODY_BYTES,
        host=HOST,
    )
    expected = token.encode()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        if scope["path"] == "/health" and scope["method"] == "GET":
            await JSONResponse({"status": "ok"})(scope, receive, send)
            return
        web = page is not None and (scope["path"] == "/" or scope["path"].startswith(API_PREFIX))
        if web:
            refused = page.allowed(scope)
            if refused is not None:
                await JSONResponse({"error": refused}, status_code=403)(scope, receive, send)
                return
            if scope["path"] == "/" and scope["method"] == "GET":
                await page.page_response(scope, receive, send)
                return
        given = dict(scope["headers"]).get(b"authorization", b"")
        scheme, _, credentials = given.partition(b" ")
        # compare_digest on every request, whatever the scheme: no shortcut to time
        if not (hmac.compare_digest(credentials.strip(), expected) and scheme.lower() == b"bearer"):
            body = {"error": "missing or wrong bearer token (see docs/agents.md)"}
            answer = JSONResponse(body, status_code=401, headers={"WWW-Authenticate": "Bearer"})
            await answer(scope, receive, send)
            return
        buffered = await _read_body(receive)
        if isinstance(buffered, int):
            why = "request body too large" if buffered == 413 else "request body too slow"
            headers = {"Connection": "close"}
            await JSONResponse({"error": why}, status_code=buffered, headers=headers)(
                scope, receive, send
            )
            return

        async def replay() -> Any:
            return buffered.pop(0) if buffered else await receive()

        if web:
            await page.api(scope, replay, send)
            return
        await app(scope, replay, send)

    return guarded


async def _read_body(receive: Any) -> list[Any] | int:
    """A request's body messages, read within :data:`BODY_TIMEOUT_S` and up to
    :data:`MAX_BODY_BYTES`; else the status to answer (408, 413)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + BODY_TIMEOUT_S
    messages: list[Any] = []
    size = 0
    while True:
        try:
            message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0.0))
        except TimeoutError:
            return 408
        messages.append(message)
        if message["type"] != "http.request":
            return messages  # a disconnect: the app sees it
        size += len(message.get("body", b""))
        if size > MAX_BODY_BYTES:
            return 413
        if not message.get("more_body"):
            return messages


def protocol() -> type:
    """uvicorn's h11 protocol with a header timer (:data:`HEADER_TIMEOUT_S`) and a limit
    of :data:`MAX_CONNECTIONS`; pass it to ``uvicorn.Config(http=...)``."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    # The connections waiting for a request's headers, oldest first (the server's).
    waiting: dict[Any, None] = {}

    class TimedH11Protocol(H11Protocol):
        """Closes a connection whose request headers do not come in time; past the limit
        of connections, the one that has waited longest for its headers makes room (a
        client that sends its request at once is served during a flood of idle ones)."""

        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            if len(self.connections) > MAX_CONNECTIONS:
                if not waiting:
                    transport.close()  # every connection is busy with a request
                    return
                oldest = next(iter(waiting))
                oldest._cancel_header_timer()
                oldest.transport.close()
            self._await_headers()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:  # the headers are in
                self._cancel_header_timer()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._await_headers()  # the next request on this connection

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_header_timer()
            super().connection_lost(exc)

        def _await_headers(self) -> None:
            self._cancel_header_timer()
            self._header_timer = self.loop.call_later(HEADER_TIMEOUT_S, self._headers_late)
            waiting[self] = None

        def _cancel_header_timer(self) -> None:
            waiting.pop(self, None)
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_late(self) -> None:
            self._header_timer = None
            waiting.pop(self, None)
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

    return TimedH11Protocol
