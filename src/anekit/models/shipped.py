"""The JSON files shipped in ``anekit.models``'s ``data`` folder: read, and written by
the modules that generate them (``python -m anekit.models.known_answers --write``)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any


def read_json(resource: str) -> Any:
    """The parsed content of ``resource`` (``data/NAME.json``)."""
    return json.loads(resources.files("anekit.models").joinpath(resource).read_text("utf-8"))


def write_text(resource: str, content: str) -> Path:
    """Write ``content`` to ``resource`` in the source tree anekit runs from."""
    target = Path(str(resources.files("anekit.models").joinpath(resource)))
    target.write_text(content, "utf-8")
    return target


__all__ = ["read_json", "write_text"]
