"""The roots this machine has indexed: ``$ANEKIT_HOME/search/roots.json``.

Each entry is a resolved root and its store directory, recorded by the first update of an
:class:`~anekit.search.index.Index` (``anekit index``, a watcher, the MCP ``index`` tool),
so that ``anekit search --all`` and ``anekit status --all`` know where to look. The file
is rewritten whole through a temporary file and a rename, under an ``flock`` of its own;
a file that does not read as a registry is set aside (``roots.json.corrupt``) and taken
as empty, said once on stderr. An entry whose folder or store is gone is kept and
reported as missing (:meth:`RegisteredRoot.missing`) until it is forgotten.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from anekit import config

__all__ = ["REGISTRY_FILE", "RegisteredRoot", "forget", "record", "registered", "registry_path"]

REGISTRY_FILE = "roots.json"
_VERSION = 1
#: Registry files already said to be unreadable in this process (said once each).
_warned: set[Path] = set()


@dataclass(frozen=True)
class RegisteredRoot:
    """An indexed root and its store directory."""

    root: Path
    store: Path

    def missing(self) -> str | None:
        """Why this root cannot be searched from its entry (``missing folder``, ``no
        index``), or None while its folder and store are there."""
        if not self.root.is_dir():
            return "missing folder"
        if not (self.store / "store.db").is_file():
            return "no index"
        return None


def registry_path() -> Path:
    return config.home() / "search" / REGISTRY_FILE


def registered() -> list[RegisteredRoot]:
    """Every recorded root, in the order first recorded (empty when there is no file)."""
    return _read(registry_path())


def record(root: Path, store: Path) -> bool:
    """Record ``root`` (resolved) with ``store``; whether the file changed. Never raises
    for the registry's sake: a home that cannot be written is said once on stderr."""
    entry = RegisteredRoot(Path(root).resolve(), Path(store).resolve())
    path = registry_path()
    try:
        with _locked(path):
            entries = _read(path)
            if entry in entries:
                return False
            entries = [item for item in entries if item.root != entry.root] + [entry]
            _write(path, entries)
            return True
    except OSError as error:
        _say_once(path, f"cannot record {entry.root} in it ({error})")
        return False


def forget(root: Path | str) -> bool:
    """Drop the entry of ``root`` (as recorded, or as it resolves now); whether one was."""
    path = registry_path()
    named = {Path(os.path.abspath(root)), Path(root).resolve()}
    with _locked(path):
        entries = _read(path)
        kept = [item for item in entries if item.root not in named]
        if len(kept) == len(entries):
            return False
        _write(path, kept)
        return True


def _read(path: Path) -> list[RegisteredRoot]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        entries = [
            RegisteredRoot(Path(item["root"]), Path(item["store"])) for item in data["roots"]
        ]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, TypeError, KeyError) as error:
        with contextlib.suppress(OSError):  # kept for a look; the next record starts anew
            os.replace(path, path.with_name(REGISTRY_FILE + ".corrupt"))
        _say_once(path, f"unreadable ({type(error).__name__}: {error}); starting empty")
        return []
    return entries


def _write(path: Path, entries: list[RegisteredRoot]) -> None:
    data = {
        "version": _VERSION,
        "roots": [{"root": str(item.root), "store": str(item.store)} for item in entries],
    }
    descriptor, temporary = tempfile.mkstemp(prefix=".roots-", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1)
            handle.write("\n")
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One writer of the registry at a time (two index runs finishing together)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path.with_name(REGISTRY_FILE + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def _say_once(path: Path, what: str) -> None:
    if path not in _warned:
        _warned.add(path)
        print(f"warning: the registry of indexed roots {path}: {what}", file=sys.stderr)
