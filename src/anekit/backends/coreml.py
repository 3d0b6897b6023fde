"""Core ML backend (macOS): run the saved package through coremltools' ``MLModel``.

Kept thin on purpose and unverified on hardware in this project's CI (no Mac): it saves the
program as an ``.mlpackage`` in a temporary directory (or takes a package read from disk as
it is, the right ``function_name`` of it), compiles it once with Core ML
(``ct.models.utils.compile_model``) and loads the compiled model
(``ct.models.CompiledMLModel``) with the compute units asked for (``CPU_AND_NE`` by
default, so Core ML places what it can on the Neural Engine; ``CPU_AND_GPU``,
``CPU_ONLY`` or ``ALL`` as the ``mode``). :meth:`CoreMLSession.residency` asks Core ML's
``MLComputePlan`` where each op runs, and the run report carries it.

The GIL: coremltools' ``_MLModelProxy.predict`` (coremlpython/CoreMLPython.mm) calls
``predictionFromFeatures`` without releasing it. Where PyObjC's CoreML bindings are
installed (a macOS dependency of anekit), predictions go through
:mod:`anekit.backends.coreml_nogil` instead, which releases it.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
import weakref
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from anekit._coremltools import ct
from anekit.backends import RunReport, coreml_nogil
from anekit.backends.request import LoadRequest

COMPUTE_UNITS = ("CPU_AND_NE", "CPU_AND_GPU", "CPU_ONLY", "ALL")


class CoreMLSession:
    """A package loaded by Core ML."""

    def __init__(
        self,
        model: Any,
        directory: str,
        compute_units: str,
        package: Path | None = None,
        function_name: str | None = None,
        compiled: Path | None = None,
    ) -> None:
        self.model = model
        self.compute_units = compute_units
        self.package = package
        self.function_name = function_name
        self.last_run: RunReport | None = None
        self._residency: dict[str, int] | None = None
        #: The same compiled model through PyObjC (GIL released), where installed.
        self.no_gil = (
            coreml_nogil.NoGilModel(compiled, compute_units, function_name)
            if compiled is not None and coreml_nogil.available()
            else None
        )
        self._cleanup = weakref.finalize(self, shutil.rmtree, directory, ignore_errors=True)

    def residency(self) -> dict[str, int]:
        """Ops per device (``ane``/``gpu``/``cpu``) in Core ML's compute plan for this
        function and these compute units (macOS 14.4+); empty when it cannot tell."""
        if self._residency is None:
            from anekit.analysis import compute_plan
            from anekit.errors import PlacementError

            plans: dict[str, dict[str, str]] = {}
            if self.package is not None:
                with contextlib.suppress(PlacementError):
                    plans = compute_plan.actual_devices(self.package, self.compute_units)
            devices = plans.get(self.function_name or "main", {})
            self._residency = dict(Counter(devices.values()))
        return self._residency

    def predict(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        start = time.perf_counter()
        outputs = (self.no_gil or self.model).predict(dict(feeds))
        self.last_run = RunReport(
            backend="coreml",
            device=f"Core ML ({self.compute_units})",
            simulated=False,
            seconds=time.perf_counter() - start,
            residency=self.residency(),
            requested=self.compute_units,
        )
        return {name: np.asarray(value) for name, value in outputs.items()}


class CoreMLBackend:
    """Core ML through coremltools, on the compute units given (ANE by default)."""

    name = "coreml"

    def __init__(self, compute_units: str = "CPU_AND_NE") -> None:
        if compute_units not in COMPUTE_UNITS:
            raise ValueError(f"compute_units must be one of {COMPUTE_UNITS}, got {compute_units!r}")
        self.compute_units = compute_units

    def load(self, request: LoadRequest, mode: str | None = None) -> CoreMLSession:
        """Load ``request``'s program with the compute units ``mode`` names (default: this
        backend's): the package it was read from as it is, else the one ``request.save``
        writes into a temporary directory."""
        compute_units = mode or self.compute_units
        if compute_units not in COMPUTE_UNITS:
            raise ValueError(f"compute units must be one of {COMPUTE_UNITS}, got {compute_units!r}")
        units = getattr(ct.ComputeUnit, compute_units)
        directory = tempfile.mkdtemp(prefix="anekit-coreml-")
        function = None
        if request.package is not None:
            # a package read from disk: load it as it is, the right function of it
            path = Path(request.package)
            function = request.function
        else:
            path = request.save(Path(directory) / "model.mlpackage")
        # compile_model's destination must end in .mlmodelc and must not exist yet
        compiled = Path(
            ct.models.utils.compile_model(str(path), str(Path(directory) / "model.mlmodelc"))
        )
        model = ct.models.CompiledMLModel(
            str(compiled), compute_units=units, function_name=function
        )
        return CoreMLSession(model, directory, compute_units, path, function, compiled)
