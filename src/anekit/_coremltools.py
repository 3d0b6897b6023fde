"""The one place anekit imports coremltools from.

On Linux, coremltools logs a warning per missing native proxy at import
("Failed to load _MLModelProxy ..."): the prediction and compute-plan libraries
only exist on macOS (coremltools issue #2465). Those lines, and its note that the
installed torch is newer than the one it was tested with, are filtered out here
so they do not drown anekit's own output. Its pass pipeline
also draws a tqdm progress bar per conversion; :func:`quiet_passes` turns that off.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import platform
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


class _ImportNoiseFilter(logging.Filter):
    """Drops the messages coremltools logs at import that say nothing actionable here:
    missing macOS-only proxies on Linux, the torch version it was last tested with
    (anekit pins torch==2.13.0 and tests the conversions it relies on), and its
    scikit-learn converter being off (anekit does not use it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith("Failed to load _ML") and "libcoremlpython" in message:
            return False
        if message.startswith("scikit-learn version") and "conversion API" in message:
            return False  # sentence-transformers (a test dependency) brings scikit-learn
        return not (
            message.startswith("Torch version")
            and "has not been tested with coremltools" in message
        )


# coremltools logs these through its package logger (``coremltools._logger``).
logging.getLogger("coremltools").addFilter(_ImportNoiseFilter())

import coremltools as ct  # noqa: E402
from coremltools.converters.mil import Builder as mb  # noqa: E402
from coremltools.converters.mil.mil import Function, Program, types  # noqa: E402
from coremltools.converters.mil.mil.passes import pass_pipeline as _pass_pipeline  # noqa: E402


def core_ml_runtime_available() -> bool:
    """True when coremltools can make predictions here (macOS with Core ML)."""
    if platform.system() != "Darwin":
        return False
    from coremltools.models import model as _model

    return getattr(_model, "_MLModelProxy", None) is not None


@contextlib.contextmanager
def quiet_passes() -> Iterator[None]:
    """Run coremltools pass pipelines without their tqdm progress bars."""
    original = _pass_pipeline.tqdm
    _pass_pipeline.tqdm = functools.partial(original, disable=True)
    try:
        yield
    finally:
        _pass_pipeline.tqdm = original
