"""Run reports: what ran where, how long the cold call and the warm calls took.

:func:`measure` calls a :class:`~anekit.program.CompiledProgram` once cold (loading it on
the backend: Core ML compiles the package then) and ``repeat`` times warm, and keeps
latency (per call, p50/p95) apart from sequential throughput (calls per second). Each
call's :attr:`~anekit.program.CompiledProgram.last_run` supplies the rest: backend,
device, compute units asked for, the compute plan's residency per device on a Mac and
whether any op fell back off the Neural Engine, the I/O shapes and bytes, and whether it
was simulated (a simulated run is never an ANE measurement).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from anekit.backends import RunReport

if TYPE_CHECKING:
    from anekit.program import CompiledProgram


@dataclass(frozen=True)
class RunMeasurement:
    """A cold call and ``repeat`` warm calls of one program on one backend."""

    source: str
    report: RunReport  # the last warm call's
    cold_ms: float  # the first call, loading included
    load_ms: float | None  # of which loading the program on the backend
    warm_ms: tuple[float, ...]  # each warm call, wall clock around the call
    #: each warm call's execution time on the accelerator, where the backend reports it
    hardware_ms: tuple[float, ...] = ()

    @property
    def p50_ms(self) -> float:
        return float(np.percentile(self.warm_ms, 50))

    @property
    def p95_ms(self) -> float:
        return float(np.percentile(self.warm_ms, 95))

    @property
    def calls_per_second(self) -> float:
        """Sequential throughput: one call in flight at a time."""
        return len(self.warm_ms) / (sum(self.warm_ms) / 1000)

    def to_json(self) -> dict[str, Any]:
        report = self.report

        def io(items: tuple[tuple[str, tuple[int, ...], str, int], ...]) -> list[Any]:
            return [
                {"name": name, "shape": list(shape), "dtype": dtype, "bytes": nbytes}
                for name, shape, dtype, nbytes in items
            ]

        return {
            "source": self.source,
            "function": report.function,
            "backend": report.backend,
            "device": report.device,
            "requested": report.requested,
            "simulated": report.simulated,
            "residency": report.residency,
            "fell_back": report.fell_back,
            "cold_ms": self.cold_ms,
            "load_ms": self.load_ms,
            "warm": {
                "calls": len(self.warm_ms),
                "p50_ms": self.p50_ms,
                "p95_ms": self.p95_ms,
                "calls_per_second": self.calls_per_second,
                "includes": "input checks, casts and padding; output copies",
            },
            "hardware": (
                {
                    "calls": len(self.hardware_ms),
                    "p50_ms": float(np.percentile(self.hardware_ms, 50)),
                    "source": "the framework's performance statistics (hwExecutionTime)",
                }
                if self.hardware_ms
                else None
            ),
            "inputs": io(report.inputs),
            "outputs": io(report.outputs),
            "problems": list(report.problems),
        }

    def describe(self) -> str:
        report = self.report
        kind = "simulated, not a device measurement" if report.simulated else "measured"
        lines = [
            f"{self.source}, function {report.function!r}: {report.device} via "
            f"{report.backend} ({kind})",
            f"requested: {report.requested or 'the backend default'}",
        ]
        if report.residency:
            placed = ", ".join(f"{count} on {device}" for device, count in report.residency.items())
            fallback = "some ops fell back" if report.fell_back else "nothing fell back"
            lines.append(f"compute plan: {placed} ({fallback})")
        else:
            lines.append("compute plan: none (Core ML on a Mac reports one)")
        load = f", of which loading {self.load_ms:.1f} ms" if self.load_ms is not None else ""
        lines += [
            f"cold call: {self.cold_ms:.1f} ms{load}",
            f"warm ({len(self.warm_ms)} calls): p50 {self.p50_ms:.3f} ms, p95 {self.p95_ms:.3f} ms,"
            f" {self.calls_per_second:.1f} calls/s one at a time",
        ]
        if self.hardware_ms:
            lines.append(
                f"hardware execution ({len(self.hardware_ms)} calls, the framework's statistics):"
                f" p50 {np.percentile(self.hardware_ms, 50):.3f} ms"
            )
        for label, items in (("in", report.inputs), ("out", report.outputs)):
            for name, shape, dtype, nbytes in items:
                lines.append(f"{label}: {name} {dtype}{list(shape)} ({nbytes} bytes)")
        lines += [f"problem: {problem}" for problem in report.problems]
        return "\n".join(lines)


def measure(
    program: CompiledProgram,
    *arrays: Any,
    backend: str | None = None,
    mode: str | None = None,
    repeat: int = 10,
) -> RunMeasurement:
    """One cold call of ``program`` on ``backend`` (with its ``mode``), then ``repeat``
    warm calls; the program's sessions are dropped first so the cold call loads it."""
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, got {repeat}")
    program.unload()
    started = time.perf_counter()
    program(*arrays, backend=backend, mode=mode)
    cold_ms = (time.perf_counter() - started) * 1000
    first = program.last_run
    load_ms = first.load_seconds * 1000 if first and first.load_seconds is not None else None
    warm, hardware = [], []
    for _ in range(repeat):
        started = time.perf_counter()
        program(*arrays, backend=backend, mode=mode)
        warm.append((time.perf_counter() - started) * 1000)
        seconds = program.last_run.hardware_seconds if program.last_run else None
        if seconds is not None:
            hardware.append(seconds * 1000)
    assert program.last_run is not None  # every backend's session sets one
    return RunMeasurement(
        program.source, program.last_run, cold_ms, load_ms, tuple(warm), tuple(hardware)
    )
