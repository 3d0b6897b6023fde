"""Where Core ML actually places each op (macOS 14.4+): its ``MLComputePlan``.

Thin on purpose and unverified on hardware in this project's CI (no Mac; tested
against tests/standins.py's ``CoreMLComputePlan``, which enforces coremltools'
contract): it compiles the package into a temporary ``*.mlmodelc`` (what
``MLComputePlan.load_from_path`` takes: "the location of the mlmodelc directory"),
loads the compute plan with coremltools (``ct.models.compute_plan.MLComputePlan``)
for the compute units given, reads each operation's preferred device (nested blocks
included) and removes the compiled model. Ops are matched to the prediction by the
name of their first output.
"""

from __future__ import annotations

import contextlib
import platform
import subprocess
import tempfile
from pathlib import Path

from anekit._coremltools import core_ml_runtime_available, ct
from anekit.analysis.analyzer import walk
from anekit.errors import PlacementError

_FAMILIES = (("M1", "a14"), ("M2", "a15"), ("M3", "a15"), ("M4", "a17"), ("M5", "a17"))


#: The first macOS with ``MLComputePlan`` (coremltools raises "MLComputePlan is only
#: available on macOS >= 14.4" before it).
MACOS = (14, 4)


def macos_version() -> tuple[int, ...]:
    """This Mac's macOS version, e.g. ``(14, 4)``; ``()`` elsewhere."""
    release = platform.mac_ver()[0]
    try:
        return tuple(int(part) for part in release.split(".")) if release else ()
    except ValueError:
        return ()


def available() -> bool:
    """True on a Mac where coremltools can load compute plans (macOS 14.4 or later)."""
    return core_ml_runtime_available() and macos_version() >= MACOS


def chip() -> str:
    """The chip's name: ``Apple M2 Pro`` on a Mac (``machdep.cpu.brand_string``), the
    CPU model elsewhere (``/proc/cpuinfo``), else the machine type."""
    if platform.system() == "Darwin":
        try:
            result = subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"],
                capture_output=True,
                text=True,
                check=True,
            )
        except (OSError, subprocess.CalledProcessError):
            return platform.machine()
        return result.stdout.strip() or platform.machine()
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as info:
        for line in info:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def family_of(chip_name: str) -> str | None:
    """The op table's family key for an Apple M-series chip name, if known."""
    for marker, family in _FAMILIES:
        if f" {marker}" in f" {chip_name}" or chip_name.startswith(marker):
            return family
    return None


def _device_name(device: object) -> str:
    """``ane``, ``gpu`` or ``cpu`` for one of coremltools' ``MLComputeDevice`` objects."""
    devices = ct.models.compute_device
    if isinstance(device, devices.MLNeuralEngineComputeDevice):
        return "ane"
    if isinstance(device, devices.MLGPUComputeDevice):
        return "gpu"
    return "cpu"


def actual_devices(package: Path, compute_units: str = "CPU_AND_NE") -> dict[str, dict[str, str]]:
    """Function name -> first output name of each op -> ``ane``/``gpu``/``cpu``.

    ``package``: an ``.mlpackage`` or ``.mlmodel`` (compiled here), or a compiled
    ``.mlmodelc``; ``compute_units``: a ``ct.ComputeUnit`` name (``CPU_AND_NE``,
    ``CPU_AND_GPU``, ``CPU_ONLY``, ``ALL``)."""
    if not available():
        raise PlacementError("MLComputePlan needs macOS 14.4 or later with Core ML")
    if compute_units not in ct.ComputeUnit.__members__:
        raise PlacementError(
            f"compute units must be one of {', '.join(ct.ComputeUnit.__members__)}, "
            f"got {compute_units!r}"
        )
    with tempfile.TemporaryDirectory(prefix="anekit-plan-") as scratch:
        try:
            # compile_model moves its result to a destination that must end in
            # .mlmodelc and must not exist yet (it would be moved into it otherwise)
            compiled = (
                str(package)
                if Path(package).suffix == ".mlmodelc"
                else ct.models.utils.compile_model(
                    str(package), str(Path(scratch) / "model.mlmodelc")
                )
            )
            plan = ct.models.compute_plan.MLComputePlan.load_from_path(
                path=str(compiled), compute_units=ct.ComputeUnit[compute_units]
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
            for operation, _ in walk(function.block.operations):
                usage = plan.get_compute_device_usage_for_mlprogram_operation(operation)
                if usage is None or usage.preferred_compute_device is None:
                    continue  # const ops: Core ML gives them no device
                if operation.outputs:
                    found[operation.outputs[0].name] = _device_name(usage.preferred_compute_device)
            devices[name] = found
    return devices
