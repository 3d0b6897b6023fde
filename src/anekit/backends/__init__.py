"""Backends run compiled programs: one protocol, imported lazily by name from the
runtime record (:mod:`anekit.runtimes`), which also says whether each can run here.

``coreai`` (macOS 27: Core AI, on the Neural Engine where it places ops; unverified
on hardware) is preferred where the OS has Core AI, handing a program it cannot take
(an op without a Core AI lowering) to ``coreml``; ``coreml`` (macOS: Core ML, on the
ANE where it places ops) is preferred where it exists; ``sim`` (the ANE simulator)
runs everywhere; ``onnx`` (ONNX Runtime, CPU or CUDA) runs everywhere too, when asked
for by name. ``direct`` (the private ANE framework without Core ML; experimental,
macOS) runs only when asked for by name.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from anekit.backends.request import LoadRequest
from anekit.errors import BackendUnavailableError, ProgramError
from anekit.runtimes import Runtime, attribute, program_runtimes

__all__ = [
    "Backend",
    "FallingBack",
    "LoadRequest",
    "ProgramRefused",
    "RunReport",
    "Session",
    "available_backends",
    "select_backend",
]


@dataclass(frozen=True)
class RunReport:
    """How one run happened: which backend and device, simulated or not, how long.

    ``numerics`` is the simulator's :class:`~anekit.sim.NumericsReport` (None for
    hardware backends). ``residency``: ops per device in Core ML's compute plan
    (``{"ane": 170, "cpu": 3}``; Core ML only). ``problems``: what was wrong with the
    call's inputs or outputs (inf/NaN, an input beyond fp16's range, an output an
    overflow zeroed). A simulated run is never an ANE measurement.
    """

    backend: str
    device: str
    simulated: bool
    seconds: float
    numerics: Any = None
    residency: dict[str, int] | None = None
    problems: tuple[str, ...] = ()
    #: The backend option the session runs with (compute units, numerics mode).
    requested: str | None = None
    #: Filled in by :class:`~anekit.program.CompiledProgram`: the function run, the
    #: seconds loading the program on the backend took when this call loaded it (None:
    #: already loaded),
    #: and the inputs (as sent to the backend: cast, padded) and outputs (as returned)
    #: as ``(name, shape, dtype, bytes)``.
    function: str | None = None
    load_seconds: float | None = None
    inputs: tuple[tuple[str, tuple[int, ...], str, int], ...] = ()
    outputs: tuple[tuple[str, tuple[int, ...], str, int], ...] = ()
    #: The accelerator's own execution time of the call, where the backend reports it
    #: (the direct path's performance statistics); None elsewhere.
    hardware_seconds: float | None = None

    @property
    def fell_back(self) -> bool | None:
        """Whether the compute plan put any op off the Neural Engine (None: no plan)."""
        if not self.residency:
            return None
        return any(device != "ane" for device in self.residency)

    def describe(self) -> str:
        kind = "simulated" if self.simulated else "measured"
        text = f"{self.device} via {self.backend} ({kind}, {self.seconds * 1000:.1f} ms)"
        if self.hardware_seconds is not None:
            text += f"; hardware execution {self.hardware_seconds * 1000:.3f} ms"
        if self.residency:
            placed = ", ".join(f"{count} on {device}" for device, count in self.residency.items())
            text += f"; compute plan: {placed}"
        if self.problems:
            text += "; " + "; ".join(self.problems)
        return text


class Session(Protocol):
    """A program loaded on a backend."""

    #: The report of the last :meth:`predict`.
    last_run: RunReport | None

    def predict(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run once: input name -> array in, output name -> array out."""
        ...


class Backend(Protocol):
    """Something that can run MIL programs: it loads a :class:`LoadRequest` (the
    program, its function and I/O contract; never a ``CompiledProgram``). Whether it
    can run here is its runtime's record's to say (:mod:`anekit.runtimes`)."""

    name: str

    def load(self, request: LoadRequest, mode: str | None = None) -> Session:
        """Prepare ``request``'s program to run (``mode``: backend-specific option)."""
        ...


class ProgramRefused(ProgramError):
    """A backend cannot take this program at all (an op it has no lowering for, weights
    it cannot store), raised by its ``load`` before anything runs: a default pick hands
    the program to its runtime's :attr:`~anekit.runtimes.Runtime.fallback`; a backend
    named by the caller reports it as the :class:`~anekit.errors.ProgramError` it is."""


class FallingBack:
    """The default pick of a runtime with a fallback: its backend loads each program,
    unless it refuses it (:class:`ProgramRefused`); then the fallback's does (its
    run reports name what ran)."""

    def __init__(self, first: Backend, fallback: Backend) -> None:
        self.name = first.name
        self.first, self.fallback = first, fallback

    def load(self, request: LoadRequest, mode: str | None = None) -> Session:
        try:
            return self.first.load(request, mode)
        except ProgramRefused:
            return self.fallback.load(request, mode)


def _instantiate(runtime: Runtime) -> Backend:
    assert runtime.backend is not None  # only program runtimes are asked
    backend: Backend = attribute(runtime.backend)()
    return backend


def available_backends() -> list[str]:
    """Names of the backends that can run here, most preferred first."""
    return [runtime.name for runtime in program_runtimes() if runtime.available()]


def select_backend(name: str | None = None) -> Backend:
    """The backend called ``name``, or the best available one (never a runtime that
    is only run by name, :attr:`~anekit.runtimes.Runtime.by_name_only`; with its
    :attr:`~anekit.runtimes.Runtime.fallback` for the programs it refuses, where that
    one runs here too)."""
    known = {runtime.name: runtime for runtime in program_runtimes()}
    if name is not None:
        if name not in known:
            raise BackendUnavailableError(f"unknown backend {name!r}; known: {', '.join(known)}")
        if (reason := known[name].unavailable_reason()) is not None:
            raise BackendUnavailableError(f"backend {name!r} cannot run here: {reason}")
        return _instantiate(known[name])
    reasons = []
    for runtime in (item for item in known.values() if not item.by_name_only):
        if (reason := runtime.unavailable_reason()) is None:
            fallback = known.get(runtime.fallback or "")
            if fallback is not None and fallback.available():
                return FallingBack(_instantiate(runtime), _instantiate(fallback))
            return _instantiate(runtime)
        reasons.append(f"{runtime.name}: {reason}")
    raise BackendUnavailableError(
        f"no backend can run programs on this machine ({platform.system()} {platform.machine()}): "
        + "; ".join(reasons)
    )
