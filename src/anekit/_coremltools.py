"""The one place anekit imports coremltools from.

The warnings coremltools logs at import on Linux are filtered by
:mod:`anekit._runtime`, imported first. Its pass pipeline also draws a tqdm progress
bar per conversion, and validates the whole program after each of its ~80 passes (half
of a conversion's time); :func:`quiet_passes` turns the bar off and validates once,
after the pipeline. Each ``ct.convert`` also ends with a full ``gc.collect()`` (0.4 s
in a process that holds torch's objects); :func:`without_final_collect` skips it
where many small programs are converted in a row.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = [
    "Function",
    "Program",
    "core_ml_runtime_available",
    "ct",
    "mb",
    "quiet_passes",
    "shared_consts",
    "types",
    "without_final_collect",
]


# Quiets coremltools' import-time warnings before coremltools is imported.
import coremltools as ct
from coremltools.converters import _converters_entry
from coremltools.converters.mil import Builder as mb
from coremltools.converters.mil.mil import Function, Program, types
from coremltools.converters.mil.mil.passes import pass_pipeline as _pass_pipeline
from coremltools.converters.mil.mil.passes.pass_registry import PASS_REGISTRY

from anekit import _runtime  # noqa: F401
from anekit._runtime import core_ml_runtime_available


def _validated_once(passes: Iterable[str], **_: Any) -> Iterator[str]:
    """The pipeline's passes (in place of its tqdm bar), with ``Program.validate`` held
    back while they run and called once on each program when they are done."""
    names = list(passes)
    validate = Program.validate
    pending: dict[int, Any] = {}
    Program.validate = lambda self, *args, **kwargs: pending.setdefault(id(self), self)
    try:
        yield from names
    finally:
        Program.validate = validate
    # As the pipeline would: scopes are checked once dead code elimination has run.
    scopes = "common::dead_code_elimination" in names
    for program in pending.values():
        program.validate(check_essential_scope=scopes)


def _printed_for_debug(text: Any) -> Any:
    """``__str__`` that prints the whole program only when coremltools logs at DEBUG."""

    def __str__(self: Any) -> str:
        if ct._logger.isEnabledFor(logging.DEBUG):
            return str(text(self))
        return f"<{type(self).__name__}: printed when coremltools logs at DEBUG>"

    return __str__


@contextlib.contextmanager
def quiet_passes() -> Iterator[None]:
    """Run coremltools pass pipelines without their progress bars, validating each
    program once after its pipeline instead of after every pass. Each pipeline also
    prints its whole program into two debug f-strings, and the transpose pass each block
    into two more (coremltools 9.0, pass_pipeline.py, optimize_repeat_ops.py), formatted
    whether or not DEBUG is logged: 11 % of an int8 MiniLM package's build. Here
    programs and functions print in full only when coremltools' logger is at DEBUG."""
    original = _pass_pipeline.tqdm
    printed = Program.__str__, Function.__str__
    _pass_pipeline.tqdm = _validated_once
    Program.__str__ = _printed_for_debug(printed[0])
    Function.__str__ = _printed_for_debug(printed[1])
    try:
        yield
    finally:
        _pass_pipeline.tqdm = original
        Program.__str__, Function.__str__ = printed


#: coremltools' ``common::const_deduplication`` shares only consts of 100 elements or more
#: by default. A traced transformer holds about 1,800 small consts per function (shapes,
#: slice bounds, scalars; about 140 distinct values in MiniLM's), each stored with its
#: own name in ``model.mlmodel``: with every duplicate shared (threshold 0), MiniLM's
#: six-bucket ``model.mlmodel`` went from 2.43 MB to 1.10 MB (docs/models.md).
CONST_SHARING_THRESHOLD = 0


@contextlib.contextmanager
def shared_consts() -> Iterator[None]:
    """Conversions and multifunction saves that share every duplicate const
    (:data:`CONST_SHARING_THRESHOLD`). The pass keeps its threshold on its class, for the
    whole process: it is put back after."""
    dedup = PASS_REGISTRY["common::const_deduplication"]
    saved = dedup.const_threshold
    dedup.const_threshold = CONST_SHARING_THRESHOLD
    try:
        yield
    finally:
        dedup.const_threshold = saved


@contextlib.contextmanager
def without_final_collect() -> Iterator[None]:
    """``ct.convert`` without its closing ``gc.collect()`` (coremltools 9.0,
    converters/_converters_entry.py); Python's own collector still runs as usual. For
    small programs only: after a large conversion that collection frees its graph."""
    original = _converters_entry.gc
    _converters_entry.gc = _NoCollect()
    try:
        yield
    finally:
        _converters_entry.gc = original


class _NoCollect:
    @staticmethod
    def collect(generation: int = 2) -> int:
        return 0
