"""Core AI on the Neural Engine (``coreai``; macOS 27): the program written as a Core AI
asset (:mod:`anekit.package.coreai`) into a temporary folder and loaded by macOS's Core
AI with the Neural Engine preferred.

Written against coreai-core 1.0.0b3's public API and unverified on hardware in this
project's CI (no Mac with macOS 27; tested against tests/standins_coreai.py, whose
stand-ins refuse what the real API refuses):

- Device placement is chosen at load ("specialization"):
  ``SpecializationOptions.from_preferred_compute_unit_kind(ComputeUnitKind.X())``
  (``coreai/runtime/_specialization_options.py``; its ``__init__`` raises TypeError,
  and off macOS each constructor raises RuntimeError "... is only available on
  macOS"); ``ComputeUnitKind`` (``cpu()``, ``gpu()``, ``neural_engine()``) exists
  only on macOS (``coreai/runtime/__init__.py`` imports it there alone).
- ``AIModelAsset.load(path).executable(specialization_options=...)``
  (``coreai/authoring/asset.py``) loads the asset through the OS framework on macOS 27
  (``_use_os_coreai``); before macOS 27 it would load the bundled CPU runtime and drop
  the options, so :func:`anekit.runtimes.coreai_ane_reason` refuses there, using
  ``SpecializationOptions.is_supported()``.

The preferred kind is a preference: Core AI may still place ops elsewhere (its compute
plan says where, :mod:`anekit.backends.coreai_plan`). A program Core AI cannot take
(an op without a lowering, a dynamic shape) is refused with
:class:`~anekit.backends.ProgramRefused` before anything loads; picked by default, the
runtime record hands it to Core ML (:attr:`anekit.runtimes.Runtime.fallback`).
"""

from __future__ import annotations

from typing import Any

from anekit.backends import ProgramRefused
from anekit.backends.coreai import CoreAISession
from anekit.backends.request import LoadRequest
from anekit.errors import ProgramError
from anekit.runtimes import RUNTIMES

NAME = "coreai"
#: The compute unit kinds Core AI can prefer (``ComputeUnitKind``'s constructors), the
#: Neural Engine first: the backend's modes.
KINDS = ("neural_engine", "gpu", "cpu")


def specialization(kind: str = "neural_engine") -> Any:
    """``SpecializationOptions`` preferring the compute unit ``kind`` (one of
    :data:`KINDS`); :class:`~anekit.errors.BackendUnavailableError` naming why where
    Core AI cannot specialize (anywhere but macOS 27 with the OS framework)."""
    if kind not in KINDS:
        raise ValueError(f"the compute unit kind must be one of {', '.join(KINDS)}, got {kind!r}")
    RUNTIMES[NAME].require()
    from coreai.runtime import ComputeUnitKind, SpecializationOptions

    return SpecializationOptions.from_preferred_compute_unit_kind(getattr(ComputeUnitKind, kind)())


def device_label(kind: str) -> str:
    """What runs a session preferring ``kind``, as run reports say it."""
    if kind == "neural_engine":
        return RUNTIMES[NAME].device
    return f"Core AI ({kind} preferred)"


def open_session(request: LoadRequest, kind: str = "neural_engine") -> CoreAISession:
    """The program written as an asset and loaded by macOS's Core AI preferring ``kind``
    (:class:`~anekit.backends.coreai.CoreAISession`); what Core AI cannot take (no
    lowering, a dynamic shape, an asset its loader refuses) is a :class:`ProgramRefused`."""
    options = specialization(kind)  # first: a machine without Core AI writes nothing
    try:
        return CoreAISession(
            request,
            specialization=options,
            backend=NAME,
            device=device_label(kind),
            requested=kind,
        )
    except ProgramError as why:
        raise ProgramRefused(f"{request.source}: {why}") from why


class CoreAIBackend:
    """macOS's Core AI, preferring the Neural Engine (``mode``: a :data:`KINDS` name)."""

    name = NAME

    def __init__(self, kind: str = "neural_engine") -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        self.kind = kind

    def load(self, request: LoadRequest, mode: str | None = None) -> CoreAISession:
        kind = mode or self.kind
        if kind not in KINDS:
            raise ProgramError(
                f"the {NAME} backend's mode is the compute unit Core AI prefers, one of "
                f"{', '.join(KINDS)}; got {kind!r}"
            )
        return open_session(request, kind)


__all__ = ["KINDS", "NAME", "CoreAIBackend", "device_label", "open_session", "specialization"]
