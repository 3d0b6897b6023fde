"""Which files code search reads: one rule for what is inside a root.

:func:`walk` lists the files under a root as ``git status`` would see them, less:

* what ``.gitignore`` and ``.anekitignore`` files at every level ignore (gitwildmatch, by
  :mod:`anekit.search.globs`), each for the paths below its directory, relative to it: the
  last matching pattern decides, deeper files win over shallower ones, ``.anekitignore``
  over the ``.gitignore`` beside it, and ``.git/info/exclude`` loses to all. As in git, a
  directory is matched as a directory and nothing below an ignored directory can be
  re-included;
* :data:`DEFAULT_IGNORES` (vendored, generated and tool folders) and hidden names (which
  also keeps every store ``.anekit/``, a nested root's included, out).

Symbolic links are never followed (as ripgrep, fd and git do by default): a link is set
aside as ``"symlink"``, counted and listed, whatever it points at. A link out of the root
(``etc -> /etc``, ``~/.ssh``, ``/``) would serve files that are not the repository's; a
link to a file or folder inside it only repeats what the walk finds under its own path,
or, pointing at a hidden or ignored path, would show what the rules keep out. So every
file taken is a regular file whose path, component by component, is inside the root.
Special files (FIFOs, sockets, devices) are set aside too.

It sets aside, with a reason from :data:`SKIP_REASONS`, files over :data:`MAX_FILE_BYTES`,
unreadable files and directories, special files, symbolic links, files that vanish
mid-walk and names that are not UTF-8; :func:`read_file` also sets aside binaries (a NUL
byte in the first :data:`BINARY_PROBE_BYTES`), text that is mostly not UTF-8 (text with a
few bytes that are not, an old Latin-1 comment in a UTF-8 file, is read with U+FFFD for
them and a note: :attr:`FileText.note`) and minified or
generated text (a file of :data:`MINIFIED_MIN_BYTES` or more whose lines average more
than ``ANEKIT_MINIFIED_LINE`` characters), and opens each file without following a link
at any component, so that a file swapped for a link after the walk is not read either.
:func:`check` applies the same rule to one path (what ``read`` over MCP may serve).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from anekit import config
from anekit.errors import SearchError
from anekit.search.globs import Glob, compile_line

__all__ = [
    "BINARY_PROBE_BYTES",
    "DEFAULT_IGNORES",
    "DEFAULT_IGNORE_SUFFIXES",
    "IGNORE_FILES",
    "MAX_FILE_BYTES",
    "MINIFIED_MIN_BYTES",
    "SKIP_REASONS",
    "FileEntry",
    "FileText",
    "Skipped",
    "WalkResult",
    "check",
    "is_walked_name",
    "minified_line",
    "read_file",
    "relpath_in",
    "walk",
]

MAX_FILE_BYTES = 8 * 1024 * 1024
"""Files larger than this are skipped as ``"too large"``."""

BINARY_PROBE_BYTES = 8192
"""A NUL byte among a file's first this many bytes makes it ``"binary"``."""

MINIFIED_MIN_BYTES = 32 * 1024
"""A file this large or larger whose lines average more than ``ANEKIT_MINIFIED_LINE``
characters (default 400; hand-written code averages 30-60) is ``"minified"``: a minified
bundle or a generated one-line file (a 2.7 MB one-line JS file made 4,850 chunks)."""

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

SKIP_REASONS = (
    "binary",
    "too large",
    "minified",
    "undecodable",
    "unreadable",
    "symlink",
    "special file",
    "vanished",
)
"""Why a file or directory was set aside, in the order reports list them."""

_STORE_DIR = ".anekit"


@dataclass(frozen=True)
class FileEntry:
    """A file to index: ``path`` as walked (``root/relpath``), ``relpath`` the POSIX path
    relative to the root, ``size`` and ``mtime_ns`` from ``os.lstat``."""

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
    """What :func:`walk` found: ``files`` and ``skipped`` sorted by relpath, how many
    paths ignore rules, :data:`DEFAULT_IGNORES` and hidden names left out (an ignored
    directory counts once), and the folders it walked."""

    files: list[FileEntry]
    skipped: list[Skipped]
    ignored: int
    #: The folders walked ("" for the root), sorted: what a watcher of the root watches.
    directories: list[str] = field(default_factory=list)

    def skipped_by_reason(self) -> dict[str, int]:
        """Counts of skipped paths for every reason in :data:`SKIP_REASONS` (zeros included)."""
        counts = dict.fromkeys(SKIP_REASONS, 0)
        for item in self.skipped:
            counts[item.reason] += 1
        return counts


