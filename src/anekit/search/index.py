"""The code search index of one root (:class:`Index`): its store, updated and searched.

:class:`Index` is made of two halves, each in a module of its own, sharing the root and its
store (:class:`~anekit.search.root.IndexedRoot`): :class:`~anekit.search.indexer.Indexer`
(walk, read, chunk, embed what is new, write: :meth:`Index.update`, :meth:`Index.forget`;
its module docstring says how a run stays searchable and survives a kill) and
:class:`~anekit.search.searcher.Searcher` (the vector and keyword halves of a query, fused:
:meth:`Index.search`, :meth:`Index.rank`). The names they define are importable from here as
before; their module constants are read where they are defined (set them there).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anekit import config
from anekit.errors import SearchError
from anekit.search.cache import VectorCache
from anekit.search.indexer import CACHE_BATCH as CACHE_BATCH
from anekit.search.indexer import CHECKPOINT_SECONDS as CHECKPOINT_SECONDS
from anekit.search.indexer import FIRST_CHECKPOINT_SECONDS as FIRST_CHECKPOINT_SECONDS
from anekit.search.indexer import FIRST_WRITE_CHUNKS as FIRST_WRITE_CHUNKS
from anekit.search.indexer import ROUND_CHUNKS as ROUND_CHUNKS
from anekit.search.indexer import WRITE_CHUNKS as WRITE_CHUNKS
from anekit.search.indexer import Indexer, IndexSummary, Progress
from anekit.search.indexer import _File as _File
from anekit.search.indexer import _in_scope as _in_scope
from anekit.search.indexer import _relative_prefixes as _relative_prefixes
from anekit.search.indexer import _Writer as _Writer
from anekit.search.root import find_root
from anekit.search.searcher import CANDIDATES_PER_HIT as CANDIDATES_PER_HIT
from anekit.search.searcher import MIN_CANDIDATES as MIN_CANDIDATES
from anekit.search.searcher import MODES as MODES
from anekit.search.searcher import NAMED_FILE_CHUNKS as NAMED_FILE_CHUNKS
from anekit.search.searcher import NAMED_FILES as NAMED_FILES
from anekit.search.searcher import NAMED_NAMES as NAMED_NAMES
from anekit.search.searcher import QUERY_THREADS as QUERY_THREADS
from anekit.search.searcher import SNIPPET_CHARS as SNIPPET_CHARS
from anekit.search.searcher import Searcher, SearchHit, SharedReading, visible
from anekit.search.searcher import _named_file_chunks as _named_file_chunks
from anekit.search.searcher import _topic_file_chunks as _topic_file_chunks
from anekit.search.store import Store, store_dir

if TYPE_CHECKING:
    from anekit.lanes.pool import Pool
    from anekit.models.encoders import LoadedModel
    from anekit.search.shared_lanes import SharedLanes

__all__ = [
    "Index",
    "IndexSummary",
    "Progress",
    "SearchHit",
    "SharedReading",
    "find_root",
    "visible",
]


class Index(Indexer, Searcher):
    """The code search index of one root.

    ``store``: the store directory (default ``$ANEKIT_STORE``, else ``root/.anekit``);
    ``lanes``: the embedding lanes (default: this machine's); ``model``: the embedding
    model (default all-MiniLM-L6-v2); ``cache``: the machine-wide vector cache (None: off);
    ``ray``: embed on the Ray cluster at this address instead (``"local"``: an instance of
    this machine's own; :func:`anekit.lanes.open_pool`), one lane (``lanes``' first, or
    ``auto``); ``shared``: what readers of this store in other threads share (a server's
    reader pool); ``shared_lanes``: a lane pool shared with other roots' indexes
    (:class:`~anekit.search.shared_lanes.SharedLanes`, of the same ``lanes``), which this
    index borrows and never closes.
    """

    def __init__(
        self,
        root: Path | str,
        store: Path | str | None = None,
        *,
        lanes: Sequence[str] | None = None,
        model: str | Path | None = None,
        cache: VectorCache | bool | None = True,
        wait: float | None = 0.0,
        ray: str | None = None,
        shared: SharedReading | None = None,
        shared_lanes: SharedLanes | None = None,
    ) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise SearchError(f"{root}: not a folder")
        configured = store or config.search_store()
        self.directory = Path(configured).resolve() if configured else store_dir(self.root)
        self.lanes = list(lanes) if lanes else None
        self.model = model
        #: The Ray cluster that embeds (``"local"``: an instance of this machine's own),
        #: or None: this machine's lanes.
        self.ray = ray
        self.cache = VectorCache() if cache is True else (cache or None)
        #: How long a write (update, forget) waits for another writer of the store
        #: (seconds; None: as long as it takes) before :class:`StoreBusy` names it.
        self.wait = wait
        self._store: Store | None = None
        #: Whether the store was checked for damage (once, before the first write).
        self._checked = False
        self._registered = False
        self.shared_lanes = shared_lanes
        #: The embedding lanes and their tokenizer, started by the first update that
        #: embeds (:meth:`_lanes`).
        self._pool: Pool | None = None
        self._tokenizer: Any = None
        self._model: LoadedModel | None = None
        self._shared = shared or SharedReading()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        if self._store is not None:
            self._store.close()
            self._store = None
        if self.cache is not None:
            self.cache.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
