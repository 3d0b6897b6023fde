"""Which files code search reads.

:func:`walk` lists the files under a root as ``git status`` would see them, less:

* what ``.gitignore`` and ``.anekitignore`` files at every level ignore (gitwildmatch, by
  :mod:`pathspec`), each for the paths below its directory, relative to it: the last
  matching pattern decides, deeper files win over shallower ones, ``.anekitignore`` over the
  ``.gitignore`` beside it, and ``.git/info/exclude`` loses to all. As in git, a directory
  is matched as a directory and nothing below an ignored directory can be re-included;
* :data:`DEFAULT_IGNORES` (vendored, generated and tool folders) and hidden names (which
  also keeps the store ``.anekit/`` out).

It sets aside, with a reason from :data:`SKIP_REASONS`, files over :data:`MAX_FILE_BYTES`,
unreadable files and directories, broken symbolic links, links back into walked directories,
files that vanish mid-walk and names that are not UTF-8; :func:`read_file` also sets aside
binaries (a NUL byte in the first :data:`BINARY_PROBE_BYTES`) and text that is not UTF-8.
"""

from __future__ import annotations

import errno
import heapq
import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

from anekit.errors import SearchError

__all__ = [
    "BINARY_PROBE_BYTES",
    "DEFAULT_IGNORES",
    "DEFAULT_IGNORE_SUFFIXES",
    "IGNORE_FILES",
    "MAX_FILE_BYTES",
    "SKIP_REASONS",
    "FileEntry",
    "FileText",
    "Skipped",
    "WalkResult",
    "read_file",
    "walk",
]

MAX_FILE_BYTES = 8 * 1024 * 1024
"""Files larger than this are skipped as ``"too large"``."""

BINARY_PROBE_BYTES = 8192
"""A NUL byte among a file's first this many bytes makes it ``"binary"``."""

DEFAULT_IGNORES: frozenset[str] = frozenset(
    {".git", ".hg", ".svn"}  # version control
    # Python environments, caches and build output
    | {"venv", ".venv", "__pycache__", ".tox", ".nox", ".eggs", "site-packages", "dist", "build"}
    | {".mypy_cache", ".pytest_cache", ".ruff_cache", "htmlcov", "coverage"}
    | {"node_modules", "bower_components", ".next"}  # JavaScript
    | {"target", ".gradle", "vendor"}  # Rust, Java, Go, PHP, Ruby
    | {".idea"}  # editors
)
"""Directory names never walked, wherever they are (files of these names are walked)."""

DEFAULT_IGNORE_SUFFIXES: tuple[str, ...] = (".egg-info",)
"""Directory name endings never walked (``*.egg-info``)."""

IGNORE_FILES: tuple[str, ...] = (".gitignore", ".anekitignore")
"""Per-directory ignore files, lowest precedence first."""

SKIP_REASONS = ("binary", "too large", "undecodable", "unreadable", "symlink loop", "vanished")
"""Why a file or directory was set aside, in the order reports list them."""

_STORE_DIR = ".anekit"


@dataclass(frozen=True)
class FileEntry:
    """A file to index: ``path`` as walked (it may be a symlink inside the root), ``relpath``
    the POSIX path relative to the root, ``size`` and ``mtime_ns`` from ``os.stat``."""

    path: Path
    relpath: str
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Skipped:
    """A file or directory set aside; ``reason`` is one of :data:`SKIP_REASONS`."""

    relpath: str
    reason: str
    detail: str = ""


@dataclass
class WalkResult:
    """What :func:`walk` found: ``files`` and ``skipped`` sorted by relpath, and how many
    paths ignore rules, :data:`DEFAULT_IGNORES` and hidden names left out (an ignored
    directory counts once)."""

    files: list[FileEntry]
    skipped: list[Skipped]
    ignored: int

    def skipped_by_reason(self) -> dict[str, int]:
        """Counts of skipped paths for every reason in :data:`SKIP_REASONS` (zeros included)."""
        counts = dict.fromkeys(SKIP_REASONS, 0)
        for item in self.skipped:
            counts[item.reason] += 1
        return counts


