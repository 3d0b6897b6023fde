"""Core ML backend (macOS): run the saved package through coremltools' ``MLModel``.

Kept thin on purpose and unverified on hardware in this project's CI (no Mac):
it saves the program as an ``.mlpackage`` in a temporary directory and loads it
with ``compute_units=CPU_AND_NE`` (coremltools ``ct.ComputeUnit``), so Core ML
places what it can on the Neural Engine.
"""

from __future__ import annotations

import platform
import shutil
import tempfile
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from anekit._coremltools import core_ml_runtime_available, ct
from anekit.backends import RunReport

if TYPE_CHECKING:
    from anekit.program import CompiledProgram

COMPUTE_UNITS = ("CPU_AND_NE", "CPU_AND_GPU", "CPU_ONLY", "ALL")


class CoreMLSession:
    """A package loaded by Core ML."""

    def __init__(self, model: Any, directory: str, compute_units: str) -> None:
        self.model = model
        self.compute_units = compute_units
        self.last_run: RunReport | None = None
        self._cleanup = weakref.finalize(self, shutil.rmtree, directory, ignore_errors=True)

    def predict(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        start = time.perf_counter()
        outputs = self.model.predict(dict(feeds))
        self.last_run = RunReport(
            backend="coreml",
            device=f"Core ML ({self.compute_units})",
            simulated=False,
            seconds=time.perf_counter() - start,
        )
        return {name: np.asarray(value) for name, value in outputs.items()}


class CoreMLBackend:
    """Core ML through coremltools, on the compute units given (ANE by default)."""

    name = "coreml"

    def __init__(self, compute_units: str = "CPU_AND_NE") -> None:
        if compute_units not in COMPUTE_UNITS:
            raise ValueError(f"compute_units must be one of {COMPUTE_UNITS}, got {compute_units!r}")
        self.compute_units = compute_units

    def available(self) -> bool:
        return core_ml_runtime_available()

    def unavailable_reason(self) -> str:
        if platform.system() != "Darwin":
            return "Core ML exists only on macOS"
        return "coremltools could not load its Core ML bindings (libcoremlpython)"

    def load(self, program: CompiledProgram) -> CoreMLSession:
        units = getattr(ct.ComputeUnit, self.compute_units)
        directory = tempfile.mkdtemp(prefix="anekit-coreml-")
        if program.package_path is not None:
            # a package read from disk: load it as it is, the right function of it
            model = ct.models.MLModel(
                str(program.package_path), compute_units=units, function_name=program.function_name
            )
        else:
            path = program.save(Path(directory) / "model.mlpackage")
            model = ct.models.MLModel(str(path), compute_units=units)
        return CoreMLSession(model, directory, self.compute_units)
