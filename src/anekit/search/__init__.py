"""Code search: index a repository into a local store and find code by meaning.

Modules, each with one job: :mod:`~anekit.search.walk` (which files),
:mod:`~anekit.search.chunk` (where to cut them), :mod:`~anekit.search.store` (the SQLite
store, the single source of truth; its parts are the ``store_*`` modules),
:mod:`~anekit.search.terms` (code-aware keyword terms), :mod:`~anekit.search.vectors`
(the vector index derived from the store), :mod:`~anekit.search.cache` (the machine-wide
vector cache), :mod:`~anekit.search.rank` (fusion and priors), :mod:`~anekit.search.index`
(:class:`Index`: update and search; its halves are :mod:`~anekit.search.indexer` and
:mod:`~anekit.search.searcher`), :mod:`~anekit.search.lock` (one writer per store),
:mod:`~anekit.search.evaluate` (retrieval metrics).
"""

from __future__ import annotations

from typing import Any

__all__ = ["Index", "SearchHit"]


def __getattr__(name: str) -> Any:
    # Imported on use: ``anekit.search.walk`` alone must not load the index machinery.
    if name in __all__:
        from anekit.search import index

        return getattr(index, name)
    raise AttributeError(f"module 'anekit.search' has no attribute {name!r}")