@dataclass(frozen=True)
class FileText:
    """A file's exact ``data`` (what the indexer hashes) and its UTF-8 ``text`` (without a
    leading byte order mark)."""

    data: bytes
    text: str


# pathspec's regexes match a path or any path below it; this group marks where a match reached
# a directory that is the path's ancestor (or, for a trailing "/" pattern, the path itself).
_DIR_MARK = "ps_d"
# The trailing spaces git ignores in a pattern (not a backslash-escaped one).
_TRAILING_SPACES = re.compile(r"(?<!\\) +\Z")


@dataclass(frozen=True)
class _Rule:
    """One gitignore pattern: ``ignore`` False for a ``!`` pattern; ``regex`` matches the path
    itself when it matches without the directory mark; ``dir_only`` for a trailing ``/``."""

    ignore: bool
    regex: re.Pattern[str]
    dir_only: bool


# (base, rules): ``rules`` apply to relpaths under ``base`` ("" or "dir/sub/"), relative to it.
_Layer = tuple[str, tuple[_Rule, ...]]


def walk(root: Path, paths: Sequence[Path] | None = None) -> WalkResult:
    """List the files under ``root`` that code search should read.

    ``paths`` restricts the walk to these files and directories (relative ones are taken
    from the current directory); the ignore rules of their ancestors still apply, so a named
    file that is ignored is left out. Raises :class:`~anekit.errors.SearchError` when
    ``root`` is not a readable directory, or a path is outside it or does not exist.
    """
    root_abs = os.path.abspath(root)
    if not os.path.isdir(root_abs):
        raise SearchError(f"{root}: not a directory")
    walker = _Walker(root_abs)
    rels = [""] if paths is None else _outermost(_relpath(root_abs, root, Path(p)) for p in paths)
    for rel in rels:
        walker.walk_path(rel)  # "": the whole root
    walker.drain()
    return WalkResult(
        files=sorted(walker.files.values(), key=lambda f: f.relpath),
        skipped=sorted(walker.skipped.values(), key=lambda s: s.relpath),
        ignored=walker.ignored,
    )


