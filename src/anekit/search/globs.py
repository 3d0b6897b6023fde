"""Gitignore-style globs, matched in time linear in the path whatever the pattern.

pathspec translates a gitignore line to a regular expression (git's wildmatch rules:
``*`` within a component, ``**`` across them, a pattern without an inner ``/`` matching at
any depth, a trailing ``/`` for directories only). Python's :mod:`re` backtracks on such
expressions: ``**/************x`` took 19 s on a three-file store and ``**/`` with 50
stars froze a daemon for minutes, holding the GIL. The same expressions are compiled here
with RE2 (``google-re2``), whose automaton runs in time linear in the input, so a glob from
a ``.gitignore`` in a repository or from a search filter costs microseconds a path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from anekit.errors import SearchError
from anekit.extras import require

# Every way into code search (Index, the walk, the store's filters, the servers) imports
# this module before any other package of the search extra: without the extra, the clear
# error is raised here, not a ModuleNotFoundError deeper in.
require("search", "code search (anekit index, search, watch, mcp, serve; anekit.search)")

import re2  # noqa: E402  (after the check above)

if TYPE_CHECKING:  # pathspec takes 20 ms to import: only when a glob is compiled
    from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

__all__ = ["DIR_MARK", "MAX_GLOB_CHARS", "Glob", "compile_filter", "compile_line"]

MAX_GLOB_CHARS = 1024
"""The longest search filter glob taken (a longer one is a usage error)."""

DIR_MARK = "ps_d"
"""pathspec's group marking where a match reached a directory that is the path's ancestor
(or, for a trailing ``/`` pattern, the path itself)."""

# The trailing spaces git ignores in a pattern (not a backslash-escaped one).
_TRAILING_SPACES = re.compile(r"(?<!\\) +\Z")
_OPTIONS: Any = re2.Options()
_OPTIONS.max_mem = 8 << 20  # plenty for a path glob; a larger automaton is refused
_OPTIONS.dot_nl = True  # a file name may hold a newline: "**" and ".*" cross it
_OPTIONS.log_errors = False  # a refused pattern is reported by its caller


@dataclass(frozen=True)
class Glob:
    """One compiled gitignore line: ``include`` False for a ``!`` line; ``dir_only`` for a
    trailing ``/`` (then ``regex`` is the pattern without it, for the directory itself)."""

    line: str
    include: bool
    dir_only: bool
    regex: Any  # an RE2 pattern

    def matches_self(self, relpath: str) -> bool:
        """Whether the pattern names ``relpath`` itself (not only one of its ancestors)."""
        match = self.regex.search(relpath)
        return match is not None and match.groupdict().get(DIR_MARK) is None

    def matches(self, relpath: str) -> bool:
        """Whether the pattern matches the file ``relpath`` or a folder holding it."""
        return self.regex.search(relpath) is not None


def compile_line(line: str) -> Glob | None:
    """A gitignore file's line as a :class:`Glob`; None for a blank line, a comment or a
    line git would not read as a pattern."""
    pattern = _pattern(line)
    if pattern is None or pattern.include is None or pattern.regex is None:
        return None
    source = pattern.regex.pattern
    dir_only = source.endswith(f"(?P<{DIR_MARK}>/)")
    if dir_only:
        # "build/" is the pattern "build" that only directories can match.
        bare = _pattern(_TRAILING_SPACES.sub("", line)[:-1])
        if bare is None or bare.regex is None:
            return None
        source = bare.regex.pattern
    regex = _re2(source)
    return None if regex is None else Glob(line, bool(pattern.include), dir_only, regex)


def compile_filter(glob: str) -> Glob:
    """A search filter's glob (``src/**/test_*.py``, ``docs/``), matched against a file's
    path and its folders; :class:`SearchError` names a glob that is too long or not one."""
    if len(glob) > MAX_GLOB_CHARS:
        raise SearchError(f"path glob of {len(glob)} characters: the limit is {MAX_GLOB_CHARS}")
    pattern = _pattern(glob)
    if pattern is None or pattern.include is None or pattern.regex is None:
        raise SearchError(
            f"{glob!r} is not a path glob (gitignore syntax: *, **, ?, [abc], a trailing / "
            "for a folder; a bracket must close)"
        )
    regex = _re2(pattern.regex.pattern)
    if regex is None:
        raise SearchError(f"{glob!r}: too complex a path glob")
    return Glob(glob, True, False, regex)


def _pattern(line: str) -> GitIgnoreSpecPattern | None:
    from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

    try:
        return GitIgnoreSpecPattern(line)
    except (ValueError, re.error):
        return None


def _re2(source: str) -> Any:
    try:
        return re2.compile(source, options=_OPTIONS)
    except re2.error:
        return None
