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


def cpu_only() -> Any:
    """What keeps a ``coreai-cpu`` load on the CPU: ``SpecializationOptions.cpu_only()``
    where macOS's Core AI framework loads assets (macOS 27: its default placement may use
    the GPU or the Neural Engine, which this runtime's figures must not), None where
    coreai-core's bundled CPU runtime does (Linux; it takes no options there)."""
    from coreai.runtime import SpecializationOptions

    return SpecializationOptions.cpu_only() if SpecializationOptions.is_supported() else None


def write_asset(request: LoadRequest, folder: Path) -> tuple[Path, str]:
    """The program of ``request`` written as the asset ``folder/program.aimodel``, and the
    function to run: the program as it is, or, with compressed weights, as it goes into
    a package (:meth:`~anekit.program.CompiledProgram.lowered`: fp16, the weights
    compressed, its function ``main``), so that Core AI holds the compressed weights."""
    from anekit.package.coreai import save_coreai

    target = folder / "program.aimodel"
    if request.compression is not None and not request.converted:
        return save_coreai(request.lowered(), target, ["main"]), "main"
    return save_coreai(request.program, target, [request.function]), request.function


class CoreAISession:
    """A program written as a Core AI asset into a temporary folder (which lives as long
    as the session: macOS's loader reads the asset where it lies) and loaded on Core
    AI's runtime with ``specialization``; its runs reported as ``backend`` on ``device``
    (``requested``: the compute unit asked for, where one was)."""

    def __init__(
        self,
        request: LoadRequest,
        *,
        specialization: Any = None,
        backend: str = NAME,
        device: str = RUNTIMES[NAME].device,
        requested: str | None = None,
    ) -> None:
        from anekit.package.coreai import LoadedFunction

        self.backend, self.device, self.requested = backend, device, requested
        self._folder = tempfile.TemporaryDirectory(suffix=".coreai")  # removed with the session
        path, function = write_asset(request, Path(self._folder.name))
        self._function = LoadedFunction(path, function, specialization=specialization)
        self.last_run: RunReport | None = None

    def predict(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        start = time.perf_counter()
        outputs = self._function(feeds)
        self.last_run = RunReport(
            backend=self.backend,
            device=self.device,
            simulated=False,
            seconds=time.perf_counter() - start,
            requested=self.requested,
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
        return CoreAISession(request, specialization=cpu_only())
