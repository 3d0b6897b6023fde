"""An indexed root and its store (:class:`IndexedRoot`, the base of the two halves of
:class:`~anekit.search.index.Index`: :class:`~anekit.search.indexer.Indexer` and
:class:`~anekit.search.searcher.Searcher`), and finding the root that holds a path
(:func:`find_root`)."""

from __future__ import annotations

import os
from pathlib import Path

from anekit.errors import SearchError
from anekit.search.store import DB_FILE, Store, store_dir

__all__ = ["IndexedRoot", "find_root"]


def find_root(start: Path) -> Path:
    """The indexed root holding ``start``: the nearest folder at or above it with a
    store (as git finds ``.git``); :class:`SearchError` when there is none."""
    # Upwards as named, not through links: a link inside an indexed root (to /etc, to
    # /) is a path of that root, which the walk sets aside; its target is not a root.
    here = Path(os.path.abspath(start))
    for folder in (here, *here.parents):
        if not folder.is_symlink() and (store_dir(folder) / "store.db").exists():
            return folder.resolve()
    raise SearchError(f"no anekit index at or above {start}: run `anekit index` first")


class IndexedRoot:
    """The root, its store directory and the store's connection, opened on first use, that
    the halves of :class:`~anekit.search.index.Index` share (set by its constructor)."""

    root: Path
    directory: Path
    model: str | Path | None
    _store: Store | None

    def model_request(self) -> str | Path | None:
        """The model to embed with: the one asked for, else the folder the store was
        indexed with when it was named by its path (``--model PATH``), else None (the
        default). A store that cannot be read (damaged, or not there yet) records none."""
        if self.model is not None:
            return self.model
        if not (self.directory / DB_FILE).is_file():
            return None
        try:
            folder = self.store.model_folder
        except SearchError:  # damaged: the writer's check rebuilds it, the reader says why
            return None
        return folder if folder is not None and folder.is_dir() else None

    @property
    def store(self) -> Store:
        if self._store is not None and self._store.replaced():
            self._close_store()  # deleted or made anew since: read the new one
        if self._store is None:
            self._store = Store(self.directory)  # a damaged one: DamagedStoreError
        return self._store

    def _close_store(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
