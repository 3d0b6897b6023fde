"""Code search: index a repository into a local store and find code by meaning.

Modules, each with one job: :mod:`~anekit.search.walk` (which files),
:mod:`~anekit.search.chunk` (where to cut them), :mod:`~anekit.search.store` (the SQLite
store, the single source of truth), :mod:`~anekit.search.terms` (code-aware keyword
terms), :mod:`~anekit.search.evaluate` (retrieval metrics).
"""