@dataclass(frozen=True)
class FileText:
    """A file's exact ``data`` (what the indexer hashes) and its UTF-8 ``text`` (without a
    leading byte order mark); ``note``: why the text is not exactly the file's (bytes that
    are not UTF-8, read as U+FFFD), else None."""

    data: bytes
    text: str
    note: str | None = None


# (base, rules): ``rules`` apply to relpaths under ``base`` ("" or "dir/sub/"), relative to it.
_Layer = tuple[str, tuple[Glob, ...]]


def walk(root: Path, paths: Sequence[Path] | None = None) -> WalkResult:
    """List the files under ``root`` that code search should read.

    ``paths`` restricts the walk to these files and directories (relative ones are taken
    from the current directory); the ignore rules of their ancestors still apply, so a named
    file that is ignored is left out, and a named symbolic link is set aside. Raises
    :class:`~anekit.errors.SearchError` when ``root`` is not a readable directory, or a path
    is outside it or does not exist.
    """
    root_abs = os.path.abspath(root)
    if not os.path.isdir(root_abs):
        raise SearchError(f"{root}: not a directory")
    walker = _Walker(root_abs)
    rels = [""] if paths is None else _outermost(relpath_in(root, Path(p)) for p in paths)
    for rel in rels:
        walker.walk_path(rel)  # "": the whole root
    return walker.result()


def check(root: Path, relpath: str) -> FileEntry | Skipped | None:
    """What :func:`walk` makes of the one file ``relpath`` (POSIX, relative to ``root``): its
    entry when it would be indexed, a :class:`Skipped` saying why not, or None when the
    ignore rules leave it out. Raises :class:`~anekit.errors.SearchError` for a path
    that leaves the root (``..``, absolute) or does not exist, or a folder."""
    root_abs = os.path.abspath(root)
    parts = relpath.split("/")
    if relpath.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise SearchError(f"{relpath}: not a path inside the root")
    walker = _Walker(root_abs)
    walker.walk_path(relpath, files_only=True)
    result = walker.result()
    if result.files:
        return result.files[0]
    return result.skipped[0] if result.skipped else None


def is_walked_name(name: str, is_dir: bool) -> bool:
    """Whether a walk could take a path component called ``name`` (not hidden, not a
    default-ignored folder); ignore files decide the rest."""
    if not name or name[0] == ".":
        return False
    return not is_dir or not (name in DEFAULT_IGNORES or name.endswith(DEFAULT_IGNORE_SUFFIXES))


def minified_line() -> int:
    """``ANEKIT_MINIFIED_LINE`` (0: no file is skipped as minified)."""
    try:
        return config.minified_line()
    except ValueError as error:
        raise SearchError(str(error)) from None


def read_file(entry: FileEntry, max_line: int | None = None) -> FileText | Skipped:
    """Read ``entry`` without following a symbolic link at any component of its path; a
    :class:`Skipped` when it is binary, not UTF-8, minified (``max_line``, default
    :func:`minified_line`), unreadable, gone, swapped for a link or a special file, or
    grown past :data:`MAX_FILE_BYTES`."""
    try:
        fd = _open_inside(str(entry.path), entry.relpath)
        with open(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return Skipped(entry.relpath, "special file", "not a regular file")
            data = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError as exc:
        return Skipped(entry.relpath, "vanished", _why(exc))
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK, errno.ENOTDIR) and _has_link(entry):
            return Skipped(entry.relpath, "symlink", "a component became a symbolic link")
        return Skipped(entry.relpath, "unreadable", _why(exc))
    if len(data) > MAX_FILE_BYTES:
        return Skipped(entry.relpath, "too large", f"more than {MAX_FILE_BYTES} bytes")
    if b"\0" in data[:BINARY_PROBE_BYTES]:
        return Skipped(entry.relpath, "binary", "NUL byte")
    limit = minified_line() if max_line is None else max_line
    if limit and len(data) >= MINIFIED_MIN_BYTES:
        lines = data.count(b"\n") + (not data.endswith(b"\n"))
        if len(data) > limit * lines:
            return Skipped(
                entry.relpath,
                "minified",
                f"{len(data)} bytes in {lines} line(s); ANEKIT_MINIFIED_LINE={limit}",
            )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", "replace")
        replaced = text.count("\ufffd") - data.decode("utf-8", "ignore").count("\ufffd")
        if replaced > MAX_UNDECODABLE_SHARE * len(data):  # another encoding, or not text
            return Skipped(entry.relpath, "undecodable", f"not UTF-8 at byte {exc.start}")
        note = f"not UTF-8 at byte {exc.start}: {replaced} byte sequence(s) read as U+FFFD"
        return FileText(data=data, text=text.removeprefix("\ufeff"), note=note)
    return FileText(data=data, text=text.removeprefix("\ufeff"))


