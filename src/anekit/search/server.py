"""Code search for agents: the MCP tools over one or more indexed roots.

:class:`SearchService` does the tools' work (``search``, ``read``, ``files``, ``status``,
``index``). Tool calls run on a pool of :data:`READERS` reader threads, each with its own
:class:`Index` per root (its own SQLite connections), all readers of a root sharing one
vector index and one query model (:class:`~anekit.search.index.SharedReading`), so
concurrent searches do not queue behind each other; an update runs on a writer thread
with its own :class:`Index`, under the store's writer lock, so searches never wait for it
and see each file before or after its update, never half; every root's updates embed
through one lane pool (:class:`~anekit.search.shared_lanes.SharedLanes`). :func:`mcp_server`
puts the service behind the official MCP SDK (``mcp.server.mcpserver.MCPServer``);
``anekit mcp`` serves it over stdio.
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from anekit.errors import AnekitError, DamagedStoreError, SearchError
from anekit.search.index import Index, IndexSummary, Progress, SharedReading, visible
from anekit.search.limits import check_query
from anekit.search.priority import Priority, busy
from anekit.search.searcher import QueryModels
from anekit.search.shared_lanes import SharedLanes
from anekit.search.walk import FileEntry, Skipped, check, read_file, relpath_in

__all__ = ["READERS", "READ_MAX_LINES", "SEARCH_MAX_K", "SearchService", "mcp_server"]

#: Reader threads: tool calls served at once (each search mostly waits on SQLite, NumPy
#: and ONNX Runtime, which release the GIL).
READERS = 4
#: The most lines one ``read`` returns.
READ_MAX_LINES = 400
#: The most hits one ``search`` returns.
SEARCH_MAX_K = 100
#: The most paths one ``files`` returns.
FILES_MAX = 1000
#: The longest an ``index`` call waits (seconds).
INDEX_BUDGET_MAX = 300.0

T = TypeVar("T")


@dataclass
class _Run:
    """An update running (or done) on a writer thread."""

    thread: threading.Thread
    started: float
    progress: Progress | None = None
    summary: IndexSummary | None = None
    error: str | None = None
    finished: threading.Event = field(default_factory=threading.Event)
    #: Whether an index call has returned its end (a run first seen running is reported
    #: by the next call, not replaced by a new run).
    reported: bool = False


class SearchService:
    """The tools' work over the indexed ``roots`` (each a folder with an index, or to
    be indexed by the ``index`` tool)."""

    def __init__(
        self,
        roots: Sequence[Path | str],
        *,
        lanes: Sequence[str] | None = None,
        model: str | None = None,
        priority: Priority | None = None,
        shared_lanes: SharedLanes | None = None,
    ) -> None:
        if not roots:
            raise SearchError("no root to serve: name at least one indexed folder")
        self.roots = [Path(root).resolve() for root in roots]
        for root in self.roots:
            if not root.is_dir():
                raise SearchError(f"{root}: not a folder")
        self.lanes = list(lanes) if lanes else None
        self.model = model
        #: Held busy for each tool call and index run (None: the priority is left alone).
        self.priority = priority
        #: The lane pool every root's index runs embed through (the caller's, closed by
        #: the caller, or one of the service's own, closed by :meth:`close`).
        self.shared_lanes = shared_lanes or SharedLanes(lanes)
        self._owns_lanes = shared_lanes is None
        self._pool = ThreadPoolExecutor(READERS, thread_name_prefix="anekit-search")
        self._local = threading.local()  # each reader thread's Index per root
        self._readers: list[Index] = []  # every reader made, for release_memory and close
        models = QueryModels()  # roots made with one model share its query model
        self._shared = {root: SharedReading(models) for root in self.roots}
        self._runs: dict[Path, _Run] = {}
        self._lock = threading.Lock()
        self._query_model: str | None = None

    async def call(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``function`` on a reader thread (from the event loop)."""

        def work() -> T:
            with busy(self.priority):
                return function(*args, **kwargs)

        return await asyncio.get_running_loop().run_in_executor(self._pool, work)

    def close(self) -> None:
        self._pool.shutdown(wait=True)  # then no reader is in use: close them from here
        with self._lock:
            readers, self._readers = self._readers, []
        for index in readers:
            index.close()
        for run in list(self._runs.values()):
            run.thread.join()
        if self._owns_lanes:
            self.shared_lanes.close()

    def release_memory(self) -> None:
        """Give back what the readers hold and can get again (between requests; from any
        thread: it only drops mapped pages)."""
        with self._lock:
            readers = list(self._readers)
        for index in readers:
            index.release_memory()

    def _root(self, root: str | None) -> Path:
        """The served root named by ``root`` (its path, or its folder's name), or the only
        one; a SearchError names the choices otherwise."""
        if root is None:
            if len(self.roots) == 1:
                return self.roots[0]
            raise SearchError(f"name a root: one of {', '.join(map(str, self.roots))}")
        for candidate in self.roots:
            if root in (str(candidate), candidate.name):
                return candidate
        raise SearchError(f"{root}: not a served root ({', '.join(map(str, self.roots))})")

    def _reader_for(self, root: Path) -> Index:
        """This thread's reader of ``root``."""
        readers: dict[Path, Index] | None = getattr(self._local, "readers", None)
        if readers is None:
            readers = self._local.readers = {}
        if root not in readers:
            made = Index(root, lanes=self.lanes, model=self.model, shared=self._shared[root])
            readers[root] = made
            with self._lock:
                self._readers.append(made)
        return readers[root]

    def _indexed(self, root: Path) -> Index:
        """The reader of a root that has been indexed; a SearchError saying what to do
        otherwise (an agent cannot run ``anekit index``, but it can call the tool)."""
        if not root.is_dir():
            raise SearchError(f"{root}: the folder is gone (moved or deleted)")
        index = self._reader_for(root)
        if not (index.directory / "store.db").exists() or index.store.identity is None:
            raise SearchError(
                f"{root}: the index is empty: call the index tool (or run `anekit index {root}`)"
            )
        return index

    def search(
        self,
        query: str,
        k: int = 10,
        mode: str = "hybrid",
        path: Sequence[str] = (),
        ext: Sequence[str] = (),
        lang: Sequence[str] = (),
        root: str | None = None,
        roots: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """The search tool: refuses what the CLI refuses (``k`` outside 1..SEARCH_MAX_K, a
        query over MAX_QUERY_CHARS, a bad filter), never clamps. ``roots`` (served roots'
        paths or names, or ``["all"]``) searches each and merges the hits by score."""
        check_query(query)  # before anything is opened (Index.search checks it too)
        if not 1 <= k <= SEARCH_MAX_K:
            raise SearchError(f"k must be between 1 and {SEARCH_MAX_K}, got {k}")
        if roots is not None:
            if root is not None:
                raise SearchError("give root or roots, not both")
            return self._search_roots(query, k, mode, path, ext, lang, roots)
        where = self._root(root)
        started = time.perf_counter()
        hits = self._indexed(where).search(query, k=k, mode=mode, paths=path, exts=ext, langs=lang)
        return {
            "root": str(where),
            "query": query,
            "mode": mode,
            "milliseconds": round((time.perf_counter() - started) * 1000, 1),
            "hits": [hit.as_dict() for hit in hits],
        }

    def _search_roots(
        self,
        query: str,
        k: int,
        mode: str,
        path: Sequence[str],
        ext: Sequence[str],
        lang: Sequence[str],
        roots: Sequence[str],
    ) -> dict[str, Any]:
        """``roots`` searched in turn and merged (:func:`~anekit.search.fanout.fan_out`): a
        root that cannot be searched is in ``skipped`` with why, never an error unless
        none could be."""
        from anekit.search.fanout import fan_out

        if not roots:
            raise SearchError('roots is empty: name served roots, or ["all"]')
        chosen = list(self.roots) if list(roots) == ["all"] else [self._root(r) for r in roots]
        chosen = list(dict.fromkeys(chosen))  # each once, in the order named
        started = time.perf_counter()
        found = fan_out(
            chosen,
            self._reader_for,
            query,
            k=k,
            mode=mode,
            paths=path,
            exts=ext,
            langs=lang,
            model_id=None if mode == "keyword" else self._model_id(),
        )
        return {
            "roots": [str(root) for root in found.searched],
            "skipped": found.skipped_dicts(),
            "query": query,
            "mode": mode,
            "milliseconds": round((time.perf_counter() - started) * 1000, 1),
            "hits": [hit.as_dict() for hit in found.hits],
        }

    def _model_id(self) -> str:
        """The model that queries are embedded with (resolved once)."""
        if self._query_model is None:
            from anekit.models.encoders import load_model

            self._query_model = load_model(self.model).model_id
        return self._query_model

    def read(
        self,
        path: str,
        start_line: int = 1,
        end_line: int | None = None,
        root: str | None = None,
    ) -> dict[str, Any]:
        """Lines ``start_line..end_line`` (1-based, inclusive; at most READ_MAX_LINES) of a
        file that the index of a served root would take (:func:`anekit.search.walk.check`:
        no symbolic link, no hidden or ignored path, no store, at most MAX_FILE_BYTES of
        UTF-8 text): a relative path is taken from ``root`` (a served root's path or name),
        else from the first root holding it."""
        if start_line < 1:
            raise SearchError(f"start_line must be at least 1, got {start_line}")
        if end_line is not None and end_line < start_line:
            raise SearchError(f"end_line ({end_line}) is before start_line ({start_line})")
        served = self.roots if root is None else [self._root(root)]
        where, entry = self._readable(path, served)
        text = read_file(entry)
        if isinstance(text, Skipped):
            raise SearchError(f"{path}: not served: {_why_skipped(text)}")
        lines = text.text.splitlines()
        end = len(lines) if end_line is None else end_line
        last = min(end, len(lines), start_line + READ_MAX_LINES - 1)
        return {
            "root": str(where),
            "path": entry.relpath,
            "start_line": start_line,
            "end_line": max(last, start_line - 1),
            "total_lines": len(lines),
            "text": "\n".join(lines[start_line - 1 : last]),
        }

    def _readable(self, path: str, served: Sequence[Path]) -> tuple[Path, FileEntry]:
        """The root of ``served`` and walk entry of ``path``; a SearchError saying why not."""
        outside = f"{path}: outside the served roots; read only reads indexed code"
        if Path(path).is_absolute():
            choices = []
            for root in served:
                try:
                    choices.append((root, relpath_in(root, Path(path))))
                except SearchError:
                    continue
        else:  # "./src/x.py", "src//x.py", "src/../x.py": the walk's form, "src/x.py"
            normal = posixpath.normpath(path)
            escapes = normal == ".." or normal.startswith("../")
            choices = [] if escapes else [(root, normal) for root in served]
        if not choices:
            raise SearchError(outside)
        for root, relpath in choices:
            if not os.path.lexists(root / relpath):
                continue  # perhaps in the next root
            try:
                found = check(root, relpath)
            except SearchError as error:  # a folder, or a file where a folder should be
                raise SearchError(f"{path}: {error}") from None
            if isinstance(found, FileEntry):
                return root, found
            if isinstance(found, Skipped):
                raise SearchError(f"{path}: not served: {_why_skipped(found)}")
            raise SearchError(
                f"{path}: not served: the index leaves it out (hidden, a store, or ignored "
                "by .gitignore/.anekitignore)"
            )
        raise SearchError(f"{path}: no such file in the served roots")

    def files(self, prefix: str = "", root: str | None = None) -> dict[str, Any]:
        where = self._root(root)
        links: dict[str, bool] = {}
        chosen = sorted(
            relpath
            for relpath in self._indexed(where).store.files()
            if relpath.startswith(prefix) and visible(where, relpath, links)
        )
        return {
            "root": str(where),
            "count": len(chosen),
            "files": chosen[:FILES_MAX],
            "truncated": len(chosen) > FILES_MAX,
        }

    def status(self) -> dict[str, Any]:
        roots = []
        for root in self.roots:
            with self._lock:
                run = self._runs.get(root)
            roots.append({"root": str(root), **self._stats(root), "indexing": _run_state(run)})
        daemon = {"priority": self.priority.describe()} if self.priority else {}
        return {"roots": roots, **daemon}

    def _stats(self, root: Path) -> dict[str, Any]:
        """A root's store figures; ``missing`` (its folder gone) or ``damaged`` (what is
        wrong) instead when they cannot be read: reported, never the tool's failure."""
        if not root.is_dir():
            return {"missing": "the folder is gone (moved or deleted)"}
        index = self._reader_for(root)
        if not (index.directory / "store.db").exists():
            return {}
        try:
            return index.store.stats()
        except DamagedStoreError as error:
            return {"damaged": str(error.__cause__ or error)}

    def index(self, budget_seconds: float = 10.0, root: str | None = None) -> dict[str, Any]:
        """Bring a root's index up to date, waiting at most ``budget_seconds``: a run not
        done by then goes on in the background, and the next call reports (or waits) on it."""
        where = self._root(root)
        if not 0 <= budget_seconds <= INDEX_BUDGET_MAX:
            raise SearchError(
                f"budget_seconds must be between 0 and {INDEX_BUDGET_MAX:g}, got {budget_seconds}"
            )
        budget = budget_seconds
        with self._lock:
            run = self._runs.get(where)
            if run is None or (run.finished.is_set() and run.reported):
                run = self._start(where)
        run.finished.wait(budget)
        state = _run_state(run)
        run.reported = state["state"] != "running"
        return {"root": str(where), **state}

    def _start(self, root: Path) -> _Run:
        def work() -> None:
            try:
                with (
                    busy(self.priority),
                    Index(
                        root,
                        lanes=self.lanes,
                        model=self.model,
                        wait=None,
                        shared_lanes=self.shared_lanes,
                    ) as writer,
                ):
                    run.summary = writer.update(
                        progress=lambda step: setattr(run, "progress", step)
                    )
            except Exception as error:  # reported by the next call
                run.error = f"{type(error).__name__}: {error}"
            finally:
                run.finished.set()

        thread = threading.Thread(target=work, name=f"anekit-index-{root.name}", daemon=True)
        run = _Run(thread, time.monotonic())
        self._runs[root] = run
        thread.start()
        return run


def _why_skipped(item: Skipped) -> str:
    return f"{item.reason}{f' ({item.detail})' if item.detail else ''}"


def _run_state(run: _Run | None) -> dict[str, Any]:
    if run is None:
        return {"state": "idle"}
    elapsed = round(time.monotonic() - run.started, 1)
    if not run.finished.is_set():
        step, counts = run.progress, ("files_done", "files_total", "chunks_done", "chunks_total")
        done = {name: getattr(step, name) for name in counts} if step is not None else {}
        return {"state": "running", "seconds": elapsed, **done}
    if run.error is not None:
        return {"state": "failed", "error": run.error, "seconds": elapsed}
    summary = run.summary.as_dict() if run.summary is not None else {}
    summary.pop("skipped_files", None)  # the counts by reason stay; the list can be long
    return {"state": "done", "summary": summary}


def mcp_server(service: SearchService) -> Any:
    """The MCP server of ``service``: five small tools."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    from anekit._version import __version__

    server = MCPServer(
        "anekit",
        version=__version__,
        instructions=(
            "Code search over local repositories: search by meaning or identifier, "
            "then read the lines a hit names."
        ),
    )

    async def run(
        function: Callable[..., dict[str, Any]], *args: Any, reader: bool = True
    ) -> dict[str, Any]:
        """``function`` on the reader thread, or another for a call that waits (``reader``
        False); a refusal (a path outside the roots, a bad mode, no index yet) becomes the
        tool's error message for the agent."""
        try:
            if reader:
                return await service.call(function, *args)
            return await asyncio.get_running_loop().run_in_executor(None, function, *args)
        except (AnekitError, ValueError) as error:
            raise ToolError(str(error)) from error

    @server.tool()
    async def search(
        query: str,
        k: int = 10,
        mode: Literal["hybrid", "vector", "keyword"] = "hybrid",
        path: list[str] | None = None,
        ext: list[str] | None = None,
        lang: list[str] | None = None,
        root: str | None = None,
        roots: list[str] | None = None,
    ) -> dict[str, Any]:
        """Find code by meaning or name. path: gitignore-style globs; ext, lang: filters;
        a leading ! excludes. roots: several roots (or ["all"]), merged by score. Hits:
        path, lines, symbol, kind, score, snippet."""
        filters = (path or (), ext or (), lang or ())
        return await run(service.search, query, k, mode, *filters, root, roots)

    @server.tool()
    async def read(path: str, start_line: int = 1, end_line: int | None = None) -> dict[str, Any]:
        """Lines of a file in an indexed root (1-based, inclusive; 400 at most)."""
        return await run(service.read, path, start_line, end_line)

    @server.tool()
    async def files(prefix: str = "", root: str | None = None) -> dict[str, Any]:
        """Indexed files whose path starts with prefix."""
        return await run(service.files, prefix, root)

    @server.tool()
    async def status() -> dict[str, Any]:
        """Each root: files, chunks, model, last update, indexing state."""
        return await run(service.status)

    @server.tool()
    async def index(budget_seconds: float = 10.0, root: str | None = None) -> dict[str, Any]:
        """Update the index; waits up to budget_seconds, then continues in the background
        (call again to follow it)."""
        return await run(service.index, budget_seconds, root, reader=False)

    return server
