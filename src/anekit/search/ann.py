"""The approximate vector index of a large store (:class:`AnnIndex`): an HNSW graph over the
store's unit vectors (usearch, int8 components), memory-mapped by readers, caught up from
the store's vector log, its candidates re-scored exactly.

Why: :class:`~anekit.search.vectors.VectorIndex` reads every vector into each reader and
scans them all per query; at a million chunks that is 768 MB per reader and tens of
milliseconds a query. Here a reader maps the graph file (``usearch`` ``view``: pages are
read on demand and shared with the page cache) and holds only the vectors changed since the
graph was built.

* **Files.** ``vectors-<seq>-<tag>.usearch`` (usearch's format) and :data:`ANN_STAMP`, a JSON
  stamp naming it: the store id and identity it was built from, the vector log seq it
  holds every change up to, its count, size and CRC-32. A reader uses the graph only when
  the stamp matches the store, the file has that size and CRC (checked once per file per
  process) and usearch opens it; anything else is reported and the reader falls back to
  exact search (:func:`open_vectors`); the next index run rebuilds it (:func:`maintain`).
* **Changes.** Every vector insert, update and delete appends its chunk id to the store's
  ``vector_log`` (SQLite triggers, ``store_schema.VECTOR_LOG``). A reader masks the graph's
  answers for every chunk logged after the graph's seq and scores those chunks' current
  vectors exactly, so a save is searchable as soon as it is committed, with no re-read of
  the graph. The writer folds the log into the graph when :data:`MERGE_CHANGES` changes
  have gathered (a copy of the graph loaded, changed ids removed and added, written to a
  new file, the stamp replaced, the log trimmed): readers move to the new file at their
  next refresh; the old one is unlinked (open maps stay valid).
* **Search.** The graph gives :data:`CANDIDATES` times ``k`` (at least
  :data:`MIN_CANDIDATES`) candidates, whose fp16 vectors are read from SQLite and re-scored
  in float32, as are the changed chunks'. A filter (``allowed``) of at most
  :data:`EXACT_ALLOWED` chunks is searched exactly from SQLite; a larger one asks the graph
  for proportionally more candidates.
* **Size.** Stores under :data:`MIN_ROWS` vectors stay exact (``VectorIndex``): at 100k its
  int8 scan takes about 2 ms and needs no build; the graph's build costs minutes at 1M.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import uuid
import zlib
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from anekit.search.store import Store
from anekit.search.vectors import VECTORS_FILE, VectorIndex, unit_query, unit_rows

__all__ = [
    "ANN_STAMP",
    "MERGE_CHANGES",
    "MIN_ROWS",
    "AnnIndex",
    "AnnStamp",
    "AnnUnusable",
    "ExactFallback",
    "check_in_background",
    "maintain",
    "open_vectors",
    "usearch_index",
]

log = logging.getLogger(__name__)

ANN_STAMP = "vectors.ann.json"
_FILE_GLOB = "vectors-*.usearch"
#: Stores of at least this many chunks search through the graph; smaller ones exactly.
MIN_ROWS = 200_000
#: The writer folds the vector log into the graph once this many changes have gathered.
MERGE_CHANGES = 20_000
#: A graph whose removed nodes exceed this share of its count is built anew, not merged.
MAX_REMOVED_SHARE = 0.25
# HNSW settings: links per node ("M"), search depth while adding ("efConstruction"), and the
# components' type (int8 of the unit vector times 127: a quarter of float32's bytes).
CONNECTIVITY = 16
EXPANSION_ADD = 128
DTYPE = "i8"
#: The graph's search depth ("ef"); a search asks for at least this many candidates. At
#: 1M chunks (bench/search_million.py) recall@10 against exact was 0.936 at 128, 0.982 at
#: 256, 0.988 at 512 (2 ms a search on two cores), the text queries the hardest.
EXPANSION_SEARCH = 512
#: Candidates re-scored exactly (their vectors read from SQLite): this many times k, and
#: at least MIN_CANDIDATES (64 and 200 gave the same recall@10 at 1M).
CANDIDATES = 2
MIN_CANDIDATES = 64
#: A filter of at most this many chunks is searched exactly (their vectors from SQLite).
EXACT_ALLOWED = 20_000
# The most candidates a filtered search asks the graph for before it searches exactly.
_MAX_GRAPH_COUNT = 20_000
_BUILD_BATCH = 50_000
_STALE_TEMP_S = 600.0


class AnnUnusable(Exception):
    """The store's approximate index cannot be used (the message says why)."""


