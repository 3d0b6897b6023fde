"""Searching an indexed root (:class:`Searcher`, the search half of
:class:`~anekit.search.index.Index`): a query's candidates from the vector half (the query
embedded in this process, against the :class:`~anekit.search.vectors.VectorIndex` read from
the store) and the keyword half (the store's FTS5 index), joined by the files named after a
name the query names, fused by :func:`anekit.search.rank.fuse` into hits (:class:`SearchHit`);
never a stored path that now runs through a link (:func:`visible`)."""

from __future__ import annotations

import itertools
import os
import stat
import threading
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from anekit.errors import SearchError
from anekit.search.limits import MAX_K, SEARCH_BUDGET_S, check_query
from anekit.search.root import IndexedRoot
from anekit.search.store import Store
from anekit.search.walk import is_walked_name

__all__ = [
    "CANDIDATES_PER_HIT",
    "MIN_CANDIDATES",
    "MODES",
    "NAMED_FILES",
    "NAMED_FILE_CHUNKS",
    "NAMED_NAMES",
    "QUERY_THREADS",
    "SNIPPET_CHARS",
    "SearchHit",
    "Searcher",
    "SharedReading",
    "visible",
]

MODES = ("hybrid", "vector", "keyword")
#: ONNX Runtime threads of the query model: one. A 12-token query alone takes 1.2 ms on
#: two, 1.7 ms on one (MiniLM int8, 2 cores), but the second thread spins on after each
#: run and slows the rest of the search: a hybrid query at 10k chunks took 9.5 ms, not 6.5.
QUERY_THREADS = 1
#: Files named after a name the query names whose chunks join a search's candidates, and
#: how many chunks of each (:func:`_named_file_chunks`).
NAMED_FILES = 8
NAMED_FILE_CHUNKS = 100
#: The names of a query looked up so, in its order (a pasted list of a hundred names costs
#: one scan of the files table per hundred stems).
NAMED_NAMES = 4
#: Candidates each half proposes per hit asked for (at least :data:`MIN_CANDIDATES`).
CANDIDATES_PER_HIT = 5
MIN_CANDIDATES = 50
SNIPPET_CHARS = 300
#: From this many vectors on, the vector half (the query embedded, then the vector index's
#: first pass: its scan, or the graph's candidates) runs on a thread of its own while the
#: keyword half runs, mostly inside SQLite, outside the GIL. Hybrid p50 so against in turn
#: (2 cores, one process, blocks alternated, 2026-12-07): 1M chunks 22.8 / 28.7 ms, 100k
#: 21.7 / 26.4 ms; at 10k and 18k the same within noise (15.8 / 15.3, 15.6 / 15.5 ms), the
#: two halves then waiting on each other's GIL for what they gain.
OVERLAP_MIN_VECTORS = 50_000
#: Threads that embed queries while their searches' keyword halves run (one per search
#: in flight, up to this many).
_EMBEDDING_THREADS = 4
_embedding_pool: ThreadPoolExecutor | None = None
_embedding_pool_lock = threading.Lock()
#: What a vector index's ``first_pass`` gives: the function that finishes its search from
#: the store (:meth:`anekit.search.ann.AnnIndex.first_pass`).
FirstPass = Callable[[Store], list[tuple[int, float]]]


def _embedding_threads() -> ThreadPoolExecutor:
    global _embedding_pool
    with _embedding_pool_lock:
        if _embedding_pool is None:
            _embedding_pool = ThreadPoolExecutor(
                _EMBEDDING_THREADS, thread_name_prefix="anekit-query-embedding"
            )
        return _embedding_pool


@dataclass(frozen=True)
class SearchHit:
    """One answer: where it is, what it is, how it ranked, and its first lines."""

    path: str
    start_line: int
    end_line: int
    symbol: str
    kind: str
    language: str | None
    score: float
    snippet: str

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "score": round(self.score, 6)}


