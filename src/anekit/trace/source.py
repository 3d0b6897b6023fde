"""Where in the user's code an op was traced.

The first stack frame outside anekit, NumPy and coremltools is the user's line;
every traced op records it (as JAX's ``source_info_util`` does) so that errors,
MIL dumps and later the placement and numerics reports can point at it.
"""

from __future__ import annotations

import linecache
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import coremltools
import numpy

#: anekit's own directory (this file is anekit/trace/source.py).
_ANEKIT_PATH = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

# Frames from these directories are never the user's line: anekit itself and the
# libraries it calls through. Model code that lives inside anekit (the demo,
# anekit.models) registers itself as user code with `register_user_code`.
_LIBRARY_PATHS: list[str] = [
    *(
        os.path.dirname(os.path.abspath(module.__file__ or "")) + os.sep
        for module in (numpy, coremltools)
    ),
    _ANEKIT_PATH,
]
_USER_PATHS: list[str] = []


def register_user_code(path: str) -> None:
    """Treat frames from ``path`` (a module file or a directory) as user code."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        path += os.sep
    if path not in _USER_PATHS:
        _USER_PATHS.append(path)


def _matches(path: str, prefixes: list[str]) -> bool:
    return any(path.startswith(p) if p.endswith(os.sep) else path == p for p in prefixes)


@dataclass(frozen=True)
class SourceLocation:
    """A line of user code: file, line number, function and the source text."""

    filename: str
    lineno: int
    function: str
    code: str = ""

    def short_filename(self) -> str:
        """The file name relative to the working directory when it lies below it."""
        try:
            return str(Path(self.filename).resolve().relative_to(Path.cwd()))
        except (ValueError, OSError):
            return self.filename

    def __str__(self) -> str:
        return f"{self.short_filename()}:{self.lineno}"

    def describe(self) -> str:
        """``file:line (in function)``, the form used in error messages."""
        return f"{self}, in {self.function}"


def _is_library_file(filename: str) -> bool:
    path = os.path.abspath(filename)
    return _matches(path, _LIBRARY_PATHS) and not _matches(path, _USER_PATHS)


def user_frame() -> FrameType | None:
    """The innermost frame that belongs to user code, or ``None``."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith("<frozen ") and not _is_library_file(filename):
            return frame
        frame = frame.f_back
    return None


def user_location() -> SourceLocation | None:
    """The user's current line, or ``None`` when called from library code only."""
    frame = user_frame()
    if frame is None:
        return None
    filename = frame.f_code.co_filename
    lineno = frame.f_lineno
    code = linecache.getline(filename, lineno).strip()
    return SourceLocation(filename, lineno, frame.f_code.co_name, code)
