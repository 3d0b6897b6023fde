"""Several roots watched from one process (``anekit serve a b``): :class:`RootWatchers`.

One :class:`~anekit.search.watch.Watcher` per root, each on its own thread with its own
:class:`~anekit.search.index.Index` (its SQLite connections belong to that thread), all
embedding through one lane pool (:class:`~anekit.search.shared_lanes.SharedLanes`), closed
once when every watcher has stopped. A root whose folder goes away ends its own watcher
with a round that says so (:attr:`~anekit.search.watch.Round.gone`); the others go on.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from anekit.search.index import Index
from anekit.search.priority import Priority
from anekit.search.shared_lanes import SharedLanes
from anekit.search.watch import Round, Watcher

__all__ = ["RootWatchers"]

_log = logging.getLogger(__name__)


class RootWatchers:
    """Watch ``roots`` with ``lanes`` and ``model`` until :meth:`stop`; each round goes
    to ``on_round(root, round)`` (from the root's thread); ``shared_lanes``: the pool to
    embed through (default: one of its own)."""

    def __init__(
        self,
        roots: Sequence[Path],
        *,
        lanes: Sequence[str] | None = None,
        model: str | None = None,
        priority: Priority | None = None,
        on_round: Callable[[Path, Round], None] | None = None,
        quiet_ms: int = 500,
        shared_lanes: SharedLanes | None = None,
    ) -> None:
        self.roots = [Path(root) for root in roots]
        #: The one pool of every root's rounds: the caller's (closed by the caller), or
        #: one of its own, closed by :meth:`stop`.
        self.lanes = shared_lanes or SharedLanes(lanes)
        self._owns_lanes = shared_lanes is None
        self._names = list(lanes) if lanes else None
        self._model = model
        self._priority = priority
        self._on_round = on_round
        self._quiet_ms = quiet_ms
        self.watchers: dict[Path, Watcher] = {}
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """A watcher thread for each root (its first round catches up)."""
        for root in self.roots:
            index = Index(
                root, lanes=self._names, model=self._model, wait=None, shared_lanes=self.lanes
            )
            watcher = Watcher(
                index,
                quiet_ms=self._quiet_ms,
                on_round=functools.partial(self._report, root),
                priority=self._priority,
            )
            self.watchers[root] = watcher
            thread = threading.Thread(
                target=self._run,
                args=(root, watcher),
                name=f"anekit-watch-{root.name}",
                daemon=True,
            )
            self._threads.append(thread)
            thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop every watcher (after its round in progress), then the lanes if its own."""
        for watcher in self.watchers.values():
            watcher.stop()
        for thread in self._threads:
            thread.join(timeout)
        if self._owns_lanes:
            self.lanes.close()

    def _report(self, root: Path, done: Round) -> None:
        if self._on_round is not None:
            self._on_round(root, done)

    def _run(self, root: Path, watcher: Watcher) -> None:
        try:
            watcher.run()
        except Exception as error:  # one root's watch ends; the others go on
            _log.exception("%s: the watch stopped", root)
            done = Round([], False, last=True)
            done.error = f"{root}: the watch stopped: {type(error).__name__}: {error}"
            self._report(root, done)
        finally:
            watcher.index.close()  # its connections belong to this thread; not the lanes
