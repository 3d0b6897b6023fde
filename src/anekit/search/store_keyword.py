"""Keyword search in the code search store (:class:`StoreKeyword`, a part of
:class:`~anekit.search.store.Store`): BM25 over the FTS5 index, and the path, extension and
language filters that say which chunks a search may find."""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from itertools import islice
from typing import Any

from anekit.errors import SearchError
from anekit.search.globs import compile_filter
from anekit.search.languages import LANGUAGES
from anekit.search.store_damage import damage_checked
from anekit.search.store_queries import StoreQueries
from anekit.search.terms import item_expression, query_items

__all__ = ["FTS_WEIGHTS", "MATCH_BUDGET", "SPLIT_MIN_CHUNKS", "StoreKeyword"]

# bm25 column weights, in the FTS column order (text, path, symbol): a word in a chunk's
# symbol name says more than one in its file's path, which says more than one in its body.
FTS_WEIGHTS = (1.0, 2.0, 4.0)

MATCH_BUDGET = 2_000
"""Keyword search ranks at most about this many matching chunks (BM25 costs ~1 us a chunk, a
lookup of the chunk's size each; 5,000 took 2.5 ms of a query at 10k chunks, 2,000 1.1 ms, and
semble's development repositories ranked the same, 0.8576 -> 0.8580; 1,000 lost 0.004). In a
store of more chunks it keeps a query's words rarest first while the chunks they match fit, and
drops words that match over half the chunks (FTS5's BM25 gives those no weight) when a rarer one
is left; the rarest word is always kept. A smaller store ranks with every word."""

# What _keyword_items counts a query item's matches up to: past the budget, only whether the
# item is the rarest matters.
_COUNT_CAP = MATCH_BUDGET + 1

# keyword_search passes an `allowed` set this small to SQLite (rowid IN ...); a larger one is
# checked row by row while reading matches best first, which stops after k.
_IN_LIST_MAX = 4096

SPLIT_MIN_CHUNKS = 200_000
"""From this many chunks on, an unfiltered keyword search ranks the chunks up to the middle
chunk id and those above it at once, the upper half on the store's second connection (on a
thread; SQLite runs each outside the GIL), and keeps the best ``k`` of both: BM25 costs
FTS5 a few microseconds a match, and a common name matches 10,000-15,000 chunks of a
million (40 ms). Both halves score with the whole index's statistics, so the hits are the
same. 1M chunks, the 30 queries of bench/search_scale.py, one connection against two,
blocks alternated, 2 cores: the keyword half alone p50 7.5 -> 7.0 ms, p95 35.9 -> 29.6 ms;
keyword-mode searches p50 11.6 -> 11.5 ms, p95 38.7 -> 30.6 ms (another run: 10.6 ->
11.2, 29.4 -> 32.1: the median is a wash, the slow tail shorter).
Not while the search's vector half runs on the other core (searcher.OVERLAP_MIN_VECTORS):
three threads on two cores, hybrid p50 23.9 -> 26.1 ms, p95 47.1 -> 45.5 ms. Nor with the
upper half waiting for the vector half's core (the search's thread taking it if its own
half ends first): hybrid p50 20.2 -> 21.1 ms, p95 41.0 -> 39.2 ms, per query the same
within noise but for the heaviest (-7 ms) and a few light ones (+3 to +5 ms)."""

_halves: ThreadPoolExecutor | None = None
_halves_lock = threading.Lock()


def _half_threads() -> ThreadPoolExecutor:
    """The threads that run the upper halves of split keyword searches (one per search in
    flight, up to four; each uses its own store's second connection)."""
    global _halves
    with _halves_lock:
        if _halves is None:
            _halves = ThreadPoolExecutor(4, thread_name_prefix="anekit-keyword-half")
        return _halves


def _split_filters(values: Sequence[str], what: str) -> tuple[list[str], list[str]]:
    """(includes, excludes) of filter values; a leading ``!`` excludes."""
    includes: list[str] = []
    excludes: list[str] = []
    for raw in values:
        negated = raw.strip().startswith("!")
        value = raw.strip().removeprefix("!").strip()
        if not value:
            raise SearchError(f"empty {what} filter {raw!r}")
        (excludes if negated else includes).append(value)
    return includes, excludes


_EXTENSION = re.compile(r"\.?[A-Za-z0-9_+~-]+(?:\.[A-Za-z0-9_+~-]+)*")


def _ext(value: str) -> str:
    """An extension filter (``py``, ``.ts``, ``d.ts``) as ``.ext`` in lower case."""
    if not _EXTENSION.fullmatch(value):
        raise SearchError(
            f"{value!r} is not a file extension (py, .ts, d.ts); use a path glob for patterns"
        )
    return "." + value.lower().lstrip(".")


# The state a read sees: a split search's halves must come from one.
_STATE = "SELECT value FROM meta WHERE key IN ('generation', 'store_id') ORDER BY key"