#: A file whose undecodable byte sequences are more than this share of its bytes is set
#: aside as "undecodable" (another encoding, or not text); below it, they read as U+FFFD.
MAX_UNDECODABLE_SHARE = 0.01

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
# O_NONBLOCK: a file replaced by a FIFO since the walk must not hang the open.
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def _open_inside(path: str, relpath: str) -> int:
    """A read-only descriptor of ``path`` (``base/relpath``), each component of ``relpath``
    opened from its parent's descriptor with ``O_NOFOLLOW``: a symbolic link anywhere
    below ``base`` fails with ``ELOOP`` (``ENOTDIR`` for a folder on some systems)."""
    parts = relpath.split("/")
    base = path[: len(path) - len(os.path.join(*parts))].rstrip(os.sep) or os.sep
    if os.open not in os.supports_dir_fd or not _NOFOLLOW:
        if os.path.realpath(path) != os.path.abspath(path):  # the best this system allows
            raise OSError(errno.ELOOP, "a symbolic link in the path", path)
        return os.open(path, os.O_RDONLY | _NONBLOCK)
    fd = os.open(base, os.O_RDONLY | _DIRECTORY)
    try:
        for name in parts[:-1]:
            inner = os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = inner
        return os.open(parts[-1], os.O_RDONLY | _NOFOLLOW | _NONBLOCK, dir_fd=fd)
    finally:
        os.close(fd)


def _has_link(entry: FileEntry) -> bool:
    """Whether a component of ``entry``'s relpath is a symbolic link now."""
    path = Path(str(entry.path)[: len(str(entry.path)) - len(entry.relpath)])
    for part in entry.relpath.split("/"):
        path = path / part
        if path.is_symlink():
            return True
    return False


