"""Backends run compiled programs: one protocol, imported lazily by name.

Only the Core ML backend exists so far (macOS). The simulator backend arrives with
``anekit.sim``; ONNX Runtime with the lanes work.
"""

from __future__ import annotations

import importlib
import platform
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

import numpy as np

from anekit.errors import BackendUnavailableError

if TYPE_CHECKING:
    from anekit.program import CompiledProgram

__all__ = ["Backend", "Session", "available_backends", "select_backend"]


class Session(Protocol):
    """A program loaded on a backend."""

    def predict(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run once: input name -> array in, output name -> array out."""
        ...


class Backend(Protocol):
    """Something that can run MIL programs."""

    name: str

    def available(self) -> bool:
        """True when this backend can run on this machine."""
        ...

    def unavailable_reason(self) -> str:
        """Why :meth:`available` is false, in one sentence."""
        ...

    def load(self, program: CompiledProgram) -> Session:
        """Prepare ``program`` to run."""
        ...


#: Backend name -> "module:class", in order of preference.
_REGISTRY: dict[str, str] = {
    "coreml": "anekit.backends.coreml:CoreMLBackend",
}


def _instantiate(name: str) -> Backend:
    module_name, class_name = _REGISTRY[name].split(":")
    backend: Backend = getattr(importlib.import_module(module_name), class_name)()
    return backend


def available_backends() -> list[str]:
    """Names of the backends that can run here, most preferred first."""
    return [name for name in _REGISTRY if _instantiate(name).available()]


def select_backend(name: str | None = None) -> Backend:
    """The backend called ``name``, or the best available one."""
    if name is not None:
        if name not in _REGISTRY:
            raise BackendUnavailableError(
                f"unknown backend {name!r}; known: {', '.join(_REGISTRY)}"
            )
        backend = _instantiate(name)
        if not backend.available():
            raise BackendUnavailableError(
                f"backend {name!r} cannot run here: {backend.unavailable_reason()}"
            )
        return backend
    reasons = []
    for candidate in _REGISTRY:
        backend = _instantiate(candidate)
        if backend.available():
            return backend
        reasons.append(f"{candidate}: {backend.unavailable_reason()}")
    raise BackendUnavailableError(
        f"no backend can run programs on this machine ({platform.system()} {platform.machine()}): "
        + "; ".join(reasons)
        + ". The ANE simulator backend (anekit.sim) is not available yet; you can still "
        "save the program with .save() and inspect it with .mil_text()."
    )
