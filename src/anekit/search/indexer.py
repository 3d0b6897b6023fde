"""Indexing a root into its store: walk, read, chunk, embed what is new, write.

:meth:`Indexer.update` is incremental: a file whose size and mtime are unchanged is not
read; one whose content hash is unchanged is not chunked; a changed file's chunks whose
model text is already known (in this store, or in the machine-wide
:class:`~anekit.search.cache.VectorCache`) are not embedded again; a deleted file is
dropped. The lanes (a :class:`~anekit.lanes.Pool`) start only when some chunk needs a
vector.

Searchable at once: files are written as they are chunked (their rows, chunks, FTS rows
and the vectors the caches know; a transaction after :data:`FIRST_WRITE_CHUNKS` chunks,
then after twice as many, up to :data:`WRITE_CHUNKS`), so keyword search finds them
before any is embedded; then the chunks waiting for a vector (this run's, and any an
earlier run left) are embedded, each vector going to the machine-wide cache at once and to
the store after :data:`FIRST_CHECKPOINT_SECONDS`, then twice as late each time, up to
every :data:`CHECKPOINT_SECONDS`.
A run killed at any point leaves each file wholly old or wholly new, and the next run
embeds what is still waiting, from the cache where it can.

:class:`Indexer` is the update half of :class:`~anekit.search.index.Index`; the search half
is :class:`~anekit.search.searcher.Searcher`.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from anekit.errors import DamagedStoreError
from anekit.search.cache import VectorCache, cache_key
from anekit.search.chunk import CHUNKER_VERSION, Chunk, chunk_file, language_for, model_text
from anekit.search.lock import WriterLock
from anekit.search.root import IndexedRoot
from anekit.search.store import DB_FILE, ChunkRecord, FileRecord, Store, StoreIdentity
from anekit.search.vectors import VECTORS_FILE
from anekit.search.walk import (
    FileEntry,
    Skipped,
    minified_line,
    read_file,
    relpath_in,
    walk,
)

__all__ = [
    "CACHE_BATCH",
    "CHECKPOINT_SECONDS",
    "FIRST_CHECKPOINT_SECONDS",
    "FIRST_WRITE_CHUNKS",
    "ROUND_CHUNKS",
    "WRITE_CHUNKS",
    "IndexSummary",
    "Indexer",
    "Progress",
]

log = logging.getLogger("anekit.search.index")  # the index's log, whichever part writes it

if TYPE_CHECKING:
    from anekit.lanes.pool import Pool, Row
    from anekit.models.encoders import LoadedModel
    from anekit.search.shared_lanes import SharedLanes

#: Finished files are written to the store at least this often while embedding.
CHECKPOINT_SECONDS = 30.0
#: The first checkpoint of vectors comes this soon; each next one twice as late, up to
#: CHECKPOINT_SECONDS (vector search starts early, readers rebuild rarely later).
FIRST_CHECKPOINT_SECONDS = 2.0
#: Chunks written per transaction while files are chunked (the first are searchable then);
#: the first transaction holds FIRST_WRITE_CHUNKS, each next twice as many up to this.
WRITE_CHUNKS = 2000
FIRST_WRITE_CHUNKS = 250
#: Vectors put in the machine-wide cache at a time (what a kill can cost to embed again).
CACHE_BATCH = 32
#: Chunks tokenized and sent to the lanes at a time (bounds the run's memory).
ROUND_CHUNKS = 4096


@dataclass
class Progress:
    """Where an :meth:`Indexer.update` is: files read and chunks embedded so far."""

    files_done: int
    files_total: int
    chunks_done: int
    chunks_total: int
    lane: str


@dataclass
class IndexSummary:
    """What one :meth:`Indexer.update` did."""

    files: int = 0
    indexed: int = 0
    unchanged: int = 0
    removed: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    #: Files with a chunk that could not be embedded (kept for keyword search, tried again
    #: by the next update): path -> why.
    failed: dict[str, str] = field(default_factory=dict)
    #: Files indexed with U+FFFD for bytes that are not UTF-8: path -> where and how many.
    replaced: dict[str, str] = field(default_factory=dict)
    #: Chunks given vectors in this run: by the lanes, and from the caches.
    embedded: int = 0
    cached: int = 0
    #: Chunks embedded by a lane of another variant than the store's (a fallback stood
    #: in): kept and marked, and embedded again by the next update.
    stand_ins: int = 0
    chunks: int = 0
    seconds: float = 0.0
    lane: str = ""
    #: The store was made by another model or chunker: everything was embedded again.
    reset: bool = False
    #: The store was damaged (what SQLite found): it was set aside and rebuilt.
    rebuilt: str | None = None
    #: On a Ray cluster: each node's lane, chunks and rate in this run.
    nodes: list[dict[str, Any]] = field(default_factory=list)
    #: What the run did to the store's approximate vector index (anekit.search.ann):
    #: built, caught up, removed, or "" (nothing).
    vector_index: str = ""

    def skipped_by_reason(self) -> dict[str, int]:
        return dict(Counter(item.reason for item in self.skipped))

    def as_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "indexed": self.indexed,
            "unchanged": self.unchanged,
            "removed": self.removed,
            "skipped": self.skipped_by_reason(),
            "skipped_files": [
                {"path": item.relpath, "reason": item.reason, "detail": item.detail}
                for item in self.skipped
            ],
            "failed": [{"path": path, "reason": why} for path, why in self.failed.items()],
            "replaced": [{"path": path, "detail": why} for path, why in self.replaced.items()],
            "embedded": self.embedded,
            "cached": self.cached,
            "stand_ins": self.stand_ins,
            "chunks": self.chunks,
            "seconds": round(self.seconds, 3),
            "lane": self.lane,
            "reset": self.reset,
            "rebuilt": self.rebuilt,
            "nodes": self.nodes,
            "vector_index": self.vector_index,
        }


@dataclass
class _File:
    """A new or changed file on its way into the store."""

    record: FileRecord
    chunks: list[ChunkRecord]
    #: Per chunk: its vector when a cache knows it, else None (embedded after the write).
    vectors: list[np.ndarray | None]


class Indexer(IndexedRoot):
    """What :class:`~anekit.search.index.Index` updates its store with: the walk, the
    chunker, the embedding lanes (started by the first update that embeds) and the
    machine-wide vector cache."""

    lanes: list[str] | None
    model: str | Path | None
    ray: str | None
    cache: VectorCache | None
    wait: float | None
    _checked: bool
    #: Whether this Index recorded its root in the registry (:mod:`anekit.search.roots`).
    _registered: bool
    #: The lane pool shared with other roots' indexes (a daemon's), or None: its own.
    shared_lanes: SharedLanes | None
    _pool: Pool | None
    _tokenizer: Any
    _model: LoadedModel | None

    def identity(self) -> StoreIdentity:
        """What this index's vectors are made with: the model, the first lane's
        variant, the chunker version and the model's max length."""
        from anekit.lanes.engines import lane_variant
        from anekit.lanes.pool import lead_lane
        from anekit.models.onnx_models import int8_numerics

        model = self._loaded_model()
        model_id, config = model.model_id, model.config
        variant = lane_variant(lead_lane(self.lanes))  # auto: this node's lane
        return StoreIdentity(
            model=model_id,
            variant=variant,
            chunker=CHUNKER_VERSION,
            max_length=config.max_length,
            dimension=config.hidden_size,
            numerics=int8_numerics() if variant == "int8" else 1,
        )

    def _model_folder(self) -> Path | None:
        """The model's folder when the model was named by its path (a reader of the store
        then embeds queries with it); None for a model known by name."""
        request = self.model_request()
        if request is None or not Path(request).expanduser().is_dir():
            return None
        return self._loaded_model().folder.resolve()

    @property
    def has_lanes(self) -> bool:
        """Whether this index holds its embedding lanes (started by an update)."""
        return self._pool is not None

    def release_idle_lanes(self) -> bool:
        """Drop the lanes once every lane worker has left idle (``ANEKIT_LANE_IDLE``); whether
        they were. The next update starts them again. From the thread that updates."""
        pool = self._pool
        if pool is None or not pool.workers_gone_idle():
            return False
        pool.close()
        self._pool = None
        return True

    def forget(self, path: Path | str) -> list[str]:
        """Drop the files at or under ``path`` from the store; their relative paths."""
        prefixes = _relative_prefixes(self.root, [Path(path)])
        with WriterLock(self.directory) as lock:
            lock.acquire(self.wait)
            store = self.store
            gone = [relpath for relpath in store.files() if _in_scope(relpath, prefixes)]
            with store.write():
                for relpath in gone:
                    store.remove_file(relpath)
            self._maintain_vectors(store.chunk_count())
        return gone

    def _maintain_vectors(self, chunks: int) -> str:
        """The store's approximate vector index brought up to date after a write (built at
        :data:`anekit.search.ann.MIN_ROWS` chunks and up; the writer lock held)."""
        from anekit.search.ann import maintain

        done = maintain(self.store, chunks) or ""
        if done:
            log.info("%s: approximate vector index %s", self.directory, done)
        return done

    def update(
        self,
        paths: Sequence[Path | str] | None = None,
        progress: Callable[[Progress], None] | None = None,
    ) -> IndexSummary:
        """Bring the store up to date with the files under ``paths`` (default: the root; a
        path gone drops what the store holds under it), holding the writer lock throughout
        (:class:`StoreBusy` past :attr:`wait`)."""
        with WriterLock(self.directory) as lock:
            lock.acquire(self.wait)
            summary = self._update(paths, progress)
            summary.vector_index = self._maintain_vectors(summary.chunks)
        if not self._registered:  # once per Index: anekit search --all finds it
            from anekit.search.roots import record

            record(self.root, self.directory)
            self._registered = True
        return summary

    def _update(
        self,
        paths: Sequence[Path | str] | None,
        progress: Callable[[Progress], None] | None,
    ) -> IndexSummary:
        started = time.monotonic()
        identity = self.identity()
        if self.ray is not None:  # a cluster that is not there: refused even with nothing to do
            from anekit.lanes.pool import check_cluster

            check_cluster(self.ray)
        rebuilt = self._checked_store()
        store = self.store
        summary = IndexSummary(reset=store.ensure_identity(identity), rebuilt=rebuilt)
        store.set_root(self.root)
        store.set_model_folder(self._model_folder())
        scope = [Path(os.path.abspath(path)) for path in paths] if paths else None
        # A named path that no longer exists is walked as nothing: its files are dropped.
        walked = walk(self.root, scope and [path for path in scope if os.path.lexists(path)])
        summary.files, summary.skipped = len(walked.files), list(walked.skipped)
        known = store.files()
        stand_ins = set(store.stand_in_files())  # embedded again, whatever their mtime
        present = {entry.relpath for entry in walked.files}
        prefixes = _relative_prefixes(self.root, scope)
        gone = [
            relpath for relpath in known if relpath not in present and _in_scope(relpath, prefixes)
        ]
        touched: list[tuple[str, int, int]] = []
        batch: list[_File] = []
        looked_up: set[str] = set()  # text hashes the machine cache did not hold just now
        batch_chunks = min(FIRST_WRITE_CHUNKS, WRITE_CHUNKS)
        max_line = minified_line()  # ANEKIT_MINIFIED_LINE, read once
        for entry in walked.files:
            old = known.get(entry.relpath)
            if entry.relpath in stand_ins:
                old = None  # chunk it again: its stand-in vectors are to be replaced
            elif old is not None and (old.size, old.mtime_ns) == (entry.size, entry.mtime_ns):
                summary.unchanged += 1
                continue
            item = self._prepare(entry, old, summary, touched, max_line)
            if isinstance(item, _File):
                batch.append(item)
                if sum(len(f.chunks) for f in batch) >= batch_chunks:
                    self._write(batch, identity, summary, looked_up)
                    batch, batch_chunks = [], min(2 * batch_chunks, WRITE_CHUNKS)
            elif isinstance(item, Skipped) and entry.relpath in known:
                gone.append(entry.relpath)  # it became binary, too large, unreadable
        self._write(batch, identity, summary, looked_up)
        with store.write():
            for relpath in gone:
                summary.removed += store.remove_file(relpath)
            for relpath, size, mtime_ns in touched:
                store.touch_file(relpath, size, mtime_ns)
        self._embed(identity, summary, progress, looked_up)
        with store.write():  # the next update looks for unembedded chunks from here on
            store.advance_embedded_mark()
        summary.chunks = store.chunk_count()
        summary.seconds = time.monotonic() - started
        return summary

    def _checked_store(self) -> str | None:
        """Check the store once per Index before its first write (``PRAGMA quick_check``,
        :meth:`Store.check`); a damaged one is moved aside (``store.db.damaged``) and made
        anew, its files indexed again with their vectors from the machine-wide cache.
        What SQLite found, or None for a healthy store."""
        if self._checked:
            return None
        self._checked = True
        try:
            found = self.store.check()
        except DamagedStoreError as error:  # not even a database: it cannot be opened
            found = str(error.__cause__ or error)
        if found == "ok":
            return None
        log.warning("%s: the index is damaged (%s): rebuilding it", self.directory, found)
        self._close_store()
        database = self.directory / DB_FILE
        os.replace(database, database.with_name(DB_FILE + ".damaged"))
        for derived in (DB_FILE + "-wal", DB_FILE + "-shm", VECTORS_FILE):
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.directory / derived)
        return found

    def _prepare(
        self,
        entry: FileEntry,
        old: FileRecord | None,
        summary: IndexSummary,
        touched: list[tuple[str, int, int]],
        max_line: int,
    ) -> _File | Skipped | None:
        """Read and chunk a new or changed file (None: the same content as before);
        ``max_line``: :func:`~anekit.search.walk.minified_line`, read once a run."""
        read = read_file(entry, max_line)
        if isinstance(read, Skipped):
            summary.skipped.append(read)
            return read
        digest = hashlib.sha256(read.data).hexdigest()
        if old is not None and old.sha256 == digest:
            touched.append((entry.relpath, entry.size, entry.mtime_ns))
            summary.unchanged += 1
            return None
        if read.note is not None:
            summary.replaced[entry.relpath] = read.note
        chunks = chunk_file(entry.relpath, read.text)
        texts = [model_text(entry.relpath, chunk) for chunk in chunks]  # what the model reads
        records = [
            ChunkRecord(
                start_line=chunk.start_line,
                end_line=chunk.end_line,
                text=chunk.text,
                symbol=chunk.symbol,
                kind=chunk.kind,
                text_hash=hashlib.sha256(text.encode()).hexdigest(),
            )
            for chunk, text in zip(chunks, texts, strict=True)
        ]
        record = FileRecord(
            relpath=entry.relpath,
            size=entry.size,
            mtime_ns=entry.mtime_ns,
            sha256=digest,
            language=language_for(entry.relpath),
        )
        return _File(record, records, [None] * len(records))

    def _write(
        self,
        files: list[_File],
        identity: StoreIdentity,
        summary: IndexSummary,
        looked_up: set[str],
    ) -> None:
        """Write chunked files, with the vectors the caches know, in one transaction;
        ``looked_up`` gains the text hashes the machine cache did not hold."""
        if not files:
            return
        self._fill_from_caches(files, identity, summary, looked_up)
        with self.store.write():
            for item in files:
                self.store.put_file(item.record, item.chunks, item.vectors)
        summary.indexed += len(files)

    def _fill_from_caches(
        self,
        files: list[_File],
        identity: StoreIdentity,
        summary: IndexSummary,
        looked_up: set[str],
    ) -> None:
        """Vectors known to this store (an edited file's unchanged chunks) or to the
        machine-wide cache need no embedding; the hashes the cache lacks go to
        ``looked_up``."""
        hashes = [chunk.text_hash for item in files for chunk in item.chunks]
        if not hashes:
            return
        known = self.store.known_vectors(hashes)
        missing = sorted({text_hash for text_hash in hashes if text_hash not in known})
        if missing and self.cache is not None:
            namespace = identity.key()
            keys = {text_hash: cache_key(namespace, text_hash) for text_hash in missing}
            cached = self.cache.get(list(keys.values()), identity.dimension)
            for text_hash, key in keys.items():
                if key in cached:
                    known[text_hash] = cached[key]
                else:
                    looked_up.add(text_hash)
        for item in files:
            for index, chunk in enumerate(item.chunks):
                vector = known.get(chunk.text_hash)
                if vector is not None:
                    item.vectors[index] = vector
                    summary.cached += 1

    def _embed(
        self,
        identity: StoreIdentity,
        summary: IndexSummary,
        progress: Callable[[Progress], None] | None,
        looked_up: set[str],
    ) -> None:
        """Embed the stored chunks waiting for a vector (one embedding per distinct model
        text), writing vectors to the store at least every :data:`CHECKPOINT_SECONDS`.
        Chunks an earlier run left waiting are looked up in the machine cache first (those
        of ``looked_up`` were, just now)."""
        pending = self.store.unembedded()
        leftovers = {text_hash for _, text_hash in pending} - looked_up
        if leftovers and self.cache is not None:  # an earlier run's, embedded before a kill
            namespace = identity.key()
            keys = {cache_key(namespace, text_hash): text_hash for text_hash in leftovers}
            cached = self.cache.get(list(keys), identity.dimension)
            if cached:
                with self.store.write():
                    summary.cached += self.store.put_vectors(
                        [(keys[key], vector, identity.variant) for key, vector in cached.items()]
                    )
                pending = [
                    (chunk, h) for chunk, h in pending if cache_key(namespace, h) not in cached
                ]
        if not pending:
            return
        from anekit.lanes.engines import lane_variant
        from anekit.lanes.pool import in_use

        texts: dict[str, str] = {}  # text hash -> model text
        where: dict[str, tuple[str, int]] = {}  # text hash -> the first chunk's path, line
        left: Counter[str] = Counter()  # chunks waiting, per file
        files_of: dict[str, list[str]] = {}  # text hash -> the files its chunks are in
        for chunk, text_hash in pending:
            left[chunk.relpath] += 1
            files_of.setdefault(text_hash, []).append(chunk.relpath)
            if text_hash not in texts:
                texts[text_hash] = model_text(
                    chunk.relpath,
                    Chunk(chunk.start_line, chunk.end_line, chunk.text, chunk.symbol, chunk.kind),
                )
                where[text_hash] = (chunk.relpath, chunk.start_line)
        hashes = list(texts)
        pool = self._lanes()
        namespaces = {identity.variant: identity.key()}
        variants: dict[str, str] = {}  # lane -> its vectors' numerics (asked once a run)
        writer = _Writer(self.store)
        files_total, files_done, done, lane = len(left), 0, 0, ""
        for start in range(0, len(hashes), ROUND_CHUNKS):
            part = hashes[start : start + ROUND_CHUNKS]
            token_ids = self._tokenize([texts[text_hash] for text_hash in part])
            fresh: list[tuple[bytes, np.ndarray]] = []
            with _rows(pool, token_ids) as rows:
                for position, vector, why, made_by in rows:
                    text_hash = part[position]
                    done += 1
                    if why is not None or vector is None:
                        relpath, line = where[text_hash]
                        summary.failed.setdefault(relpath, f"the chunk at line {line}: {why}")
                        continue
                    vector16 = np.asarray(vector, np.float16)
                    if made_by not in variants:
                        variants[made_by] = lane_variant(made_by)
                    variant = variants[made_by]
                    if variant != identity.variant:
                        summary.stand_ins += 1
                    if variant not in namespaces:  # cached as what it is, not as the store's
                        namespaces[variant] = replace(identity, variant=variant).key()
                    fresh.append((cache_key(namespaces[variant], text_hash), vector16))
                    if len(fresh) >= CACHE_BATCH:
                        self._cache_put(fresh)  # before the vector can reach a checkpoint
                        fresh = []
                    summary.embedded += 1
                    for relpath in files_of[text_hash]:
                        left[relpath] -= 1
                        files_done += left[relpath] == 0
                    if writer.add(text_hash, vector16, variant):
                        self._cache_put(fresh)
                        fresh = []
                        writer.flush()
                    if progress is not None:
                        lane = lane or in_use(pool)
                        progress(Progress(files_done, files_total, done, len(hashes), lane))
            self._cache_put(fresh)
        writer.flush()
        summary.lane = in_use(pool)
        summary.nodes = pool.node_rates()  # per machine, on a Ray cluster

    def _cache_put(self, items: list[tuple[bytes, np.ndarray]]) -> None:
        if self.cache is not None and items:
            self.cache.put(items)

    def _lanes(self) -> Pool:
        """The embedding lanes (this machine's default ones unless :attr:`lanes` says, or
        the :attr:`shared_lanes`), started on first use, with the model's tokenizer."""
        if self._pool is None:
            from anekit.lanes.pool import open_pool
            from anekit.models.batching import load_tokenizer

            model = self._loaded_model()
            self._tokenizer = load_tokenizer(model.folder, model.config.max_length)
            if self.shared_lanes is not None:
                self._pool = self.shared_lanes.borrow(model)
            else:
                self._pool = open_pool(self.lanes or [], model=model, ray=self.ray)
        return self._pool

    def _loaded_model(self) -> LoadedModel:
        """The embedding model, resolved once (its weights are read by the lanes)."""
        if self._model is None:
            from anekit.models.encoders import load_model

            self._model = load_model(self.model_request())
        return self._model

    def _tokenize(self, texts: list[str]) -> list[list[int]]:
        """Token ids of ``texts`` for the lanes (:meth:`_lanes` first)."""
        from anekit.models.batching import checked_texts, tokenize

        return tokenize(self._tokenizer, checked_texts(texts))


