"""ANE rewrite passes: make MIL programs ANE-friendly automatically.

Each pass is a coremltools graph pass registered as ``ane::<name>`` that records
what it changed. :func:`run_pipeline` runs :data:`ANE_PIPELINE` (what
``anekit.compile`` and ``anekit.convert`` apply by default) and returns a
:class:`PassReport`. See docs/passes.md.
"""

from __future__ import annotations

# Importing the pass modules registers their passes with coremltools.
from anekit.passes import (  # noqa: F401
    activations,
    attention,
    bc1s,
    broadcast,
    dedupe,
    io,
    masks,
    norms,
    rank,
)
from anekit.passes.base import AnePass, PassReport, PassResult
from anekit.passes.pipeline import ANE_PIPELINE, OPTIONAL_PASSES, pass_id, pipeline, run_pipeline

__all__ = [
    "ANE_PIPELINE",
    "OPTIONAL_PASSES",
    "AnePass",
    "PassReport",
    "PassResult",
    "pass_id",
    "pipeline",
    "run_pipeline",
]
