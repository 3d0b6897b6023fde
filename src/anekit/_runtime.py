"""What anekit sets up before coremltools is imported, and whether Core ML runs here.

Importing coremltools costs seconds and hundreds of megabytes (it imports torch when
installed); ``import anekit`` and the lane workers must not pay that to learn that
there is no Core ML, so this module never imports it off macOS.

On Linux, coremltools logs a warning per missing native proxy at import
("Failed to load _MLModelProxy ..."): the prediction and compute-plan libraries
only exist on macOS (coremltools issue #2465). Those lines, and its note that the
installed torch is newer than the one it was tested with, are filtered out here
so they do not drown anekit's own output.
"""

from __future__ import annotations

import logging
import platform


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


def core_ml_runtime_available() -> bool:
    """True when coremltools can make predictions here (macOS with Core ML)."""
    if platform.system() != "Darwin":
        return False
    from coremltools.models import model as _model  # after the filter above

    return getattr(_model, "_MLModelProxy", None) is not None
