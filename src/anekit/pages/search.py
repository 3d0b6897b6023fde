"""The search page of ``anekit serve`` (``GET /``): a query box, filters, results and the
file around a hit, from the server's ``/api`` (see :mod:`anekit.search.web`)."""

from __future__ import annotations

from anekit.pages.render import asset, csp_hash, render

__all__ = ["search_page"]


def search_page() -> tuple[str, str]:
    """(the page, its Content-Security-Policy): inline style and script allowed by their
    hashes, requests to this server only, no frames, no forms posted anywhere."""
    style, script = asset("page.css") + asset("search.css"), asset("search.js")
    page = render("search.html.j2", style=style, script=script)
    policy = "; ".join(
        [
            "default-src 'none'",
            f"script-src {csp_hash(script)}",
            f"style-src {csp_hash(style)}",
            "connect-src 'self'",
            "img-src 'self' data:",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        ]
    )
    return page, policy