def visible(root: Path, relpath: str, links: dict[str, bool] | None = None) -> bool:
    """Whether a stored path may be shown: no component hidden and none a symbolic link,
    as the walk requires (:mod:`anekit.search.walk`). A store indexed before links were
    refused may hold such a path until its next update; a file deleted since is shown
    (the index is behind, nothing leaks). ``links`` caches folders across calls."""
    cache = {} if links is None else links
    base = os.fspath(root)
    parts = relpath.split("/")
    for depth, part in enumerate(parts):
        if not is_walked_name(part, is_dir=depth < len(parts) - 1):
            return False
        prefix = "/".join(parts[: depth + 1])
        if prefix not in cache:
            try:
                cache[prefix] = stat.S_ISLNK(os.lstat(os.path.join(base, prefix)).st_mode)
            except FileNotFoundError:
                return True
            except OSError:
                cache[prefix] = True  # cannot tell: not shown
        if cache[prefix]:
            return False
    return True


class QueryModel:
    """One query model (an :class:`~anekit.embedder.Embedder`), loaded at its first query."""

    def __init__(self, request: str | Path | None, variant: str) -> None:
        #: The model asked for (a name, a folder, None: the default) and its numerics:
        #: ``int8`` or ``fp32`` (Searcher._query_model).
        self.request = request
        self.variant = variant
        self.encoding = threading.Lock()
        self.embedder: Any = None
        #: Whether the model has embedded once (its session is loaded).
        self.warm = False