def _rows(
    conn: sqlite3.Connection, deadline: float | None, sql: str, args: tuple[object, ...]
) -> tuple[list[Any], list[tuple[int, float]]]:
    """The store state (:data:`_STATE`) and the rows of ``sql`` on ``conn`` (a store's
    second connection), in one read, stopped as the store's
    :meth:`~anekit.search.store_connection.StoreConnection.budget` would stop it."""
    if deadline is not None:
        conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        conn.execute("BEGIN")
        state = [row[0] for row in conn.execute(_STATE)]
        return state, [(int(i), float(score)) for i, score in conn.execute(sql, args)]
    finally:
        conn.set_progress_handler(None, 0)
        if conn.in_transaction:
            with suppress(sqlite3.Error):
                conn.execute("COMMIT")


class StoreKeyword(StoreQueries):
    """What finds chunks by their words, and by their files' paths and languages."""

    @damage_checked
    def keyword_search(
        self, query: str, k: int, allowed: AbstractSet[int] | None = None, *, split: bool = True
    ) -> list[tuple[int, float]]:
        """The ``k`` best chunks for ``query`` by BM25 (:data:`FTS_WEIGHTS`, :data:`MATCH_BUDGET`)
        as ``(chunk id, score)``, higher better, among the ``allowed`` chunks if given;
        ``split``: in two halves at once in a large store (:data:`SPLIT_MIN_CHUNKS`), unless
        the caller keeps the other core busy meanwhile."""
        if k <= 0 or (allowed is not None and not allowed):
            return []
        with self.read():
            items = self._keyword_items(query_items(query))
            if not items:
                return []
            expression = " OR ".join(item_expression(parts) for parts in items)
            weights = ", ".join(str(w) for w in FTS_WEIGHTS)
            select = f"SELECT rowid, bm25(chunks_fts, {weights}) AS score FROM chunks_fts "
            rows: Iterable[tuple[int, float]]
            middle = self._split_at() if allowed is None and split else None
            if middle is not None:
                rows = self._in_halves(select, expression, k, middle)
            elif allowed is None:
                rows = self._conn.execute(
                    select + "WHERE chunks_fts MATCH ? ORDER BY score, rowid LIMIT ?",
                    (expression, k),
                )
            elif len(allowed) <= _IN_LIST_MAX:
                # "+rowid": a filter on the matches; a bare rowid IN makes FTS5 run the query
                # once per allowed id.
                rows = self._conn.execute(
                    select + "WHERE chunks_fts MATCH ? AND +rowid IN "
                    "(SELECT value FROM json_each(?)) ORDER BY score, rowid LIMIT ?",
                    (expression, json.dumps([int(i) for i in allowed]), k),
                )
            else:
                everything = self._conn.execute(
                    select + "WHERE chunks_fts MATCH ? ORDER BY score, rowid", (expression,)
                )
                rows = islice((row for row in everything if row[0] in allowed), k)
            return [(int(i), -float(s)) for i, s in rows]

    def _split_at(self) -> int | None:
        """The chunk id a keyword search splits its matches at (:data:`SPLIT_MIN_CHUNKS`),
        or None: a smaller store, or one being written (the second connection would not see
        the write's own rows)."""
        if self._in_write:
            return None
        self._check_caches()
        if () not in self._counts:
            self._counts[()] = self.chunk_count()
        if self._counts[()] < SPLIT_MIN_CHUNKS:
            return None
        # each a seek at one end of the rowid B-tree (min and max together scan the table)
        low, high = self._conn.execute(
            "SELECT (SELECT min(id) FROM chunks), (SELECT max(id) FROM chunks)"
        ).fetchone()
        return None if low is None else (int(low) + int(high)) // 2

    def _in_halves(
        self, select: str, expression: str, k: int, middle: int
    ) -> list[tuple[int, float]]:
        """The best ``k`` matches, those up to ``middle`` ranked here and those above it on
        the second connection at the same time (:data:`SPLIT_MIN_CHUNKS`); ranked here too
        when that connection read another state of the store (a write committed between
        the two reads) or cannot be opened."""
        order = " ORDER BY score, rowid LIMIT ?"
        upper_sql = select + "WHERE chunks_fts MATCH ? AND rowid > ?" + order
        args = (expression, middle, k)
        try:
            side = self._side_connection()
        except SearchError:
            side = None
        upper = None if side is None else _half_threads().submit(
            _rows, side, self._deadline, upper_sql, args
        )  # fmt: skip
        try:
            lower = self._conn.execute(
                select + "WHERE chunks_fts MATCH ? AND rowid <= ?" + order, args
            ).fetchall()
            here = [row[0] for row in self._conn.execute(_STATE)]
        finally:
            failed = upper is not None and upper.exception() is not None  # waits for it
        if failed and upper is not None:
            upper.result()  # its error
        state, above = upper.result() if upper is not None else (None, [])
        if state != here:  # not this read's state: this connection's answer
            above = self._conn.execute(upper_sql, args).fetchall()
        return sorted([*lower, *above], key=lambda row: (row[1], row[0]))[:k]

    def _keyword_items(self, items: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
        """The query items worth ranking with, in query order (see :data:`MATCH_BUDGET`)."""
        if len(items) <= 1:
            return items
        self._check_caches()
        if len(self._counts) > 8192:
            self._counts.clear()
        counts = self._counts
        if () not in counts:
            counts[()] = self.chunk_count()
        total = counts[()]
        if total <= MATCH_BUDGET:
            return items  # a small store: rank with every word
        # Counted up to _COUNT_CAP only ("the" in a 1M-chunk store: 0.4 ms, not 15 ms): a
        # word over the budget is kept only when it is the rarest, and only when every word
        # is over it are their exact counts needed, to tell which is.
        for parts in items:
            if parts not in counts:
                counts[parts] = self._match_count(parts, _COUNT_CAP)
        if all(counts[parts] >= _COUNT_CAP for parts in items if counts[parts]):
            for parts in items:
                if counts[parts] == _COUNT_CAP:
                    counts[parts] = self._match_count(parts, None)
        kept: set[tuple[str, ...]] = set()
        ranked = 0
        for parts in sorted((p for p in items if counts[p] > 0), key=counts.__getitem__):
            count = counts[parts]
            if kept and (2 * count > total or ranked + count > MATCH_BUDGET):
                break
            kept.add(parts)
            ranked += count
        return [parts for parts in items if parts in kept]

    def _match_count(self, parts: tuple[str, ...], cap: int | None) -> int:
        """How many chunks the query item ``parts`` matches, counted up to ``cap`` (None:
        all of them; FTS5 stops reading the item's postings at the cap)."""
        matches = "SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH ?"
        args: tuple[object, ...] = (item_expression(parts),)
        if cap is not None:
            matches, args = matches + " LIMIT ?", (*args, cap)
        return int(self._conn.execute(f"SELECT count(*) FROM ({matches})", args).fetchone()[0])

    @damage_checked
    def filter_ids(
        self,
        path_globs: Sequence[str] = (),
        exts: Sequence[str] = (),
        langs: Sequence[str] = (),
    ) -> set[int] | None:
        """Ids of the chunks whose file passes the filters, or ``None`` when none is given.

        ``path_globs``: gitignore-style patterns (``src/**/test_*.py``) on the relative path;
        ``exts``: extensions with or without the dot; ``langs``: language names (both ignore
        case). A file passes with an include of each kind given and no ``!`` exclude."""
        if not (path_globs or exts or langs):
            return None
        key = (tuple(path_globs), tuple(exts), tuple(langs))
        with self.read():
            self._check_caches()
            found = self._filtered.get(key)
            if found is None:
                if len(self._filtered) >= 16:
                    self._filtered.clear()
                found = self._filtered[key] = frozenset(self._filter(path_globs, exts, langs))
        return set(found)

    def _filter(
        self, path_globs: Sequence[str], exts: Sequence[str], langs: Sequence[str]
    ) -> list[int]:
        path_in, path_out = _split_filters(path_globs, "path")
        ext_in, ext_out = (tuple(map(_ext, group)) for group in _split_filters(exts, "ext"))
        lang_in, lang_out = ({v.lower() for v in group} for group in _split_filters(langs, "lang"))
        if lang_in | lang_out:
            self._check_languages(lang_in | lang_out)
        globs_in, globs_out = ([compile_filter(g) for g in group] for group in (path_in, path_out))
        file_ids: list[int] = []
        for file_id, relpath, language in self._conn.execute(
            "SELECT id, relpath, language FROM files"
        ):
            lower, lang = relpath.lower(), (language or "").lower()
            if (
                (not globs_in or any(glob.matches(relpath) for glob in globs_in))
                and (not ext_in or lower.endswith(ext_in))
                and (not lang_in or lang in lang_in)
                and not any(glob.matches(relpath) for glob in globs_out)
                and not lower.endswith(ext_out)
                and lang not in lang_out
            ):
                file_ids.append(file_id)
        rows = self._conn.execute(
            "SELECT c.id FROM json_each(?) j JOIN chunks c ON c.file_id = j.value",
            (json.dumps(file_ids),),
        )
        return [row[0] for row in rows]

    def _check_languages(self, names: AbstractSet[str]) -> None:
        """A :class:`SearchError` listing the languages when one of ``names`` is none."""
        held = self.languages()
        known = {spec.name for spec in LANGUAGES} | set(held)
        unknown = sorted(names - known)
        if unknown:
            here = ", ".join(f"{name} ({count})" for name, count in held.items()) or "none"
            raise SearchError(
                f"unknown language {', '.join(map(repr, unknown))}; the index holds: {here}; "
                f"known: {', '.join(sorted(known))}"
            )
