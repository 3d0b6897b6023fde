"""Where Core ML actually places each op (macOS 14.4+): its ``MLComputePlan``.

Thin on purpose and unverified on hardware in this project's CI (no Mac): it
compiles the package, loads the compute plan with coremltools
(``ct.models.compute_plan.MLComputePlan``) and reads each operation's preferred
device. Ops are matched to the prediction by the name of their first output.
"""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path

from anekit._coremltools import core_ml_runtime_available, ct
from anekit.errors import PlacementError

_FAMILIES = (("M1", "a14"), ("M2", "a15"), ("M3", "a15"), ("M4", "a17"), ("M5", "a17"))


def available() -> bool:
    """True on a Mac where coremltools can load compute plans."""
    return core_ml_runtime_available()


def chip() -> str:
    """The chip name, e.g. ``Apple M2 Pro`` (macOS), or the machine type elsewhere."""
    if platform.system() != "Darwin":
        return platform.machine()
    try:
        result = subprocess.run(
            ["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return platform.machine()
    return result.stdout.strip()


def family_of(chip_name: str) -> str | None:
    """The op table's family key for an Apple M-series chip name, if known."""
    for marker, family in _FAMILIES:
        if f" {marker}" in f" {chip_name}" or chip_name.startswith(marker):
            return family
    return None


def _device_name(device: object) -> str:
    name = type(device).__name__
    if "NeuralEngine" in name:
        return "ane"
    if "GPU" in name:
        return "gpu"
    return "cpu"


def actual_devices(package: Path, compute_units: str = "CPU_AND_NE") -> dict[str, dict[str, str]]:
    """Function name -> first output name of each op -> ``ane``/``gpu``/``cpu``."""
    if not available():
        raise PlacementError("MLComputePlan needs macOS 14.4 or later with Core ML")
    try:
        compiled = ct.models.utils.compile_model(str(package))
        plan = ct.models.compute_plan.MLComputePlan.load_from_path(
            path=str(compiled), compute_units=getattr(ct.ComputeUnit, compute_units)
        )
    except Exception as error:
        raise PlacementError(
            f"{package}: Core ML could not build a compute plan: {error}"
        ) from error
    program = plan.model_structure.program
    if program is None:
        raise PlacementError(f"{package}: not an ML program")
    devices: dict[str, dict[str, str]] = {}
    for name, function in program.functions.items():
        found: dict[str, str] = {}
        for operation in function.block.operations:
            usage = plan.get_compute_device_usage_for_mlprogram_operation(operation)
            if usage is None or not operation.outputs:
                continue
            found[operation.outputs[0].name] = _device_name(usage.preferred_compute_device)
        devices[name] = found
    return devices