def read_file(entry: FileEntry) -> FileText | Skipped:
    """Read ``entry``; a :class:`Skipped` when it is binary, not UTF-8, unreadable, gone or
    grown past :data:`MAX_FILE_BYTES`."""
    try:
        # O_NONBLOCK: a file replaced by a FIFO since the walk must not hang the open.
        fd = os.open(entry.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with open(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return Skipped(entry.relpath, "unreadable", "not a regular file")
            data = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError as exc:
        return Skipped(entry.relpath, "vanished", _why(exc))
    except OSError as exc:
        return Skipped(entry.relpath, "unreadable", _why(exc))
    if len(data) > MAX_FILE_BYTES:
        return Skipped(entry.relpath, "too large", f"more than {MAX_FILE_BYTES} bytes")
    if b"\0" in data[:BINARY_PROBE_BYTES]:
        return Skipped(entry.relpath, "binary", "NUL byte")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Skipped(entry.relpath, "undecodable", f"not UTF-8 at byte {exc.start}")
    return FileText(data=data, text=text.removeprefix("\ufeff"))


class _Walker:
    """The state of one walk: results so far, walked directories, deferred symlinks."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.files: dict[str, FileEntry] = {}
        self.skipped: dict[str, Skipped] = {}
        self.ignored = 0
        self.visited: set[tuple[int, int]] = set()
        self.stack: list[tuple[str, str, tuple[_Layer, ...]]] = []
        # Symlinked directories wait until every real directory has been walked, so that
        # the real path always wins: (relpath, path, layers, target's (st_dev, st_ino)).
        self.links: list[tuple[str, str, tuple[_Layer, ...], tuple[int, int]]] = []
        git = os.path.join(root, ".git")
        exclude = [os.path.join(git, "info", "exclude")] if os.path.isdir(git) else []
        self.base_layers = _layered((), "", exclude)

    def skip(self, relpath: str, reason: str, detail: str = "") -> None:
        self.skipped[relpath] = Skipped(relpath, reason, detail)

    def walk_dir(self, path: str, prefix: str, layers: tuple[_Layer, ...], top: bool) -> None:
        """Walk the directory ``path`` (relpath ``prefix``, "" or ending in "/")."""
        self.stack.append((path, prefix, layers))
        while self.stack:
            self._scan(*self.stack.pop(), top=top)
            top = False

    def drain(self) -> None:
        """Walk the deferred symlinked directories, in relpath order."""
        heapq.heapify(self.links)
        while self.links:
            rel, path, layers, key = heapq.heappop(self.links)
            if key in self.visited:
                self.skip(rel, "symlink loop", f"-> {_readlink(path)}")
            else:
                self.walk_dir(path, rel + "/", layers, top=False)

    def walk_path(self, rel: str) -> None:
        """Walk one named path, checking each of its components against the ignore rules."""
        if not rel:
            self.walk_dir(self.root, "", self.base_layers, top=True)
            return
        layers, parent, prefix = self.base_layers, self.root, ""
        parts = rel.split("/")
        for depth, name in enumerate(parts):
            layers = _layered(layers, prefix, [os.path.join(parent, n) for n in IGNORE_FILES])
            path, rel = os.path.join(parent, name), prefix + name
            try:
                st = os.stat(path)
            except FileNotFoundError as exc:
                raise SearchError(f"{path}: no such file or directory") from exc
            except OSError as exc:
                reason = "symlink loop" if exc.errno == errno.ELOOP else "unreadable"
                self.skip(rel, reason, _why(exc))
                return
            is_dir = stat.S_ISDIR(st.st_mode)
            if self._excluded(name, rel, is_dir, layers):
                self.ignored += 1
                return
            if depth == len(parts) - 1:
                if is_dir:
                    self.walk_dir(path, rel + "/", layers, top=False)
                else:
                    self._add_file(path, rel, st)
            parent, prefix = path, rel + "/"

    def _scan(self, path: str, prefix: str, layers: tuple[_Layer, ...], top: bool) -> None:
        try:
            st = os.stat(path)
            with os.scandir(path) as it:
                entries = list(it)
        except OSError as exc:
            if top:
                raise SearchError(f"{self.root}: cannot read the directory: {_why(exc)}") from exc
            self._file_error(prefix.rstrip("/"), exc)
            return
        self.visited.add((st.st_dev, st.st_ino))
        names = {entry.name for entry in entries}
        files = [os.path.join(path, name) for name in IGNORE_FILES if name in names]
        layers = _layered(layers, prefix, files)
        for entry in entries:
            self._entry(entry, prefix, layers)

    def _entry(self, entry: os.DirEntry[str], prefix: str, layers: tuple[_Layer, ...]) -> None:
        name, rel = entry.name, prefix + entry.name
        if name[0] == ".":
            self.ignored += 1
            return
        st: os.stat_result | None = None
        try:
            is_link = entry.is_symlink()
            if is_link:
                st = os.stat(entry.path)
                is_dir = stat.S_ISDIR(st.st_mode)
            else:
                is_dir = entry.is_dir(follow_symlinks=False)
        except OSError as exc:
            if self._excluded(name, rel, False, layers):
                self.ignored += 1
            elif exc.errno == errno.ELOOP:
                self.skip(rel, "symlink loop", _why(exc))
            elif isinstance(exc, FileNotFoundError) and os.path.islink(entry.path):
                self.skip(rel, "unreadable", f"broken symbolic link -> {_readlink(entry.path)}")
            else:
                self._file_error(rel, exc)
            return
        if self._excluded(name, rel, is_dir, layers):
            self.ignored += 1
        elif not _is_utf8(name):
            self.skip(_printable(rel), "undecodable", "file name is not UTF-8")
        elif not is_dir:
            self._add_file(entry.path, rel, st)
        elif is_link:
            assert st is not None
            self.links.append((rel, entry.path, layers, (st.st_dev, st.st_ino)))
        else:
            self.stack.append((entry.path, rel + "/", layers))

    def _excluded(self, name: str, rel: str, is_dir: bool, layers: tuple[_Layer, ...]) -> bool:
        if name[0] == "." or rel == _STORE_DIR:
            return True
        if is_dir and (name in DEFAULT_IGNORES or name.endswith(DEFAULT_IGNORE_SUFFIXES)):
            return True
        for base, rules in reversed(layers):
            local = rel[len(base) :]
            for rule in reversed(rules):
                if rule.dir_only and not is_dir:
                    continue
                match = rule.regex.search(local)
                if match is not None and match.groupdict().get(_DIR_MARK) is None:
                    return rule.ignore
        return False

    def _add_file(self, path: str, rel: str, st: os.stat_result | None) -> None:
        try:
            if st is None:
                st = os.stat(path)
        except OSError as exc:
            self._file_error(rel, exc)
            return
        if not stat.S_ISREG(st.st_mode):
            self.skip(rel, "unreadable", "not a regular file")
        elif st.st_size > MAX_FILE_BYTES:
            self.skip(rel, "too large", f"{st.st_size} bytes")
        else:
            self.files[rel] = FileEntry(Path(path), rel, st.st_size, st.st_mtime_ns)

    def _file_error(self, rel: str, exc: OSError) -> None:
        reason = "vanished" if isinstance(exc, FileNotFoundError) else "unreadable"
        self.skip(rel, reason, _why(exc))


def _layered(layers: tuple[_Layer, ...], prefix: str, files: list[str]) -> tuple[_Layer, ...]:
    """``layers`` plus one layer of the rules in ``files`` (for relpaths under ``prefix``)."""
    rules = _rules([line for file in files for line in _read_lines(file)])
    return (*layers, (prefix, rules)) if rules else layers


def _read_lines(file: str) -> list[str]:
    try:
        with open(file, encoding="utf-8", errors="replace") as handle:
            return handle.read().splitlines()
    except OSError:
        return []


def _rules(lines: list[str]) -> tuple[_Rule, ...]:
    """Compile gitignore lines; blank lines, comments and lines pathspec refuses are dropped."""
    rules = []
    for line in lines:
        pattern = _pattern(line)
        if pattern is None or pattern.include is None or pattern.regex is None:
            continue
        regex: re.Pattern[str] | None = pattern.regex
        dir_only = pattern.regex.pattern.endswith(f"(?P<{_DIR_MARK}>/)")
        if dir_only:
            # "build/" is the pattern "build" that only directories can match.
            bare = _pattern(_TRAILING_SPACES.sub("", line)[:-1])
            regex = bare.regex if bare is not None else None
        if regex is not None:
            rules.append(_Rule(pattern.include, regex, dir_only))
    return tuple(rules)


def _pattern(line: str) -> GitIgnoreSpecPattern | None:
    try:
        return GitIgnoreSpecPattern(line)
    except (ValueError, re.error):
        return None


def _relpath(root_abs: str, root: Path, path: Path) -> str:
    """``path`` relative to the root as a POSIX relpath ("" for the root itself)."""
    for base, full in (
        (root_abs, os.path.abspath(path)),
        (os.path.realpath(root_abs), os.path.realpath(path)),
    ):
        if full == base:
            return ""
        if full.startswith(base.rstrip(os.sep) + os.sep):
            return Path(os.path.relpath(full, base)).as_posix()
    raise SearchError(f"{path}: outside the indexed root {root}")


def _outermost(rels: Iterable[str]) -> list[str]:
    """Sorted relpaths less those inside another of them."""
    kept: list[str] = []
    for rel in sorted(set(rels)):
        if not any(not k or rel == k or rel.startswith(k + "/") for k in kept):
            kept.append(rel)
    return kept


def _is_utf8(name: str) -> bool:
    # Bytes that are not UTF-8 come back as lone surrogates, which UTF-8 cannot encode.
    return name.isascii() or not any("\ud800" <= char <= "\udfff" for char in name)


def _printable(rel: str) -> str:
    return os.fsencode(rel).decode("utf-8", "backslashreplace")


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)
