"""One probe: build a case's single-op program, compute its fp32 reference in the
simulator, save it as a package, and run it on Core ML (its device from
``MLComputePlan``), through the experimental direct ANE path (the private framework
compiles only for the ANE), or in the simulator's fp16 numerics; compare the values.

A stage that raises ends the probe as ``failed`` with the stage named; the stage
reached so far is also written to a file (``progress``) so that a worker that dies
mid-stage (a compiler crash) can be reported with it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anekit._coremltools import without_final_collect
from anekit.frontends.mlpackage import load_package
from anekit.probe.cases import Case
from anekit.probe.report import OpResult
from anekit.program import CompiledProgram
from anekit.sim.interpreter import run
from anekit.sim.single_op import single_op_program

#: What a probe runs the program on: Core ML (macOS), the simulator's fp16 numerics, or
#: the direct ANE path (macOS, private API; experimental).
BACKENDS = ("coreml", "sim", "direct")


def measure(
    case: Case,
    scratch: Path,
    *,
    backend: str = "coreml",
    compute_units: str = "CPU_AND_NE",
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> OpResult:
    """Probe ``case`` (its package goes in ``scratch``); never raises for the op's sake."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    result = OpResult(case.op, "failed", program=case.describe(), tolerance=case.tolerance)
    started = time.perf_counter()
    stage = "build"

    def reach(name: str) -> None:
        nonlocal stage
        stage = name
        if progress is not None:
            progress(name)

    try:
        reach("build")
        arrays = case.arrays(seed)
        program, feeds = single_op_program(case.op, *arrays, **case.attrs)
        reach("reference")
        fp32 = run(program, feeds, mode="fp32").outputs
        outputs_of = program.functions["main"].outputs
        reference = [np.asarray(fp32[var.name]) for var in outputs_of]
        reach("save")
        # a one-op program leaves little to collect; coremltools' notes on the I/O
        # dtypes it casts (bool to fp32) are in the saved program the probe reads
        with without_final_collect(), _quiet("coremltools"):
            path = CompiledProgram(program, deployment_target="iOS18").save(
                scratch / f"{case.op}.mlpackage"
            )
        saved = load_package(path)
        function = saved.program.functions["main"]
        names = [var.name for var in function.outputs]
        kept = sorted({op.op_type for op in function.operations})
        folded = None if case.op in kept else f"coremltools folded it into {', '.join(kept)}"
        if backend == "coreml":
            outputs = _on_core_ml(path, feeds, names, compute_units, reach, result)
        elif backend == "direct":
            outputs = _on_direct(saved, feeds, names, reach)
            result.device = "ane"  # what the private compiler accepts runs on the ANE
        else:
            reach("run")
            outputs = _listed(saved(*feeds.values(), backend="sim", mode="ane"), names)
            result.device = "simulated"
        if folded is not None:  # the device ran something else: no evidence about the op
            result.device = None
        reach("compare")
        result.rel_error, problem = compare(outputs, reference, names)
        error, bound = result.rel_error, case.tolerance
        if problem is None and error is not None and bound is not None and error > bound:
            problem = f"relative error {error:.3g} > tolerance {bound:g}"
        result.status = "ok" if problem is None else "mismatch"
        result.message = "; ".join(filter(None, [problem, folded])) or None
    except Exception as error:  # the probe reports every failure with its stage
        result.stage = stage
        result.message = f"{type(error).__name__}: {error}".strip()[:2000]
    result.seconds = round(time.perf_counter() - started, 4)
    return result


def compare(
    outputs: Sequence[np.ndarray], reference: Sequence[np.ndarray], names: Sequence[str]
) -> tuple[float | None, str | None]:
    """The largest error of float outputs relative to the largest |reference value|,
    and what is wrong beyond it (a shape, non-finite values, exact outputs that
    differ), or None."""
    worst: float | None = None
    for name, got, want in zip(names, outputs, reference, strict=True):
        got, want = np.asarray(got), np.asarray(want)
        if got.shape != want.shape:
            return worst, f"{name}: shape {got.shape}, expected {want.shape}"
        if np.issubdtype(want.dtype, np.floating):
            bad = ~np.isfinite(got) & np.isfinite(want)
            if bad.any():
                return worst, f"{name}: {int(bad.sum())} non-finite values where fp32 is finite"
            scale = max(float(np.abs(want[np.isfinite(want)]).max(initial=0.0)), 1e-6)
            finite = np.isfinite(want)
            error = float(np.abs(got[finite].astype(np.float64) - want[finite]).max(initial=0.0))
            worst = max(worst or 0.0, error / scale)
        elif not np.array_equal(got, want):
            differ = int(np.sum(got != want))
            return worst, f"{name}: {differ} of {want.size} values differ from the fp32 result"
    return worst, None


def _on_core_ml(
    package: Path,
    feeds: dict[str, np.ndarray],
    names: Sequence[str],
    compute_units: str,
    reach: Callable[[str], None],
    result: OpResult,
) -> list[np.ndarray]:
    """Compile ``package`` once, read where Core ML places its ops for
    ``compute_units``, and run it there (macOS; unverified on hardware in CI)."""
    from anekit._coremltools import ct
    from anekit.analysis.compute_plan import actual_devices

    reach("compile")
    # compile_model's destination must end in .mlmodelc and must not exist yet
    compiled = ct.models.utils.compile_model(str(package), str(package.with_suffix(".mlmodelc")))
    reach("plan")
    result.placement = actual_devices(Path(compiled), compute_units).get("main", {})
    result.device = _device_of(result.placement, names)
    reach("run")
    model = ct.models.CompiledMLModel(compiled, compute_units=ct.ComputeUnit[compute_units])
    predicted = model.predict(dict(feeds))
    return [np.asarray(predicted[name]) for name in names]


def _on_direct(
    saved: CompiledProgram,
    feeds: dict[str, np.ndarray],
    names: Sequence[str],
    reach: Callable[[str], None],
) -> list[np.ndarray]:
    """Compile and load the saved program with the private ANE framework, then run it
    there; a refusal raises (never a quiet run on Core ML). Unverified on hardware."""
    from anekit.backends.direct import no_fallback

    with no_fallback():
        reach("compile")
        saved.prepare("direct")
        reach("run")
        return _listed(saved(*feeds.values(), backend="direct"), names)


@contextlib.contextmanager
def _quiet(logger_name: str) -> Iterator[None]:
    logger = logging.getLogger(logger_name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _listed(outputs: Any, names: Sequence[str]) -> list[np.ndarray]:
    if isinstance(outputs, dict):
        return [np.asarray(value) for value in outputs.values()]
    return [np.asarray(outputs)] if len(names) == 1 else [np.asarray(item) for item in outputs]


def _device_of(placement: dict[str, str], names: Sequence[str]) -> str | None:
    """The probed op's device: the op that writes the function's first output; if
    Core ML renamed it, every compute op's device when they agree."""
    if names and names[0] in placement:
        return placement[names[0]]
    devices = set(placement.values())
    return devices.pop() if len(devices) == 1 else None
