"""Keep an index current as files change: OS file events through ``watchfiles``.

:class:`Watcher` brings the index up to date once (what changed while nothing watched),
then waits for file events (inotify, FSEvents, ReadDirectoryChangesW through ``watchfiles``'
Rust core: no polling, near-zero CPU while idle) on each folder the walk enters, watched
alone (a recursive watch follows symbolic links); a new folder starts a new watch that
takes it in. Its first round runs over everything once more, for what changed before the
watch began. Events are grouped until
:attr:`Watcher.quiet_ms` pass without a new one (at most :attr:`Watcher.max_ms`), then the
changed paths are indexed in one :meth:`Index.update` (a deleted or renamed-away path drops
its files; a save through a temporary file and a rename is the final file changed); more
than :data:`BURST` paths (a ``git checkout``) or a changed ignore file make it an update of
the whole root. Events in the store and in hidden or default-ignored folders are dropped
before they wake anything. A failed update (another writer, a lane error) is reported and
its paths are tried again with the next round, never dropped. What the walk sets aside (a
symbolic link out of the root, a minified file; :mod:`anekit.search.walk`) is no error:
each path is reported once, in :attr:`Round.set_aside`, and the watch goes on. A root
whose folder is gone (deleted, moved, swapped for a link) ends the watch with a last round
that says so (:attr:`Round.gone`), not a round failing for ever.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anekit.errors import SearchError
from anekit.search.index import Index, IndexSummary
from anekit.search.priority import Priority, busy
from anekit.search.walk import (
    DEFAULT_IGNORE_SUFFIXES,
    DEFAULT_IGNORES,
    IGNORE_FILES,
    Skipped,
    walk,
)

__all__ = ["BURST", "RETRY_MS", "Round", "Watcher"]

#: More changed paths than this in one round are indexed as one update of the whole root.
BURST = 200
#: A round that failed is tried again after this long without events (milliseconds).
RETRY_MS = 5000
# The ignore rules git keeps inside .git (a change re-reads every rule: a whole update).
_GIT_EXCLUDE = ".git/info/exclude"


@dataclass
class Round:
    """One round of the watcher: the paths it saw change and what indexing them did."""

    paths: list[str]  # relative to the root, sorted; empty for the first catch-up
    whole: bool  # indexed as an update of the whole root
    summary: IndexSummary | None = None
    error: str | None = None
    seconds: float = 0.0
    #: When the round's events were handed over (time.monotonic()); None for catch-up.
    first_event: float | None = None
    #: Paths the walk set aside that no earlier round of this watcher reported.
    set_aside: list[Skipped] = field(default_factory=list)
    #: The root's folder is gone: the watch ended with this round (its error says so).
    gone: bool = False
    #: The watch ended with this round (its folder gone, or an error it cannot go on from).
    last: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "paths": self.paths,
            "whole": self.whole,
            "seconds": round(self.seconds, 3),
            "error": self.error,
            "gone": self.gone,
            "last": self.last,
            "set_aside": [
                {"path": item.relpath, "reason": item.reason, "detail": item.detail}
                for item in self.set_aside
            ],
            "summary": None if self.summary is None else self.summary.as_dict(),
        }


class Watcher:
    """Watches ``paths`` (default: the index's root) and keeps ``index`` current."""

    def __init__(
        self,
        index: Index,
        paths: Sequence[Path | str] | None = None,
        *,
        quiet_ms: int = 500,
        max_ms: int | None = None,
        on_round: Callable[[Round], None] | None = None,
        priority: Priority | None = None,
    ) -> None:
        if quiet_ms < 1:
            raise ValueError(f"quiet_ms must be at least 1, got {quiet_ms}")
        self.index = index
        self.root = index.root
        # As named, not resolved: a symbolic link in the root stays a path inside it.
        self.paths = [Path(os.path.abspath(path)) for path in paths] if paths else [self.root]
        self.quiet_ms = quiet_ms
        self.max_ms = max_ms if max_ms is not None else max(4 * quiet_ms, 2000)
        self.on_round = on_round
        #: Held busy for each round (a daemon is in the background between rounds).
        self.priority = priority
        self.stop_event = threading.Event()
        #: The root's folder went away: the watch ended (:meth:`_gone`).
        self.gone = False
        self._store = index.directory.resolve()
        self._reported: set[Skipped] = set()

    def stop(self) -> None:
        """Make :meth:`run` return after the round in progress (from any thread)."""
        self.stop_event.set()

    def run(self) -> None:
        """Catch up, then index each round of changes until :meth:`stop`. A lane or model
        that does not exist is an error here, not a failed round tried again for ever."""
        import watchfiles

        self.index.identity()
        self._index(set(), whole=self.paths == [self.root], first_event=None)
        pending: set[str] = set()
        # Events start to flow only once the watch below has begun: what changed during
        # the catch-up above is found by one more run over everything, at the first round.
        whole = True
        while not self.stop_event.is_set():
            grown = False
            try:
                folders = self._folders()
                for changes in watchfiles.watch(
                    *folders,
                    recursive=False,
                    watch_filter=self._wanted,
                    debounce=self.max_ms,
                    step=self.quiet_ms,
                    stop_event=self.stop_event,
                    rust_timeout=RETRY_MS,  # an empty round then: a failed round is tried again
                    yield_on_timeout=True,
                    raise_interrupt=False,
                ):
                    arrived = time.monotonic()
                    for change, path in changes:
                        relpath = self._relpath(path)
                        if relpath is None:
                            continue
                        if Path(relpath).name in IGNORE_FILES or relpath == _GIT_EXCLUDE:
                            whole = True
                        if change != watchfiles.Change.deleted and path not in folders:
                            grown = grown or (os.path.isdir(path) and not os.path.islink(path))
                        pending.add(relpath)
                    if not pending and not whole:  # a timeout with nothing to do
                        if self._gone(started=None):
                            continue  # stopped: the loop ends at its next step
                        if self.index.has_lanes:
                            # In a busy block: the daemon then gives the memory back.
                            with busy(self.priority):
                                self.index.release_idle_lanes()
                        continue
                    whole = whole or len(pending) > BURST
                    if self._index(pending, whole=whole, first_event=arrived):
                        pending, whole = set(), False
                    if grown:
                        break  # watch the new folders too
                else:
                    return  # stopped
            except (FileNotFoundError, SearchError):
                # The root, or a folder in it, went away during the walk for the watch
                # (the walk refuses a root that is not a folder) or between the walk and
                # the watch's start: the root gone ends the watch with its last round;
                # else what is there is walked and watched again, after a pause.
                if self._gone(started=None) or self.stop_event.wait(self.quiet_ms / 1000):
                    continue  # stopped: the loop ends
            whole = True  # what changed between the two watches

    def _folders(self) -> list[str]:
        """What to watch: each folder the walk enters, alone (``recursive=False``): a
        recursive watch follows symbolic links, through ``root -> /`` to the whole
        file system, and enters ignored folders (``node_modules``) for nothing. Named
        files are watched as they are, and ``.git/info`` for its ignore rules."""
        scope = None if self.paths == [self.root] else self.paths
        walked = walk(self.root, scope and [path for path in scope if os.path.lexists(path)])
        folders = [str(self.root / relpath) for relpath in walked.directories]
        folders += [str(path) for path in scope or () if path.is_file() and not path.is_symlink()]
        exclude = self.root / ".git" / "info"
        if exclude.is_dir() and not exclude.is_symlink() and not (self.root / ".git").is_symlink():
            folders.append(str(exclude))
        return folders or [str(self.root)]

    def _gone(self, started: float | None, paths: Sequence[str] = ()) -> bool:
        """Whether the root's folder is gone (deleted, moved, now a link); if so, a last
        round says so and the watch stops."""
        if os.path.isdir(self.root) and not os.path.islink(self.root):
            return False
        done = Round(sorted(paths), False, gone=True, last=True)
        done.error = f"{self.root}: the folder is gone (moved or deleted): no longer watched"
        done.seconds = 0.0 if started is None else time.monotonic() - started
        self.gone = True
        self.stop_event.set()
        if self.on_round is not None:
            self.on_round(done)
        return True

    def _index(self, relpaths: set[str], *, whole: bool, first_event: float | None) -> bool:
        """Index one round; whether it succeeded (else its paths wait for the next)."""
        started = time.monotonic()
        if self._gone(started, sorted(relpaths)):
            return False
        done = Round(sorted(relpaths), whole, first_event=first_event)
        try:
            scope = None if whole else [self.root / relpath for relpath in done.paths]
            if scope is None and self.paths != [self.root]:
                scope = list(self.paths)
            with busy(self.priority):
                done.summary = self.index.update(paths=scope)
            done.set_aside = [s for s in done.summary.skipped if s not in self._reported]
            self._reported.update(done.set_aside)
        except Exception as error:  # reported; its paths are tried again next round
            done.error = f"{type(error).__name__}: {error}"
        done.seconds = time.monotonic() - started
        if self.on_round is not None:
            self.on_round(done)
        return done.error is None

    def _relpath(self, path: str) -> str | None:
        """``path`` relative to the root, or None when it is outside it or in the store."""
        full = Path(path)
        if full.is_relative_to(self._store) or not full.is_relative_to(self.root):
            return None
        return full.relative_to(self.root).as_posix()

    def _wanted(self, change: Any, path: str) -> bool:
        """Whether an event can matter: not in the store, a hidden or default-ignored
        folder (but ignore files and .git/info/exclude do)."""
        relpath = self._relpath(path)
        if relpath is None or relpath in ("", "."):
            return False
        if relpath == _GIT_EXCLUDE:
            return True
        *folders, name = relpath.split("/")
        if any(
            part.startswith(".")
            or part in DEFAULT_IGNORES
            or part.endswith(DEFAULT_IGNORE_SUFFIXES)
            for part in folders
        ):
            return False
        return name in IGNORE_FILES or not (name.startswith(".") or name in DEFAULT_IGNORES)