class _Writer:
    """Writes vectors to the store, a checkpoint at least every
    :data:`CHECKPOINT_SECONDS` (one transaction per checkpoint)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.pending: list[tuple[str, np.ndarray, str | None]] = []
        self.last = time.monotonic()
        self.interval = min(FIRST_CHECKPOINT_SECONDS, CHECKPOINT_SECONDS)

    def add(self, text_hash: str, vector: np.ndarray, variant: str) -> bool:
        """Queue a vector; whether a checkpoint is due."""
        self.pending.append((text_hash, vector, variant))
        return time.monotonic() - self.last >= self.interval

    def flush(self) -> None:
        if self.pending:
            with self.store.write():
                self.store.put_vectors(self.pending)
            self.pending = []
        self.last = time.monotonic()
        self.interval = min(2 * self.interval, CHECKPOINT_SECONDS)


@contextlib.contextmanager
def _rows(pool: Pool, token_ids: list[list[int]]) -> Iterator[Iterator[Row]]:
    """The pool's stream, closed on the way out, whatever ends the loop (a shared pool's
    turn ends with it, :mod:`anekit.search.shared_lanes`)."""
    rows = pool.stream(token_ids)
    try:
        yield rows
    finally:
        close = getattr(rows, "close", None)
        if close is not None:
            close()


def _relative_prefixes(root: Path, scope: list[Path] | None) -> list[str] | None:
    """The relpaths of ``scope``'s paths ("" for the root), None for no scope."""
    return None if scope is None else [relpath_in(root, path) for path in scope]


def _in_scope(relpath: str, prefixes: list[str] | None) -> bool:
    return prefixes is None or any(
        not prefix or relpath == prefix or relpath.startswith(prefix + "/") for prefix in prefixes
    )