class QueryModels:
    """The query models of a process's readers, one per model and numerics: a server over
    many roots made with one model loads it once, not once a root."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._models: dict[tuple[str, str], QueryModel] = {}

    def get(self, model: str | Path | None, variant: str) -> QueryModel:
        with self._lock:
            key = (str(model), variant)
            if key not in self._models:
                self._models[key] = QueryModel(model, variant)
            return self._models[key]

    def loaded(self) -> list[Any]:
        """The embedders loaded so far."""
        with self._lock:
            return [held.embedder for held in self._models.values() if held.embedder is not None]


class SharedReading:
    """What the readers of one store in several threads share, built once: the vector index
    (read-only once built; a new one replaces it when the store moves on) and the query
    model (from ``models``, which readers of other stores may share too). Each
    :class:`~anekit.search.index.Index` keeps its own SQLite connections."""

    def __init__(self, models: QueryModels | None = None) -> None:
        self.lock = threading.Lock()
        self.vectors: Any = None
        self.models = models or QueryModels()


class Searcher(IndexedRoot):
    """What :class:`~anekit.search.index.Index` searches with: the ``k`` best chunks for a
    query, from its store and the readers' :class:`SharedReading`."""

    model: str | Path | None
    _shared: SharedReading

    def release_memory(self) -> None:
        """Give back what searching holds and can get again (the query model's mapped
        word-table pages); for a long-lived server between requests, from any thread."""
        for embedder in self._shared.models.loaded():
            embedder.release_memory()

    def search(
        self,
        query: str,
        k: int = 10,
        mode: str = "hybrid",
        *,
        paths: Sequence[str] = (),
        exts: Sequence[str] = (),
        langs: Sequence[str] = (),
    ) -> list[SearchHit]:
        """The ``k`` best chunks for ``query`` by ``mode`` (``hybrid``: both fused, ``vector`` or
        ``keyword``), among those that pass ``paths``, ``exts``, ``langs`` (Store.filter_ids);
        never a stored path that now runs through a link (:func:`visible`). Refuses ``k``
        outside 1..MAX_K and a query over MAX_QUERY_CHARS; each SQLite statement has
        SEARCH_BUDGET_S seconds."""
        if mode not in MODES:
            raise SearchError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if not 1 <= k <= MAX_K:
            raise SearchError(f"k must be between 1 and {MAX_K}, got {k}")
        check_query(query)
        store = self.store
        # one read transaction: every statement of the search sees one snapshot, and begins
        # and commits once, not once a statement
        with store.budget(SEARCH_BUDGET_S), store.read():
            return self._search(store, query, k, mode, paths, exts, langs)

    def _search(
        self,
        store: Store,
        query: str,
        k: int,
        mode: str,
        paths: Sequence[str],
        exts: Sequence[str],
        langs: Sequence[str],
    ) -> list[SearchHit]:
        if store.identity is None:
            raise SearchError(f"{self.directory}: the index is empty: run `anekit index` first")
        allowed = store.filter_ids(paths, exts, langs)
        wanted = max(MIN_CANDIDATES, CANDIDATES_PER_HIT * k)
        keyword: list[int] = []
        vector_half: Future[FirstPass] | None = None
        if mode == "keyword" or (mode == "hybrid" and query.strip()):
            # In a large store the vector half begins meanwhile (OVERLAP_MIN_VECTORS).
            if mode == "hybrid":
                vector_half = self._vector_half_meanwhile(query, wanted, allowed)
            # in two halves at once (store_keyword.SPLIT_MIN_CHUNKS) unless the vector half
            # has the other core
            found = store.keyword_search(query, wanted, allowed, split=vector_half is None)
            keyword = [chunk_id for chunk_id, _ in found]
        vector = self._vector_ids(query, wanted, allowed, vector_half) if mode != "keyword" else []
        return self.rank(store, query, k, vector, keyword, allowed=allowed)

    def rank(
        self,
        store: Store,
        query: str,
        k: int,
        vector: Sequence[int],
        keyword: Sequence[int],
        more: Sequence[tuple[Sequence[int], float]] = (),
        allowed: AbstractSet[int] | None = None,
    ) -> list[SearchHit]:
        """The ``k`` best hits of ``query`` from the halves' ranked chunk ids (and ``more``
        ranked lists with their weights: bench/static_tier.py's), by
        :func:`anekit.search.rank.fuse`; never a path that now runs through a link. The
        chunks of files named after a name the query names join the candidates unranked
        (:func:`_named_file_chunks`), among the ``allowed`` ones if given."""
        from anekit.search import shims
        from anekit.search.rank import Candidate, fuse
        from anekit.search.store import StoredChunk

        named_files = _named_file_chunks(store, query, allowed) or _topic_file_chunks(
            store, query, allowed
        )
        if named_files:
            more = [*more, (named_files, 0.0)]
        lists = [list(vector), list(keyword), *(list(ranked) for ranked, _ in more)]
        ids = list(dict.fromkeys(chunk_id for ranked in lists for chunk_id in ranked))
        chunks = {chunk.id: chunk for chunk in store.chunks(ids)}
        # The vector index was read from the store as last refreshed: a chunk that a writer
        # replaced since is gone here, and each hit comes from this one read, so each file
        # is seen whole.
        vector, keyword, *others = ([i for i in ranked if i in chunks] for ranked in lists)
        weighted = [(ranked, weight) for ranked, (_, weight) in zip(others, more, strict=True)]
        # Each file's first lines, where a generated file says so (rank.role).
        heads = store.first_chunks([chunk.relpath for chunk in chunks.values()])

        def candidate(chunk: StoredChunk) -> Candidate:
            return Candidate(
                chunk.id,
                chunk.symbol,
                chunk.kind,
                chunk.text,
                chunk.relpath,
                chunk.start_line,
                heads.get(chunk.relpath, ""),
            )

        def run(of: Candidate) -> list[Candidate]:
            """The chunks of a long definition from ``of`` back to its first (rank.fuse)."""
            found = store.definition_run(of.path, of.start_line, of.symbol)
            if of.id not in {chunk.id for chunk in found}:
                return []  # the file changed since the search read it
            chunks.update((chunk.id, chunk) for chunk in found)
            return [candidate(chunk) for chunk in found]

        def follow(of: Candidate) -> list[Candidate]:
            """The first chunks of the files ``of`` forwards to, when it is a whole shim."""
            if of.start_line != 1 or of.text.count("\n") > shims.MAX_LINES:
                return []
            spellings = shims.forwards(of.path, of.text)
            if not spellings:
                return []
            files = store.file_heads([of.path, *spellings])
            if files.get(of.path, (None, 0))[1] != 1:
                return []  # the file is more than this chunk
            targets = [
                files[path][0]
                for path in spellings
                if path in files and path != of.path and visible(self.root, path, links)
            ]
            chunks.update((chunk.id, chunk) for chunk in targets)
            return [candidate(chunk) for chunk in targets]

        candidates = {chunk_id: candidate(chunk) for chunk_id, chunk in chunks.items()}
        # A stored path that now runs through a link is never shown: the ranked hits are
        # checked (not every candidate: each check is a few lstat calls), and a second,
        # whole ranking is made in the rare case that too few are left.
        links: dict[str, bool] = {}
        root_name = self.root.name
        shown: list[tuple[int, float]] = []
        for wanted_hits in (2 * k, len(chunks) + k):
            ranked = fuse(
                query,
                vector,
                keyword,
                candidates,
                wanted_hits,
                run,
                root_name,
                follow,
                more=weighted,
            )
            shown = [(i, s) for i, s in ranked if visible(self.root, chunks[i].relpath, links)]
            if len(shown) >= k or len(ranked) < wanted_hits:
                break
        hits = []
        for chunk_id, score in shown[:k]:
            chunk = chunks[chunk_id]
            hits.append(
                SearchHit(
                    path=chunk.relpath,
                    start_line=chunk.start_line,
                    end_line=chunk.end_line,
                    symbol=chunk.symbol,
                    kind=chunk.kind,
                    language=chunk.language,
                    score=score,
                    snippet=chunk.text[:SNIPPET_CHARS],
                )
            )
        return hits

    def _vector_half_meanwhile(
        self, query: str, k: int, allowed: AbstractSet[int] | None
    ) -> Future[FirstPass] | None:
        """The vector half's first part under way on another thread (the query embedded,
        then the vector index's :meth:`first_pass`, which reads nothing from the store),
        when the store holds :data:`OVERLAP_MIN_VECTORS` vectors and the query model is
        loaded; else None."""
        vectors = self._shared.vectors
        if vectors is None or len(vectors) < OVERLAP_MIN_VECTORS or not query.strip():
            return None
        held = self._query_model()
        if not held.warm:  # its first query loads it, on the search's own thread
            return None
        self._check_query_model()  # another model's query vector: refused here, by name
        index = self._vectors()  # caught up here: the store is read on this thread only

        def first_pass() -> FirstPass:
            begun: FirstPass = index.first_pass(self._encode(held, query), k, allowed)
            return begun

        return _embedding_threads().submit(first_pass)

    def _vector_ids(
        self,
        query: str,
        k: int,
        allowed: AbstractSet[int] | None,
        begun: Future[FirstPass] | None = None,
    ) -> list[int]:
        if not query.strip():
            return []
        if begun is not None:  # its query model was checked before it began
            return [chunk_id for chunk_id, _ in begun.result()(self.store)]
        if self._shared.vectors is None:  # the first search: check the graph meanwhile
            from anekit.search.ann import check_in_background

            check_in_background(self.store.directory)
        query_vector = self._query_vector(query)
        self._check_query_model()
        found = self._vectors().search(query_vector, k, allowed, store=self.store)
        return [chunk_id for chunk_id, _ in found]

    def _vectors(self) -> Any:
        """The vector index (:func:`anekit.search.ann.open_vectors`: the store's graph, or
        exact search), caught up or rebuilt when the store's generation moved on (shared
        with the other threads' readers of this store, :class:`SharedReading`)."""
        from anekit.search.ann import open_vectors

        shared = self._shared
        current = shared.vectors
        if current is not None and current.is_current(self.store):
            return current  # the common case, without the lock
        with shared.lock:  # one reader builds it; the others wait for that one
            shared.vectors = open_vectors(self.store, shared.vectors)
            return shared.vectors

    def _query_model(self) -> QueryModel:
        """The query model of this store's model, in the numerics closest to the store's
        (ONNX Runtime int8 for an int8 store, fp32 for fp16 and fp32 stores)."""
        identity = self.store.identity
        variant = "int8" if identity is not None and identity.variant == "int8" else "fp32"
        return self._shared.models.get(self.model_request(), variant)

    def _check_query_model(self) -> None:
        """A :class:`SearchError` when the query was embedded by another model than the
        store's vectors were (their scores would mean nothing)."""
        identity = self.store.identity
        embedder = self._query_model().embedder
        if identity is None or embedder is None or embedder.model_id == identity.model:
            return
        raise SearchError(
            f"{self.directory}: the index was made with the model {identity.model!r}, and "
            f"this search embeds queries with {embedder.model_id!r}: name the index's model "
            "(--model NAME or FOLDER), or index again with this one"
        )

    def _query_vector(self, query: str) -> np.ndarray:
        """The query embedded in this process by :meth:`_query_model`."""
        return self._encode(self._query_model(), query)

    def _encode(self, held: QueryModel, query: str) -> np.ndarray:
        """``query`` embedded by ``held`` (loaded at its first query); from any thread:
        nothing here reads the store."""
        variant = held.variant
        with held.encoding:
            if held.embedder is None:
                from anekit.embedder import Embedder

                held.embedder = Embedder(
                    held.request,
                    runtime="onnx",
                    variant=variant,
                    threads=QUERY_THREADS,
                    isolated_build=True,
                )
            if not held.warm:  # the first query loads the model's session, once
                vector = np.asarray(held.embedder.encode([query])[0], np.float32)
                held.warm = True
                return vector
            embedder = held.embedder
        # ONNX Runtime's run and the tokenizer are thread-safe
        return np.asarray(embedder.encode([query])[0], np.float32)


