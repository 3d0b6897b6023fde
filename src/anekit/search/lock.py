"""One writer per store: an exclusive lock on ``<store>/writer.lock``.

SQLite lets one write transaction in at a time, but an index run is many transactions
(a checkpoint every 30 s); two runs interleaving theirs would each embed what the other
is embedding and race on the files they both see. So a writer (``Index.update``,
``Index.forget``, the watcher, the daemon) holds :class:`WriterLock` for its whole run.
The lock is ``flock`` on a file in the store directory: the kernel drops it when the
holder exits, ``kill -9`` included, so a crashed writer never leaves a stale lock. The
holder writes who it is (pid, host, command, since when) into the file, so that a second
writer can say whom it waited for. Readers take no lock (SQLite WAL: a reader sees each
file before or after its update, never half).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from anekit.errors import SearchError

__all__ = ["LOCK_FILE", "StoreBusy", "WriterLock"]

LOCK_FILE = "writer.lock"
# How often a waiting writer tries again (seconds).
_POLL_S = 0.1
# A planted link in place of the lock file is not written through.
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class StoreBusy(SearchError):
    """Another process is writing the store; ``holder`` says who (or is empty)."""

    def __init__(self, message: str, holder: dict[str, Any]) -> None:
        super().__init__(message)
        self.holder = holder


class WriterLock:
    """The store's writer lock. ``acquire(wait)`` waits up to ``wait`` seconds (0: not at
    all, None: as long as it takes) and raises :class:`StoreBusy` naming the holder."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / LOCK_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, wait: float | None = 0.0) -> None:
        if self._fd is not None:
            raise SearchError(f"{self.path}: this writer already holds the lock")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | _NOFOLLOW, 0o644)
        except OSError as exc:
            raise SearchError(
                f"{self.path.parent}: cannot write the search store here ({exc.strerror}); "
                "make it writable, or keep the store elsewhere with --store DIR "
                "(or ANEKIT_STORE)"
            ) from exc
        deadline = None if wait is None else time.monotonic() + wait
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if deadline is not None and time.monotonic() >= deadline:
                        holder = self.holder()
                        message = _busy_message(self.path.parent, holder, wait)
                        raise StoreBusy(message, holder) from None
                    time.sleep(_POLL_S)
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(_me()).encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        """Let the lock go (idempotent); the file stays, empty."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # closing drops the flock

    def holder(self) -> dict[str, Any]:
        """Who holds the lock, as the holder wrote it ({} when unknown)."""
        try:
            found = json.loads(self.path.read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}

    def __enter__(self) -> WriterLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _me() -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])[:200] if sys.argv else "",
        "since": time.time(),
    }


def _busy_message(directory: Path, holder: dict[str, Any], wait: float | None) -> str:
    who = "another process"
    if holder.get("pid"):
        who = f"process {holder['pid']}"
        if holder.get("host") and holder["host"] != socket.gethostname():
            who += f" on {holder['host']}"
        if holder.get("command"):
            who += f" ({holder['command']})"
        if isinstance(holder.get("since"), int | float):
            who += ", since " + time.strftime("%H:%M:%S", time.localtime(holder["since"]))
    waited = f" after waiting {wait:g} s" if wait else ""
    return (
        f"{directory}: the index is being written by {who}{waited}; "
        "one writer at a time: wait for it (--wait SECONDS) or stop it"
    )
