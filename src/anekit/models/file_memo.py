"""Values computed from a file (its hash), remembered in a JSON file under
``$ANEKIT_HOME`` by the file's path, size, mtime and inode, so that a file that did not
change is not read again (hashing 90 MB of weights took 0.18 s of every one-shot
``anekit search``). A file changed in place without its mtime moving is not noticed: the
callers that must notice it (``anekit models fetch``) compute without the memo.

Best effort: a home that cannot be written costs only the computation next time."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from anekit import config

__all__ = ["FileMemo"]


class FileMemo:
    """The memo ``$ANEKIT_HOME/<name>``, keeping the ``kept`` files last recorded."""

    def __init__(self, name: str, kept: int) -> None:
        self.name = name
        self.kept = kept

    @property
    def path(self) -> Path:
        return config.home() / self.name

    def value(self, path: Path, compute: Callable[[], str]) -> str:
        """``compute()`` for ``path``, or the value recorded while the file's size, mtime
        and inode were what they are now (recorded when computed here)."""
        try:
            key, stamp = str(path.resolve()), _stamp(path)
        except OSError:
            return compute()
        known = self._read().get(key)
        if isinstance(known, list) and len(known) == 4 and known[:3] == stamp:
            return str(known[3])
        found = compute()
        self.record({path: found})
        return found

    def record(self, values: dict[Path, str]) -> None:
        """Remember each file's value with its current stamp."""
        memo = self._read()
        for path, value in values.items():
            with contextlib.suppress(OSError):
                key = str(path.resolve())
                memo.pop(key, None)  # the latest recorded last: kept longest
                memo[key] = [*_stamp(path), value]
        self._write(dict(list(memo.items())[-self.kept :]))

    def _read(self) -> dict[str, Any]:
        try:
            found = json.loads(self.path.read_text("utf-8"))
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}

    def _write(self, memo: dict[str, Any]) -> None:
        """Replace the memo file atomically; a home that cannot be written is skipped."""
        path = self.path
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(prefix=f".{self.name}-", suffix=".tmp", dir=path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    json.dump(memo, out)
                os.replace(temp, path)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
                raise


def _stamp(path: Path) -> list[int]:
    info = path.stat()
    return [info.st_size, info.st_mtime_ns, info.st_ino]
