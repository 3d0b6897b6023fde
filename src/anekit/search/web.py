"""The search page of ``anekit serve``: ``GET /`` and the JSON it reads (``/api/...``).

The page (:func:`anekit.pages.search_page`) holds no data and no token: it asks for the
token once, keeps it in the tab's session storage and sends it as ``Authorization:
Bearer`` on each ``/api`` request, which :func:`anekit.search.http.http_app` checks as it
checks ``/mcp``. The API is the MCP tools' work (:class:`~anekit.search.server.
SearchService`), so it refuses what they refuse: a path outside the served roots, a bad
filter, a ``k`` out of range. Every page and API answer checks ``Host`` (and ``Origin``
when a browser sends one) against the served address, against DNS rebinding, and the
page's Content-Security-Policy allows its own inline style and script (by hash) and
requests to this server, nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from anekit.errors import AnekitError

__all__ = ["API_PREFIX", "WebPage"]

API_PREFIX = "/api/"

_log = logging.getLogger(__name__)


class WebPage:
    """``GET /`` and ``GET /api/{search,read,status}`` for ``service`` served at
    ``host:port``."""

    def __init__(self, service: Any, host: str, port: int) -> None:
        from anekit.pages import search_page

        self.service = service
        self.page, self.policy = search_page()
        self.hosts = {f"{host}:{port}", f"localhost:{port}"}
        self.origins = {f"http://{name}" for name in self.hosts}

    def allowed(self, scope: dict[str, Any]) -> str | None:
        """Why a request for the page or the API is refused (None: it is not): a Host
        other than the served address, or a cross-origin browser request."""
        headers = dict(scope["headers"])
        host = headers.get(b"host", b"").decode("latin-1")
        if host not in self.hosts:
            return f"Host {host!r} is not this server ({', '.join(sorted(self.hosts))})"
        origin = headers.get(b"origin")
        if origin is not None and origin.decode("latin-1") not in self.origins:
            return f"Origin {origin.decode('latin-1')!r} may not use this server"
        return None

    async def page_response(self, scope: Any, receive: Any, send: Any) -> None:
        from starlette.responses import HTMLResponse

        headers = {
            "Content-Security-Policy": self.policy,
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
            "X-Frame-Options": "DENY",
            "Cache-Control": "no-store",
        }
        await HTMLResponse(self.page, headers=headers)(scope, receive, send)

    async def api(self, scope: Any, receive: Any, send: Any) -> None:
        """One ``/api`` request (the token already checked)."""
        from starlette.requests import Request
        from starlette.responses import JSONResponse

        request = Request(scope, receive)
        name = scope["path"][len(API_PREFIX) :]
        handler: dict[str, Callable[[Any], Awaitable[dict[str, Any]]]] = {
            "search": self._search,
            "read": self._read,
            "status": self._status,
        }
        if request.method != "GET" or name not in handler:
            body = {"error": f"no such API: {request.method} {scope['path']}"}
            await JSONResponse(body, status_code=404)(scope, receive, send)
            return
        try:
            answer = await handler[name](request.query_params)
        except (AnekitError, ValueError) as error:
            await JSONResponse({"error": str(error)}, status_code=400)(scope, receive, send)
            return
        except Exception as error:  # a fault of ours: said as JSON, logged, the server goes on
            _log.exception("GET %s failed", scope["path"])
            body = {"error": f"{type(error).__name__}: {error}"}
            await JSONResponse(body, status_code=500)(scope, receive, send)
            return
        headers = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
        await JSONResponse(answer, headers=headers)(scope, receive, send)

    async def _search(self, query: Any) -> dict[str, Any]:
        from anekit.search.searcher import MODES

        mode = query.get("mode", "hybrid")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        # one root: the search the CLI runs; several: each searched and merged by score
        roots = query.getlist("root") or (["all"] if len(self.service.roots) > 1 else None)
        return dict(
            await self.service.call(
                self.service.search,
                query.get("q", ""),
                _integer(query, "k", 20),
                mode,
                tuple(query.getlist("path")),
                (),
                (),
                None,
                roots,
            )
        )

    async def _read(self, query: Any) -> dict[str, Any]:
        path = query.get("path", "")
        if not path:
            raise ValueError("read needs a path")
        start = _integer(query, "start", 1)
        end = _integer(query, "end", None)
        return dict(await self.service.call(self.service.read, path, start, end, query.get("root")))

    async def _status(self, _: Any) -> dict[str, Any]:
        status = dict(await self.service.call(self.service.status))
        return {**status, "lanes": list(self.service.lanes or [])}  # what embeds updates


def _integer(query: Any, name: str, default: int | None) -> Any:
    text = query.get(name)
    if text is None or text == "":
        return default
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {text!r}") from None
