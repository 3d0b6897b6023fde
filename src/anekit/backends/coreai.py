"""Core AI's CPU reference runtime as a backend (``coreai-cpu``): the program written as
a Core AI asset (:mod:`anekit.package.coreai`) into a temporary folder, loaded once,
and run by Apple's runtime (on Linux, the CPU runtime ``coreai-core`` bundles).

Its runs are CPU measurements of Apple's reference executor, never an ANE figure: on a
Mac with macOS 27, the ANE through Core AI is not this backend (issue 36, not yet).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from anekit.backends import RunReport
from anekit.backends.request import LoadRequest
from anekit.errors import ProgramError
from anekit.runtimes import RUNTIMES

NAME = "coreai-cpu"


class CoreAISession:
    """A program written as a Core AI asset and loaded on Core AI's runtime."""

    def __init__(self, request: LoadRequest) -> None:
        from anekit.package.coreai import LoadedFunction, save_coreai

        if request.compression is not None:
            raise ProgramError(
                f"{request.source}: compressed weights ({request.compression}) are not "
                "written to Core AI assets yet; run the uncompressed program"
            )
        self._folder = tempfile.TemporaryDirectory(suffix=".coreai")  # removed with the session
        path = save_coreai(
            request.program, Path(self._folder.name) / "program.aimodel", [request.function]
        )
        self._function = LoadedFunction(path, request.function)
        self.last_run: RunReport | None = None

    def predict(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        start = time.perf_counter()
        outputs = self._function(feeds)
        self.last_run = RunReport(
            backend=NAME,
            device=RUNTIMES[NAME].device,
            simulated=False,
            seconds=time.perf_counter() - start,
        )
        return outputs

    def __del__(self) -> None:
        function: Any = getattr(self, "_function", None)
        if function is not None:
            function.close()


class CoreAICpuBackend:
    """Core AI's CPU reference runtime (the extra ``anekit[coreai]``); only by name."""

    name = NAME

    def load(self, request: LoadRequest, mode: str | None = None) -> CoreAISession:
        if mode is not None:
            raise ProgramError(f"the {NAME} backend takes no mode, got {mode!r}")
        return CoreAISession(request)
