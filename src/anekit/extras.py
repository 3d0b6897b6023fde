"""anekit's optional parts: which distributions an extra needs, and a clear error without them.

The list is the installed package's own metadata (``[project.optional-dependencies]`` in
pyproject.toml, as ``Requires-Dist: NAME...; extra == "search"``), not a copy of it.
"""

from __future__ import annotations

import importlib.metadata
import re

from anekit.errors import MissingExtraError

__all__ = ["missing", "require"]

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _extra_marker(extra: str) -> re.Pattern[str]:
    return re.compile(rf"""extra\s*==\s*["']{re.escape(extra)}["']""")


def missing(extra: str) -> list[str]:
    """The distributions that anekit's ``extra`` requires and this environment lacks.

    Empty when anekit itself has no installed metadata (run from a source tree)."""
    try:
        requirements = importlib.metadata.requires("anekit") or []
    except importlib.metadata.PackageNotFoundError:
        return []
    marker = _extra_marker(extra)
    absent = []
    for requirement in requirements:
        requirement_text, _, markers = requirement.partition(";")
        name = _NAME.match(requirement_text)
        if name is None or not marker.search(markers):
            continue
        try:
            importlib.metadata.version(name.group(1))
        except importlib.metadata.PackageNotFoundError:
            absent.append(name.group(1))
    return absent


def require(extra: str, part: str) -> None:
    """Raise :class:`MissingExtraError` when ``extra`` is not fully installed; ``part``
    names what needs it (``"code search"``)."""
    absent = missing(extra)
    if absent:
        raise MissingExtraError(
            f"{part} needs anekit's {extra!r} extra, and {', '.join(absent)} "
            f"{'is' if len(absent) == 1 else 'are'} not installed: "
            f"pip install 'anekit[{extra}]' (or pipx/uv: install 'anekit[{extra}]')"
        )