@dataclass(frozen=True)
class AnnStamp:
    """What a graph file was built from, and how to know it whole."""

    store_id: str
    identity: str
    log_seq: int
    count: int
    removed: int
    dimension: int
    file: str
    size: int
    crc32: int
    dtype: str = DTYPE
    connectivity: int = CONNECTIVITY

    @classmethod
    def read(cls, directory: Path) -> AnnStamp | None:
        """The stamp in ``directory``; None if there is none; AnnUnusable if unreadable."""
        try:
            raw = (directory / ANN_STAMP).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as error:
            raise AnnUnusable(f"{ANN_STAMP} unreadable: {error}") from error
        try:
            stamp = cls(**json.loads(raw))
        except (ValueError, TypeError) as error:
            raise AnnUnusable(f"{ANN_STAMP} malformed: {error}") from error
        for name, kind in (("store_id", str), ("identity", str), ("file", str), ("dtype", str)):
            if not isinstance(getattr(stamp, name), kind):
                raise AnnUnusable(f"{ANN_STAMP} malformed: {name} is not a string")
        for name in ("log_seq", "count", "removed", "dimension", "size", "crc32", "connectivity"):
            value = getattr(stamp, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise AnnUnusable(f"{ANN_STAMP} malformed: {name} is not a count")
        if "/" in stamp.file or "\\" in stamp.file or not stamp.file.startswith("vectors-"):
            raise AnnUnusable(f"{ANN_STAMP} malformed: file {stamp.file!r}")
        return stamp

    def write(self, directory: Path) -> None:
        _atomic_write(directory / ANN_STAMP, json.dumps(asdict(self), sort_keys=True).encode())


# Files whose CRC-32 was checked, by (path, inode, size, mtime): each is read whole once.
_checked: dict[tuple[str, int, int, int], int] = {}
_checked_lock = threading.Lock()


# Held while a file is read for its CRC: a second caller waits and finds it checked.
_reading = threading.Lock()


def _file_crc(path: Path) -> tuple[int, int]:
    """(size, CRC-32) of ``path``, read in blocks (no map: its pages do not count as ours)."""
    stat = path.stat()
    key = (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)
    with _reading:
        with _checked_lock:
            if key in _checked:
                return stat.st_size, _checked[key]
        crc = 0
        with open(path, "rb") as handle:
            while block := handle.read(8 << 20):
                crc = zlib.crc32(block, crc)  # releases the GIL
        with _checked_lock:
            _checked[key] = crc
    return stat.st_size, crc


def check_in_background(directory: Path) -> None:
    """Start reading the stamped graph's CRC-32 on a thread, so that a reader's first
    search does it while its query model loads; :meth:`AnnIndex.open` then finds it done
    (or waits for it). Nothing when there is no stamp; errors are left to the open."""
    try:
        stamp = AnnStamp.read(directory)
    except AnnUnusable:
        return
    if stamp is None:
        return

    def check() -> None:
        with contextlib.suppress(OSError):
            _file_crc(directory / stamp.file)

    threading.Thread(target=check, name="anekit-ann-check", daemon=True).start()


def _identity_key(store: Store) -> str:
    identity = store.identity
    return "" if identity is None else identity.key()


class AnnIndex:
    """A reader's view of the store's graph plus the chunks changed since it was built."""

    def __init__(self, graph: Any, stamp: AnnStamp) -> None:
        self.graph = graph
        self.stamp = stamp
        #: The store generation this index has caught up with (-1: not yet).
        self.generation = -1
        self._seen = stamp.log_seq
        self._delta: dict[int, np.ndarray] = {}  # changed chunks' current unit vectors
        # (chunks changed since the graph, their ids with a vector now, those vectors):
        # replaced whole, so that a search on another thread sees one state or the other
        self._state: tuple[frozenset[int], np.ndarray, np.ndarray] = (
            frozenset(),
            np.zeros(0, np.int64),
            np.zeros((0, stamp.dimension), np.float32),
        )
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """How many chunks have a vector: the graph's, less the changed ones it holds, plus
        the changed ones that have a vector now."""
        changed, delta_ids, _ = self._state
        keys = np.fromiter(changed, dtype=np.uint64, count=len(changed))
        held = int(np.count_nonzero(self.graph.contains(keys))) if len(keys) else 0
        return int(self.stamp.count) - held + len(delta_ids)

    @property
    def changed(self) -> int:
        """How many chunks changed since the graph was built (scored exactly)."""
        return len(self._state[0])

    @classmethod
    def open(cls, store: Store) -> AnnIndex:
        """The store's graph, mapped and caught up; AnnUnusable saying why it cannot be."""
        directory = store.directory
        with store.read():
            stamp = AnnStamp.read(directory)
            if stamp is None:
                raise AnnUnusable("no approximate index")
            if stamp.store_id != store.store_id:
                raise AnnUnusable("it was built from another store")
            if stamp.identity != _identity_key(store):
                raise AnnUnusable("it was built from another model's vectors")
            if stamp.log_seq < store.ann_seq:
                raise AnnUnusable("it is older than the store's vector log")
            index = cls(_map(directory / stamp.file, stamp), stamp)
            index._catch_up(store)
        return index

    def is_current(self, store: Store) -> bool:
        return store.generation == self.generation

    def refresh(self, store: Store) -> AnnIndex | None:
        """This index caught up with the store's changes, or None when a writer has
        replaced the graph (open the new one)."""
        with store.read():
            if store.ann_seq > self.stamp.log_seq:
                return None
            if self.stamp.store_id != store.store_id or self.stamp.identity != _identity_key(store):
                return None
            with self._lock:
                self._catch_up(store)
        return self

    def _catch_up(self, store: Store) -> None:
        """Read the vector log since the last catch-up: the chunks it names are masked in
        the graph and scored from their current vectors (in a read of ``store``)."""
        generation = store.generation
        seen, ids = store.vector_log_since(self._seen)
        if ids:
            found_ids, found = store.vectors_of(ids)
            for chunk_id in ids:
                self._delta.pop(chunk_id, None)
            for chunk_id, row in zip(found_ids.tolist(), unit_rows(found), strict=True):
                self._delta[chunk_id] = row.astype(np.float16)  # half the memory
            delta_ids = np.fromiter(self._delta, dtype=np.int64, count=len(self._delta))
            rows = (
                np.stack([self._delta[i] for i in delta_ids.tolist()])
                if len(delta_ids)
                else np.zeros((0, self.stamp.dimension), np.float16)
            )
            self._state = (self._state[0] | frozenset(ids), delta_ids, rows)
        self._seen = seen
        self.generation = generation

    def search(
        self,
        query: np.ndarray,
        k: int,
        allowed: AbstractSet[int] | None = None,
        store: Store | None = None,
    ) -> list[tuple[int, float]]:
        """The ``k`` chunks closest to ``query`` by cosine, best first, as ``(id, cosine)``,
        among ``allowed`` if given; the candidates' vectors are read from ``store``."""
        if store is None:
            raise ValueError("the approximate index re-scores from the store: pass store=")
        return self.first_pass(query, k, allowed)(store)

    def first_pass(
        self, query: np.ndarray, k: int, allowed: AbstractSet[int] | None = None
    ) -> Callable[[Store], list[tuple[int, float]]]:
        """What :meth:`search` does without the store (the graph's candidates), on any
        thread; the function returned finishes it from the store (the candidates' vectors,
        re-scored), on the thread that reads the store."""
        q = unit_query(query, self.stamp.dimension)
        if k <= 0:
            return lambda store: []
        changed, delta_ids, delta_rows = self._state
        if allowed is not None and len(allowed) <= EXACT_ALLOWED:
            narrow = allowed

            def exactly(store: Store) -> list[tuple[int, float]]:
                ids, vectors = store.vectors_of(narrow)
                return _best(ids, unit_rows(vectors) @ q, k)

            return exactly
        want = max(MIN_CANDIDATES, CANDIDATES * k)
        found = self._graph_candidates(q, want, changed, allowed)

        def rescored(store: Store) -> list[tuple[int, float]]:
            if found is None:  # a filter the graph's neighbourhood does not reach: exactly
                ids, vectors = store.vectors_of(allowed or ())
                return _best(ids, unit_rows(vectors) @ q, k)
            ids, vectors = store.vectors_of(found)
            scores = unit_rows(vectors) @ q
            if len(delta_ids):
                keep = (
                    np.ones(len(delta_ids), bool)
                    if allowed is None
                    else np.fromiter(
                        (i in allowed for i in delta_ids.tolist()), bool, len(delta_ids)
                    )
                )
                ids = np.concatenate([ids, delta_ids[keep]])
                scores = np.concatenate([scores, delta_rows[keep].astype(np.float32) @ q])
            return _best(ids, scores, k)

        return rescored

    def _graph_candidates(
        self,
        q: np.ndarray,
        want: int,
        changed: AbstractSet[int],
        allowed: AbstractSet[int] | None,
    ) -> list[int] | None:
        """Up to ``want`` of the graph's nearest chunks that did not change since it was
        built (and are ``allowed``); None when a filter needs more than the graph should be
        asked for (:data:`_MAX_GRAPH_COUNT`)."""
        total = self.stamp.count
        if total == 0:
            return []
        count = want + min(len(changed), want)
        if allowed is not None:  # as many more as the filter is narrow
            count = int(count * total / max(len(allowed), 1)) + 1
        reachable = total if allowed is None else min(total, len(allowed) + len(changed))
        while True:
            asked = min(max(count, EXPANSION_SEARCH), total)
            if allowed is not None and asked > _MAX_GRAPH_COUNT:
                return None
            matches = self.graph.search(q, asked, threads=1)
            found = [
                key
                for key in np.asarray(matches.keys, dtype=np.int64).tolist()
                if key not in changed and (allowed is None or key in allowed)
            ]
            # enough, or all there is: the filtered chunks the graph holds were all found
            if len(found) >= min(want, reachable) or asked >= total or allowed is None:
                return found[:want]
            count = 2 * asked  # the filter's chunks lie farther out: look wider

    def close(self) -> None:
        self.graph = None


def usearch_index() -> Any:
    """usearch's ``Index`` class, with onnxruntime imported first: importing onnxruntime
    1.32.0 after usearch 2.26.6's compiled module kills the process (SIGSEGV inside
    onnxruntime's own import, Linux x86_64; the other order works), and a process that
    builds a graph may load a query model later."""
    import onnxruntime  # noqa: F401
    from usearch.index import Index

    return Index


def _best(ids: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The ``k`` best ``(id, score)``, ties by id."""
    order = np.lexsort((ids, -scores))[:k]
    return [(int(ids[i]), float(scores[i])) for i in order]


def _map(path: Path, stamp: AnnStamp) -> Any:
    """The graph file mapped read-only, once its size and CRC-32 match ``stamp``."""
    index = usearch_index()
    try:
        size, crc = _file_crc(path)
    except OSError as error:
        raise AnnUnusable(f"{path.name} unreadable: {error}") from error
    if size != stamp.size:
        raise AnnUnusable(f"{path.name} is {size} bytes, its stamp says {stamp.size}")
    if crc != stamp.crc32:
        raise AnnUnusable(f"{path.name} fails its CRC-32 check")
    try:
        graph = index.restore(str(path), view=True)
    except (RuntimeError, ValueError, OSError) as error:
        raise AnnUnusable(f"{path.name}: usearch cannot open it: {error}") from error
    if graph is None or len(graph) != stamp.count or graph.ndim != stamp.dimension:
        raise AnnUnusable(f"{path.name} does not hold its stamp's {stamp.count} vectors")
    graph.expansion_search = EXPANSION_SEARCH
    return graph


def open_vectors(store: Store, current: Any = None) -> Any:
    """The vector index a reader searches: the store's graph (:class:`AnnIndex`, caught up
    from ``current`` when that is one) when it has a usable one, else exact search
    (:class:`~anekit.search.vectors.VectorIndex`). A graph that is there but unusable is
    reported, and searched exactly by an :class:`ExactFallback`, which is not saved (a large
    store's ``vectors.f16``) and tries the graph again when its stamp changes."""
    if isinstance(current, AnnIndex):
        refreshed = current.refresh(store)
        if refreshed is not None:
            return refreshed
    stamp = _stamp_state(store.directory)
    if stamp is None:
        if isinstance(current, VectorIndex):
            return current.refresh(store)
        return VectorIndex.open(store)
    for attempt in range(2):
        try:
            return AnnIndex.open(store)
        except AnnUnusable as why:
            now = _stamp_state(store.directory)
            if attempt == 0 and now is not None and now != stamp:
                stamp = now  # a writer replaced it meanwhile: read the new one
                continue
            log.warning(
                "%s: the approximate vector index is unusable (%s): searching exactly "
                "until `anekit index` rebuilds it",
                store.directory,
                why,
            )
            break
    stamp = _stamp_state(store.directory) or stamp
    if isinstance(current, ExactFallback) and current.stamp == stamp:
        exact = current.exact.refresh(store, save=False)
    else:
        exact = VectorIndex.open(store, save=False)
    return ExactFallback(exact, stamp)


def _stamp_state(directory: Path) -> tuple[int, int, int] | None:
    """(inode, size, mtime) of the stamp file, None when there is none."""
    try:
        stat = (directory / ANN_STAMP).stat()
    except FileNotFoundError:
        return None
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


class ExactFallback:
    """Exact search standing in for an unusable graph until its stamp changes."""

    def __init__(self, exact: VectorIndex, stamp: tuple[int, int, int]) -> None:
        self.exact = exact
        self.stamp = stamp

    def is_current(self, store: Store) -> bool:
        return self.exact.is_current(store) and _stamp_state(store.directory) == self.stamp

    def __len__(self) -> int:
        return len(self.exact)

    def search(
        self,
        query: np.ndarray,
        k: int,
        allowed: AbstractSet[int] | None = None,
        store: Store | None = None,
    ) -> list[tuple[int, float]]:
        return self.exact.search(query, k, allowed)

    def first_pass(
        self, query: np.ndarray, k: int, allowed: AbstractSet[int] | None = None
    ) -> Callable[[Store], list[tuple[int, float]]]:
        return self.exact.first_pass(query, k, allowed)


# --- the writer's side ----------------------------------------------------------------------


def maintain(store: Store, chunks: int) -> str | None:
    """Bring the store's graph up to date after a write (the caller holds the writer lock):
    none below :data:`MIN_ROWS` chunks (files removed, the log trimmed), else build it when
    missing or unusable, fold the log in when :data:`MERGE_CHANGES` changes gathered, or
    leave it (readers score the changes exactly). What was done, for the log, or None. A
    build that fails (a full disk) leaves the store and the old graph as they were."""
    directory = store.directory
    try:
        if chunks < MIN_ROWS:
            return _drop(store)
        try:
            stamp = _usable_stamp(store)
        except AnnUnusable as why:
            return _publish(store, None, f"built ({why})")
        with store.read():
            pending = store.vector_log_count(stamp.log_seq)
            finished = store.ann_seq == stamp.log_seq
        if not finished:  # a writer died between the stamp and the trim: finish it
            with store.write():
                store.trim_vector_log(stamp.log_seq)
            _remove_graphs(directory, keep=stamp.file)
        if pending < MERGE_CHANGES:
            return None
        if stamp.removed + pending > MAX_REMOVED_SHARE * stamp.count:
            return _publish(store, None, f"rebuilt ({pending:,} changes)")
        return _publish(store, stamp, f"caught up ({pending:,} changes)")
    except (OSError, RuntimeError, MemoryError, AnnUnusable) as error:
        log.warning(
            "%s: the approximate vector index could not be written (%s): the store is whole; "
            "the next index run finishes it",
            directory,
            error,
        )
        return None


def _usable_stamp(store: Store) -> AnnStamp:
    with store.read():
        stamp = AnnStamp.read(store.directory)
        if stamp is None:
            raise AnnUnusable("none yet")
        if stamp.store_id != store.store_id or stamp.identity != _identity_key(store):
            raise AnnUnusable("another store or model")
        if stamp.log_seq < store.ann_seq:
            raise AnnUnusable("older than the store's vector log")
    path = store.directory / stamp.file
    try:
        size, crc = _file_crc(path)
    except OSError as error:
        raise AnnUnusable(f"{stamp.file} unreadable: {error}") from error
    if (size, crc) != (stamp.size, stamp.crc32):
        raise AnnUnusable(f"{stamp.file} is damaged or truncated")
    return stamp


def _drop(store: Store) -> str | None:
    """A small store: no graph files, and no log kept for one."""
    directory = store.directory
    had = (directory / ANN_STAMP).exists()
    with contextlib.suppress(FileNotFoundError):
        os.remove(directory / ANN_STAMP)
    _remove_graphs(directory, keep=None)
    _remove_stale_temps(directory)
    with store.read():
        end = store.vector_log_end()
        pending = store.vector_log_count(store.ann_seq)
    if pending:
        with store.write():
            store.trim_vector_log(end)
    return "removed (the store is small: exact search)" if had else None


def _publish(store: Store, stamp: AnnStamp | None, what: str) -> str:
    """Build the graph anew (``stamp`` None) or fold the log into ``stamp``'s graph, write
    it to a new file, replace the stamp, trim the log."""
    Index = usearch_index()
    directory = store.directory
    started = time.monotonic()
    log.info("%s: approximate vector index: %s...", directory, what)
    identity = store.identity
    if identity is None:
        raise AnnUnusable("the store has no identity")
    threads = os.cpu_count() or 1
    with store.read():
        end = store.vector_log_end()
        store_id, key = store.store_id, _identity_key(store)
        if stamp is None:
            graph = Index(
                ndim=identity.dimension,
                metric="cos",
                dtype=DTYPE,
                connectivity=CONNECTIVITY,
                expansion_add=EXPANSION_ADD,
                expansion_search=EXPANSION_SEARCH,
            )
            removed = 0
            for ids, vectors in store.vector_batches(_BUILD_BATCH):
                graph.add(ids.astype(np.uint64), unit_rows(vectors), threads=threads)
        else:
            loaded = Index.restore(str(directory / stamp.file))
            if loaded is None:
                raise AnnUnusable(f"{stamp.file}: usearch cannot load it")
            graph = loaded
            end, changed = store.vector_log_since(stamp.log_seq)
            keys = np.asarray(changed, dtype=np.uint64)
            there = keys[np.atleast_1d(graph.contains(keys))] if len(keys) else keys
            if len(there):
                graph.remove(there)
            found_ids, found = store.vectors_of(changed)
            if len(found_ids):
                graph.add(found_ids.astype(np.uint64), unit_rows(found), threads=threads)
            removed = stamp.removed + len(there)
    name = f"vectors-{end}-{uuid.uuid4().hex[:8]}.usearch"
    path = directory / name
    temp = directory / f".{name}.tmp"
    _remove_stale_temps(directory)
    try:
        graph.save(str(temp))
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    count = len(graph)
    del graph
    size, crc = _file_crc(path)
    new = AnnStamp(store_id, key, end, count, removed, identity.dimension, name, size, crc)
    try:
        new.write(directory)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    with store.write():
        store.trim_vector_log(end)
    _remove_graphs(directory, keep=name)
    with contextlib.suppress(OSError):  # the exact index's matrix: no reader needs it now
        os.remove(directory / VECTORS_FILE)
    return f"{what}: {count:,} vectors in {time.monotonic() - started:.1f} s"


def _remove_graphs(directory: Path, keep: str | None) -> None:
    """Unlink graph files other than ``keep`` (readers' open maps stay valid)."""
    for path in directory.glob(_FILE_GLOB):
        if path.name != keep:
            with contextlib.suppress(OSError):
                path.unlink()


def _remove_stale_temps(directory: Path) -> None:
    now = time.time()
    for temp in directory.glob(f".{_FILE_GLOB}.tmp"):
        with contextlib.suppress(OSError):
            if now - temp.stat().st_mtime > _STALE_TEMP_S:
                temp.unlink()
    for temp in directory.glob(f".{ANN_STAMP}-*.tmp"):
        with contextlib.suppress(OSError):
            if now - temp.stat().st_mtime > _STALE_TEMP_S:
                temp.unlink()


def _atomic_write(path: Path, data: bytes) -> None:
    temp = path.with_name(f".{path.name}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(temp, "wb") as out:
            out.write(data)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