class _Walker:
    """The state of one walk: results so far and directories still to walk."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.files: dict[str, FileEntry] = {}
        self.skipped: dict[str, Skipped] = {}
        self.ignored = 0
        self.directories: list[str] = []
        self.stack: list[tuple[str, str, tuple[_Layer, ...]]] = []
        git = os.path.join(root, ".git")
        exclude = [os.path.join(git, "info", "exclude")] if os.path.isdir(git) else []
        self.base_layers = _layered((), "", exclude)

    def result(self) -> WalkResult:
        return WalkResult(
            files=sorted(self.files.values(), key=lambda f: f.relpath),
            skipped=sorted(self.skipped.values(), key=lambda s: s.relpath),
            ignored=self.ignored,
            directories=sorted(self.directories),
        )

    def skip(self, relpath: str, reason: str, detail: str = "") -> None:
        self.skipped[relpath] = Skipped(relpath, reason, detail)

    def walk_dir(self, path: str, prefix: str, layers: tuple[_Layer, ...], top: bool) -> None:
        """Walk the directory ``path`` (relpath ``prefix``, "" or ending in "/")."""
        self.stack.append((path, prefix, layers))
        while self.stack:
            self._scan(*self.stack.pop(), top=top)
            top = False

    def walk_path(self, rel: str, files_only: bool = False) -> None:
        """Walk one named path, checking each of its components against the ignore rules
        and refusing a symbolic link at any of them."""
        if not rel:
            self.walk_dir(self.root, "", self.base_layers, top=True)
            return
        layers, parent, prefix = self.base_layers, self.root, ""
        parts = rel.split("/")
        for depth, name in enumerate(parts):
            layers = _layered(layers, prefix, [os.path.join(parent, n) for n in IGNORE_FILES])
            path, rel = os.path.join(parent, name), prefix + name
            try:
                st = os.lstat(path)
            except FileNotFoundError as exc:
                raise SearchError(f"{path}: no such file or directory") from exc
            except OSError as exc:
                self.skip(rel, "unreadable", _why(exc))
                return
            is_dir = stat.S_ISDIR(st.st_mode)
            if self._excluded(name, rel, is_dir, layers):
                self.ignored += 1
                return
            if stat.S_ISLNK(st.st_mode):
                self.skip(rel, "symlink", f"-> {_readlink(path)}")
                return
            if depth < len(parts) - 1:
                if not is_dir:
                    raise SearchError(f"{path}: not a directory")
                parent, prefix = path, rel + "/"
            elif not is_dir:
                self._add_file(path, rel, st)
            elif files_only:
                raise SearchError(f"{rel}: a folder, not a file")
            else:
                self.walk_dir(path, rel + "/", layers, top=False)

    def _scan(self, path: str, prefix: str, layers: tuple[_Layer, ...], top: bool) -> None:
        try:
            with os.scandir(path) as it:
                entries = list(it)
        except OSError as exc:
            if top:
                raise SearchError(f"{self.root}: cannot read the directory: {_why(exc)}") from exc
            self._file_error(prefix.rstrip("/"), exc)
            return
        self.directories.append(prefix.rstrip("/"))
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
        try:
            is_link = entry.is_symlink()
            is_dir = not is_link and entry.is_dir(follow_symlinks=False)
        except OSError as exc:
            if self._excluded(name, rel, False, layers):
                self.ignored += 1
            else:
                self._file_error(rel, exc)
            return
        if self._excluded(name, rel, is_dir, layers):
            self.ignored += 1
        elif not _is_utf8(name):
            self.skip(_printable(rel), "undecodable", "file name is not UTF-8")
        elif is_link:
            self.skip(rel, "symlink", f"-> {_readlink(entry.path)}")
        elif is_dir:
            self.stack.append((entry.path, rel + "/", layers))
        else:
            self._add_file(entry.path, rel, None)

    def _excluded(self, name: str, rel: str, is_dir: bool, layers: tuple[_Layer, ...]) -> bool:
        if not is_walked_name(name, is_dir) or rel == _STORE_DIR:
            return True
        for base, rules in reversed(layers):
            local = rel[len(base) :]
            for rule in reversed(rules):
                if rule.dir_only and not is_dir:
                    continue
                if rule.matches_self(local):
                    return rule.include
        return False

    def _add_file(self, path: str, rel: str, st: os.stat_result | None) -> None:
        try:
            if st is None:
                st = os.lstat(path)
        except OSError as exc:
            self._file_error(rel, exc)
            return
        if not stat.S_ISREG(st.st_mode):
            self.skip(rel, "special file", "not a regular file")
        elif st.st_size > MAX_FILE_BYTES:
            self.skip(rel, "too large", f"{st.st_size} bytes")
        else:
            self.files[rel] = FileEntry(Path(path), rel, st.st_size, st.st_mtime_ns)

    def _file_error(self, rel: str, exc: OSError) -> None:
        reason = "vanished" if isinstance(exc, FileNotFoundError) else "unreadable"
        self.skip(rel, reason, _why(exc))


def _layered(layers: tuple[_Layer, ...], prefix: str, files: list[str]) -> tuple[_Layer, ...]:
    """``layers`` plus one layer of the rules in ``files`` (for relpaths under ``prefix``)."""
    rules = tuple(
        rule
        for file in files
        for line in _read_lines(file)
        if (rule := compile_line(line)) is not None
    )
    return (*layers, (prefix, rules)) if rules else layers


def _read_lines(file: str) -> list[str]:
    """An ignore file's lines; nothing for one that is a symbolic link or unreadable."""
    try:
        fd = os.open(file, os.O_RDONLY | _NOFOLLOW | _NONBLOCK)
        with open(fd, encoding="utf-8", errors="replace") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return []
            return handle.read(MAX_FILE_BYTES).splitlines()
    except OSError:
        return []


def relpath_in(root: Path, path: Path) -> str:
    """``path`` relative to ``root`` as a POSIX relpath ("" for the root itself). Its last
    component is taken as named, not resolved: a symbolic link in the root is a path
    inside it, whatever it points at (the walk then sets it aside). Raises
    :class:`~anekit.errors.SearchError` for a path outside the root."""
    root_abs = os.path.abspath(root)
    full = os.path.abspath(path)
    parent, name = os.path.split(full)
    candidates = [(root_abs, full)]
    if name:
        real = os.path.join(os.path.realpath(parent), name)
        candidates.append((os.path.realpath(root_abs), os.path.normpath(real)))
    for base, candidate in candidates:
        if candidate == base:
            return ""
        if candidate.startswith(base.rstrip(os.sep) + os.sep):
            return Path(os.path.relpath(candidate, base)).as_posix()
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
