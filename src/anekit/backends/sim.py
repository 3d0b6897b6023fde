"""Simulator backend: runs any MIL program with the ANE's fp16 numerics (or fp32).

Every run it makes is reported as ``simulated``: a property of the program's
arithmetic, never an ANE measurement.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from anekit.backends import RunReport
from anekit.backends.request import LoadRequest


class SimSession:
    """A program prepared for the simulator."""

    def __init__(self, program: Any, function: str, mode: str, accumulation: str) -> None:
        self.program = program
        self.function = function
        self.mode = mode
        self.accumulation = accumulation
        self.last_run: RunReport | None = None

    def predict(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        from anekit import sim

        result = sim.run(
            self.program,
            feeds,
            mode=self.mode,
            accumulation=self.accumulation,
            function=self.function,
        )
        self.last_run = RunReport(
            backend="sim",
            device=f"ANE simulator ({self.mode} numerics)",
            simulated=True,
            seconds=result.seconds,
            numerics=result.report,
            requested=self.mode,
        )
        return result.outputs


class SimBackend:
    """The ANE simulator; available everywhere."""

    name = "sim"

    def __init__(self, mode: str = "ane", accumulation: str = "fp16") -> None:
        self.mode = mode
        self.accumulation = accumulation

    def load(self, request: LoadRequest, mode: str | None = None) -> SimSession:
        if request.compression is not None and not request.converted:
            # the weights as the package holds them: decompressed by the constexpr ops
            return SimSession(request.lowered(), "main", mode or self.mode, self.accumulation)
        return SimSession(request.program, request.function, mode or self.mode, self.accumulation)