def _named_file_chunks(store: Store, query: str, allowed: AbstractSet[int] | None) -> list[int]:
    """The first chunks of the files named after a name the query names (its first
    :data:`NAMED_NAMES`: ``FlatMap.scala`` and ``flat_map.rs`` for ``flatMap``, plurals
    too), at most :data:`NAMED_FILES` files and
    :data:`NAMED_FILE_CHUNKS` chunks each: where its definition most likely is, though
    neither half proposed it (a name defined in many files: ``flatMap`` in every instance)."""
    from anekit.search.rank import identifiers
    from anekit.search.terms import identifier_parts

    stems: set[str] = set()
    for parts in identifiers(query)[:NAMED_NAMES]:
        words = identifier_parts(parts[-1])
        for joined in {"".join(words), "_".join(words), "-".join(words)}:
            stems |= {joined, joined + "s"}
        stems.add("".join(words) + "attribute")  # C#: [JsonProperty] is JsonPropertyAttribute
    if not stems:
        return []
    files = store.files_named(stems)[:NAMED_FILES]
    ids = store.file_chunk_ids(files, NAMED_FILE_CHUNKS)
    return ids if allowed is None else [i for i in ids if i in allowed]


def _topic_file_chunks(store: Store, query: str, allowed: AbstractSet[int] | None) -> list[int]:
    """For a query that names no identifier, the first chunk of each file named after one
    of its words or two of them in a row (``tasks.ts`` for "task state", ``test-run.ts``
    for "test run"), singular or plural: a file named after the subject, though neither half
    proposed it. A word that names more than :data:`NAMED_FILES` files names none in
    particular (``index``, ``utils``) and is passed over."""
    from anekit.search.rank import identifiers, topic_words

    words = topic_words(query)
    if not words or identifiers(query):
        return []
    spellings: list[set[str]] = []
    for word in dict.fromkeys(words):
        spellings.append({word, word + "s", word.removesuffix("s")})
    for first, second in itertools.pairwise(words):
        spellings.append({first + sep + second for sep in ("", "_", "-")})
    files: list[str] = []
    for found in store.files_named_each(spellings):
        if len(found) <= NAMED_FILES:
            files += [path for path in found if path not in files]
    if not files:
        return []
    heads = store.file_heads(files[: 2 * NAMED_FILES])  # one query for them all
    ids = [heads[path][0].id for path in files if path in heads]
    return ids if allowed is None else [i for i in ids if i in allowed]
