"""The one place anekit imports coremltools from.

The warnings coremltools logs at import on Linux are filtered by
:mod:`anekit._runtime`, imported first. Its pass pipeline also draws a tqdm progress
bar per conversion; :func:`quiet_passes` turns that off.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

__all__ = [
    "Function",
    "Program",
    "core_ml_runtime_available",
    "ct",
    "mb",
    "quiet_passes",
    "types",
]


# Quiets coremltools' import-time warnings before coremltools is imported.
import coremltools as ct
from coremltools.converters.mil import Builder as mb
from coremltools.converters.mil.mil import Function, Program, types
from coremltools.converters.mil.mil.passes import pass_pipeline as _pass_pipeline

from anekit import _runtime  # noqa: F401
from anekit._runtime import core_ml_runtime_available


@contextlib.contextmanager
def quiet_passes() -> Iterator[None]:
    """Run coremltools pass pipelines without their tqdm progress bars."""
    original = _pass_pipeline.tqdm
    _pass_pipeline.tqdm = functools.partial(original, disable=True)
    try:
        yield
    finally:
        _pass_pipeline.tqdm = original
