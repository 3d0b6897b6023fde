"""The checks of a package path that need no import (``anekit.load``'s and the CLI's):
light, so that a command can refuse a bad path before it imports coremltools."""

from __future__ import annotations

import os
from pathlib import Path

from anekit.errors import ProgramError

__all__ = ["LOADABLE", "checked_package_path"]


#: What ``anekit.load`` reads: Core ML's package and model file, and a Core AI asset
#: anekit wrote (its source package inside, :mod:`anekit.package.coreai`).
LOADABLE = (".mlpackage", ".mlmodel", ".aimodel")


def checked_package_path(path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path; a ProgramError unless it exists and is an ``.mlpackage``
    directory, an ``.mlmodel`` file or an ``.aimodel`` folder."""
    location = Path(path)
    if not location.exists():
        raise ProgramError(f"{location}: no such file or directory")
    if location.suffix not in LOADABLE:
        raise ProgramError(
            f"{location}: expected an .mlpackage directory, an .mlmodel file or an .aimodel folder"
        )
    return location
