"""The MCP server over streamable HTTP: 127.0.0.1 only, a bearer token, clear refusals.

:func:`http_app` wraps the MCP SDK's Starlette app (``/mcp``) so that ``GET /health`` is
open and everything else needs ``Authorization: Bearer <token>``, compared in constant
time (:func:`hmac.compare_digest`); the token lives in a mode-0600 file under
``ANEKIT_HOME`` (:func:`token_path`). A request body over the SDK's limit, malformed
JSON-RPC and unknown tools get JSON-RPC errors from the SDK; the server answers the next
request as before. :func:`check_port` refuses a taken port, naming its holder.
"""

from __future__ import annotations

import contextlib
import errno
import hmac
import os
import secrets
import socket
from pathlib import Path
from typing import Any

from anekit import config
from anekit.errors import SearchError

__all__ = [
    "DEFAULT_PORT",
    "HOST",
    "MAX_BODY_BYTES",
    "check_port",
    "http_app",
    "read_token",
    "rotate_token",
    "token_path",
]

HOST = "127.0.0.1"
#: The fixed default port of ``anekit serve`` (a taken port is an error, not a move).
DEFAULT_PORT = 7433
#: The largest request body the MCP endpoint reads (bytes).
MAX_BODY_BYTES = 1 << 20


def token_path() -> Path:
    return config.home() / "serve" / "token"


def rotate_token() -> str:
    """Write a new token (32 random bytes, hex) to :func:`token_path`, mode 0600, and
    return it; the old one stops working when the server reads the file again."""
    path = token_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(32)
    temporary = path.with_name(path.name + ".new")
    with os.fdopen(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
        out.write(token + "\n")
    os.chmod(temporary, 0o600)
    os.replace(temporary, path)
    return token


def read_token() -> str:
    """The token, made on first use. A token file that others may read is refused."""
    path = token_path()
    if not path.exists():
        return rotate_token()
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


def http_app(server: Any, token: str) -> Any:
    """The Starlette app: ``/mcp`` behind the bearer token, and an open ``GET /health``."""
    from starlette.responses import JSONResponse

    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        json_response=True,
        max_request_body_size=MAX_BODY_BYTES,
        host=HOST,
    )
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        answer = app
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"")
            if scope["path"] == "/health" and scope["method"] == "GET":
                answer = JSONResponse({"status": "ok"})
            elif not hmac.compare_digest(given, expected):
                body = {"error": "missing or wrong bearer token (see docs/agents.md)"}
                answer = JSONResponse(body, status_code=401, headers={"WWW-Authenticate": "Bearer"})
        await answer(scope, receive, send)

    return guarded
