"""Where Core AI places each op of a program (macOS 27): its compute plan, read through
Apple's converter ``coreai-torch`` (the extra ``anekit[coreai-plan]``), imported only
here and only when asked.

Written against coreai-torch 0.4.3 and unverified on hardware in this project's CI (no
Mac with macOS 27; tested against tests/standins_coreai.py's ``CoreAIComputePlan``,
which refuses what the real one refuses). Its public API, in
``coreai_torch/debugging/compute_plan.py``:

- ``await ComputePlan.from_program(program: coreai.authoring.AIProgram,
  specialization_options: SpecializationOptions | None = None)`` saves the program as
  an asset in a temporary folder, loads it with the options and debugging on
  (``coreai_torch/debugging/utils.py``, ``_with_debug``: ``options.with_debug(
  enabled=True)``, ``SpecializationOptions.default()`` when None: off macOS that
  raises RuntimeError "... is only available on macOS") and reads each operation's
  device from the loaded model's debug records;
- ``plan.to_dict(program)``: ``entries``, one per operation the plan holds:
  ``operation_id``, ``devices`` (sorted ``ComputeDevice`` values: ``CPU``, ``GPU``,
  ``NEURAL_ENGINE``, ``UNKNOWN``), ``residency`` (``PLACED``, ``NO DEVICE``) and
  ``validation`` (the Neural Engine's validation messages: why it declined an op); and
  ``operation_names`` (id -> the Core AI op's name, ``coreai.conv2d``) for the program
  it was built from. Constants, layout ops and ops fused into a neighbour usually have
  no entry.

The plan is per Core AI op: one anekit op may lower to several (a layer_norm spelled
out, a conv's layout transposes), and the asset does not name the anekit op each came
from. Each function is planned as an asset of its own, so its ops are its own.
"""

from __future__ import annotations

import asyncio
import importlib.util
import warnings
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from anekit.errors import BackendUnavailableError, PlacementError, ProgramError
from anekit.runtimes import RUNTIMES

#: What to install for the compute plan: Apple's converter, which pins coreai-core to
#: the version the extra ``anekit[coreai]`` pins (and brings torch).
PLAN_EXTRA = "pip install 'anekit[coreai-plan]'"
#: ``ComputeDevice`` values (coreai_torch/debugging/compute_plan.py) in anekit's words.
DEVICES = {"NEURAL_ENGINE": "ane", "GPU": "gpu", "CPU": "cpu", "UNKNOWN": "unknown"}
#: Left out, as coreai-torch's own summary leaves them out (``_EXCLUDED_FROM_SUMMARY``):
#: constants carry no residency, a graph is a container.
EXCLUDED = ("coreai.constant", "coreai.graph")


@dataclass(frozen=True)
class PlannedOp:
    """One Core AI op in the plan: its id and name in the asset, where it runs (anekit's
    ``ane``/``gpu``/``cpu``/``unknown``, several where Core AI splits it) and why the
    Neural Engine declined it, where it says."""

    id: int
    op: str
    devices: tuple[str, ...]
    validation: tuple[str, ...] = ()

    @property
    def device(self) -> str:
        return "+".join(self.devices) or "unknown"


def unavailable_reason() -> str | None:
    """Why Core AI's compute plan cannot be read here (Core AI on the Neural Engine
    cannot run, or coreai-torch is missing), or None."""
    if (reason := RUNTIMES["coreai"].unavailable_reason()) is not None:
        return reason
    if importlib.util.find_spec("coreai_torch") is None:
        return f"Core AI's compute plan needs Apple's converter coreai-torch: {PLAN_EXTRA}"
    return None


def _plan_class() -> Any:
    """coreai-torch's ``ComputePlan`` (importing coreai_torch imports torch, and warns
    about a torch newer than it was validated with: a local build suffix such as
    ``2.13.0+cpu`` counts as newer)."""
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="coreai-torch has only been validated")
            from coreai_torch.debugging.compute_plan import ComputePlan
    except ImportError as error:
        raise PlacementError(
            f"Core AI's compute plan needs Apple's converter coreai-torch ({PLAN_EXTRA}): {error}"
        ) from None
    return ComputePlan


def actual_devices(
    program: Any, functions: Iterable[str] | None = None, kind: str = "neural_engine"
) -> dict[str, list[PlannedOp]]:
    """Function name -> each Core AI op of it that the plan holds, in id order, with
    ``kind`` (:data:`~anekit.backends.coreai_os.KINDS`) preferred, as the ``coreai``
    backend loads it. ``program``: a MIL program. :class:`PlacementError` naming why
    where the plan cannot be read here or the program cannot be written for Core AI."""
    from anekit.backends.coreai_os import specialization
    from anekit.package.coreai import to_coreai

    if (reason := unavailable_reason()) is not None:
        raise PlacementError(f"Core AI's compute plan is unavailable here: {reason}")
    plan_class = _plan_class()
    try:
        options = specialization(kind)
    except BackendUnavailableError as error:
        raise PlacementError(str(error)) from None
    names = list(program.functions) if functions is None else list(functions)
    planned: dict[str, list[PlannedOp]] = {}
    for name in names:
        try:
            built = to_coreai(program, [name])
        except ProgramError as error:
            raise PlacementError(f"function {name}: Core AI cannot take it: {error}") from None
        try:
            plan = asyncio.run(plan_class.from_program(built, options))
            data = plan.to_dict(built)
        except Exception as error:
            raise PlacementError(
                f"function {name}: Core AI could not build a compute plan: {error}"
            ) from error
        op_names = {int(key): str(value) for key, value in data.get("operation_names", {}).items()}
        planned[name] = [
            PlannedOp(
                id=int(entry["operation_id"]),
                op=op_names.get(int(entry["operation_id"]), "?"),
                devices=tuple(DEVICES.get(str(item), "unknown") for item in entry["devices"]),
                validation=tuple(str(item) for item in entry.get("validation", ())),
            )
            for entry in data["entries"]
            if op_names.get(int(entry["operation_id"])) not in EXCLUDED
        ]
    return planned


def summary(ops: Iterable[PlannedOp]) -> str:
    """``12 on ane, 1 on cpu``: the ops per device of one function's plan."""
    counts = Counter(op.device for op in ops)
    order = {device: index for index, device in enumerate(("ane", "gpu", "cpu"))}
    ranked = sorted(counts.items(), key=lambda item: (order.get(item[0], 9), item[0]))
    return ", ".join(f"{count} on {device}" for device, count in ranked) or "no ops placed"


__all__ = [
    "DEVICES",
    "EXCLUDED",
    "PLAN_EXTRA",
    "PlannedOp",
    "actual_devices",
    "summary",
    "unavailable_reason",
]
