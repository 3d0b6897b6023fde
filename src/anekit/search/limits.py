"""What one search may ask: the limits the CLI, the MCP tools and :class:`Index.search`
share (light to import: the CLI's options are built from them)."""

from __future__ import annotations

from anekit.errors import SearchError

__all__ = ["MAX_K", "MAX_QUERY_CHARS", "SEARCH_BUDGET_S", "check_query"]

#: The most hits one search returns.
MAX_K = 10_000
#: The longest query taken (a longer one is refused, not cut).
MAX_QUERY_CHARS = 1000
#: Seconds any SQLite statement of one search may run (a backstop: searches take
#: milliseconds; no one request may hold a reader).
SEARCH_BUDGET_S = 10.0


def check_query(query: str) -> None:
    """A :class:`SearchError` for a query over :data:`MAX_QUERY_CHARS` characters."""
    if len(query) > MAX_QUERY_CHARS:
        raise SearchError(
            f"the query has {len(query)} characters; the limit is {MAX_QUERY_CHARS} "
            "(ask a question or name an identifier: the model reads about 256 tokens)"
        )
