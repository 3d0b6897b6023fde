"""``anekit probe --coreai``: every op of the op table that has a Core AI lowering, as the
probe's single-op program (:mod:`anekit.probe.cases`), written as a Core AI asset
(:mod:`anekit.package.coreai`) and run by Core AI's CPU reference runtime (the extra
``anekit[coreai]``; on Linux the runtime ``coreai-core`` bundles); its values compared
with the simulator's fp32 mode on the same inputs.

These are figures of Apple's CPU reference runtime, never of an ANE. The programs run in
fp32: the cases' fp16 tensors and constants are widened to fp32 after they are drawn
(the same values ``probe --sim`` feeds), so what is compared is the lowering, not fp16
rounding. An op's error is its largest absolute difference over its outputs, scaled by
the inputs' magnitude as the emitter's own tests scale it: divided by ``m ** 2``, ``m``
the largest |float input| (at least 1), because products of two inputs (``matmul``,
``pow``) carry errors of that size; the bound is :data:`FP32_TOLERANCE`, or
:data:`FP16_TOLERANCE` for an output the program itself declares fp16 (``cast``).

Every op of the table is reported: ``ok`` / ``mismatch`` / ``failed`` for the lowered
ops that ran, ``refused`` where the op's lowering refused the probe's case
(``NotLowerable``, its reason given), ``no lowering`` where the op has no Core AI
lowering, ``not probed`` where a lowered op has no probe case (constants).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from anekit.errors import ProbeError, ProgramError
from anekit.probe.cases import CONSTANT, NOT_PROBED, Case, Tensor, by_op

#: What every report, table and message of this probe says it measured.
RUNTIME = "Core AI CPU reference runtime (not an ANE)"
#: The reference the runtime is compared with.
REFERENCE = "anekit simulator, fp32 mode"
#: Bound on the scaled error of an fp32 output (the emitter's tests use it).
FP32_TOLERANCE = 2e-5
#: Bound on the scaled error of an output the program declares fp16 (about two fp16
#: roundings: Core AI stores the value in fp16, the fp32 simulator does not round it).
FP16_TOLERANCE = 1e-3

#: ``ok``: ran and agreed within the tolerance; ``mismatch``: ran and did not (a shape,
#: non-finite values, exact outputs that differ, or an error beyond the tolerance);
#: ``failed``: a stage raised (``stage``, ``message``); ``refused``: the op's lowering
#: refused this case (``message``: its reason); ``no lowering``: the op has no Core AI
#: lowering; ``not probed``: lowered, but the probe has no case for it (``message``).
STATUSES = ("ok", "mismatch", "failed", "refused", "no lowering", "not probed")
#: Statuses that mean a lowering is wrong: the probe exits 1 on them.
PROBLEMS = ("mismatch", "failed")
#: The message of an op without a Core AI lowering.
NO_LOWERING = "no Core AI lowering"
#: Why ``const`` is lowered but not probed.
CONST = (
    "a constant: the emitter writes it as a Core AI constant; probed through the ops that use it"
)
#: The stages of one op, in order (a failure names the one it reached).
STAGES = ("build", "reference", "emit", "run", "compare")


@dataclass
class CoreAIResult:
    """One op type's probe on Core AI's CPU reference runtime."""

    op: str
    status: str
    program: str = ""
    #: Largest |Core AI - simulator fp32| over the float outputs.
    abs_error: float | None = None
    #: ``abs_error / max(1, largest |float input|) ** 2``, the figure held to ``tolerance``.
    scaled_error: float | None = None
    tolerance: float | None = None
    stage: str | None = None
    message: str | None = None
    seconds: float = 0.0


@dataclass
class CoreAIReport:
    """``anekit probe --coreai``: every chosen op of the op table, on Core AI's CPU
    reference runtime against the simulator's fp32 mode."""

    machine: dict[str, Any]
    coreai_core: str
    created: str
    results: list[CoreAIResult]
    runtime: str = RUNTIME
    reference: str = REFERENCE
    tolerance: dict[str, float] = field(
        default_factory=lambda: {"fp32": FP32_TOLERANCE, "fp16": FP16_TOLERANCE}
    )

    def counts(self) -> dict[str, int]:
        """Results per status, in :data:`STATUSES` order (zeros left out)."""
        found = dict.fromkeys(STATUSES, 0)
        for result in self.results:
            found[result.status] += 1
        return {status: count for status, count in found.items() if count}

    def problems(self) -> list[CoreAIResult]:
        """The lowered ops that disagree with the simulator or failed."""
        return [result for result in self.results if result.status in PROBLEMS]

    def summary(self) -> dict[str, Any]:
        """How many of the op table's ops lower, how many of those ran and passed, and
        why the rest do not (no lowering yet; a lowering that refused the case, with its
        reason; a lowered op without a probe case)."""

        def messages(status: str) -> dict[str, str]:
            return {r.op: r.message or "" for r in self.results if r.status == status}

        return {
            "ops": len(self.results),
            "lowered": sum(r.status != "no lowering" for r in self.results),
            "probed": sum(r.status in ("ok", *PROBLEMS) for r in self.results),
            "passed": sum(r.status == "ok" for r in self.results),
            "problems": [r.op for r in self.problems()],
            "refused": messages("refused"),
            "not_probed": messages("not probed"),
            "no_lowering": [r.op for r in self.results if r.status == "no lowering"],
        }

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["counts"] = self.counts()
        data["summary"] = self.summary()
        return data

    def save(self, path: str | Path) -> Path:
        import json

        target = Path(path)
        target.write_text(json.dumps(self.to_json(), indent=1) + "\n", encoding="utf-8")
        return target


def available() -> None:
    """Raise :class:`ProbeError` naming the extra to install when Core AI's package is
    missing (``anekit.package.coreai.authoring`` is asked, so that nothing is half-run)."""
    from anekit.package import coreai as emitter
    from anekit.runtimes import COREAI_EXTRA

    try:
        emitter.authoring()
    except ProgramError:
        raise ProbeError(
            f"anekit probe --coreai needs Core AI's package, the coreai extra: {COREAI_EXTRA}"
        ) from None


def run(
    ops: Iterable[str] | None = None,
    *,
    seed: int = 0,
    on_result: Callable[[CoreAIResult], None] | None = None,
) -> CoreAIReport:
    """Probe ``ops`` (default: every op type of the op table) on Core AI's CPU reference
    runtime, in this process; ``on_result`` sees each op's result as it lands."""
    from anekit.analysis import optable
    from anekit.ops.registry import OPS
    from anekit.probe import _machine, op_types

    chosen = op_types(ops)
    available()
    import anekit.ops.defs  # noqa: F401  (fills OPS with every op record and its lowerings)

    table = optable.load()
    cases = by_op()
    results = []
    with tempfile.TemporaryDirectory(prefix="anekit-probe-coreai-") as scratch:
        for op in chosen:
            record = OPS.get(op)
            case = cases.get(op)
            if op == "const":  # a value, not an op: the emitter writes Core AI constants
                result = CoreAIResult(op, "not probed", message=CONST)
            elif record is None or "coreai" not in record.lowerings:
                result = CoreAIResult(op, "no lowering", message=NO_LOWERING)
            elif case is None:
                constant = not table.ops[op].is_compute
                reason = CONSTANT if constant else NOT_PROBED.get(op, "no probe case yet")
                result = CoreAIResult(op, "not probed", message=reason)
            else:
                result = measure(case, Path(scratch), seed=seed)
            results.append(result)
            if on_result is not None:
                on_result(result)
    return CoreAIReport(
        machine=_machine(),
        coreai_core=_version(),
        created=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        results=results,
    )


def measure(case: Case, scratch: Path, *, seed: int = 0) -> CoreAIResult:
    """``case`` in fp32, written as an asset in ``scratch``, run by Core AI's runtime and
    compared with the simulator's fp32 mode; never raises for the op's sake."""
    from anekit.ops.lowering import NotLowerable
    from anekit.package import coreai as emitter
    from anekit.sim.interpreter import run as simulate
    from anekit.sim.single_op import single_op_program

    widened = widen(case)
    result = CoreAIResult(case.op, "failed", program=widened.describe())
    started = time.perf_counter()
    stage = "build"
    native: list[str] = []
    try:
        arrays = [_fp32(item) for item in case.arrays(seed)]
        attrs = {name: _fp32(value) for name, value in case.attrs.items()}
        program, feeds = single_op_program(case.op, *arrays, **attrs)
        outputs = list(program.functions["main"].outputs)
        names = [var.name for var in outputs]
        stage = "reference"
        fp32 = simulate(program, feeds, mode="fp32").outputs
        reference = [np.asarray(fp32[name]) for name in names]
        stage = "emit"
        path = emitter.save_coreai(program, scratch / f"{case.op}.aimodel", ["main"])
        if not emitter.authoring().AIModelAsset.is_valid(path):
            raise ProgramError(f"{path}: Core AI says the written asset is not valid")
        stage = "run"
        with _native_stderr(native):  # the runtime logs each load on fd 2
            got = emitter.run_coreai(path, feeds, "main")
        stage = "compare"
        missing = [name for name in names if name not in got]
        if missing:
            raise ProgramError(f"Core AI returned no {', '.join(missing)} (got {sorted(got)})")
        declared = [_fp16(var) for var in outputs]
        result.tolerance = FP16_TOLERANCE if any(declared) else FP32_TOLERANCE
        scale = max(
            [1.0]
            + [float(np.max(np.abs(v), initial=0.0)) for v in feeds.values() if v.dtype.kind == "f"]
        )
        problem, result.abs_error = compare([got[name] for name in names], reference, names)
        if result.abs_error is not None:
            result.scaled_error = result.abs_error / scale**2
            if problem is None and result.scaled_error > result.tolerance:
                problem = (
                    f"scaled error {result.scaled_error:.3g} > tolerance {result.tolerance:g} "
                    f"(max abs error {result.abs_error:.3g}, inputs up to {scale:.3g})"
                )
        result.status = "ok" if problem is None else "mismatch"
        result.message = problem
    except Exception as error:  # every failure is reported with its stage
        refusal = error if isinstance(error, NotLowerable) else error.__context__
        if stage == "emit" and isinstance(refusal, NotLowerable):
            result.status, result.message = "refused", str(refusal)
        else:
            result.stage = stage
            logged = " | ".join(line for line in "".join(native).splitlines() if line.strip())
            text = f"{type(error).__name__}: {error}".strip()
            result.message = (text + (f" (runtime log: {logged})" if logged else ""))[:2000]
    result.seconds = round(time.perf_counter() - started, 4)
    return result


def compare(
    outputs: Sequence[Any], reference: Sequence[np.ndarray], names: Sequence[str]
) -> tuple[str | None, float | None]:
    """What is wrong with ``outputs`` beyond a float error (a shape, non-finite values
    where the reference is finite, exact outputs that differ), or None; and the largest
    absolute error of the float outputs (None: no float output)."""
    worst: float | None = None
    for name, value, want in zip(names, outputs, reference, strict=True):
        got = np.asarray(value)
        if got.shape != want.shape:
            return f"{name}: shape {got.shape}, expected {want.shape}", worst
        if want.dtype.kind == "f":
            finite = np.isfinite(want)
            bad = ~np.isfinite(got) & finite
            if bad.any():
                return f"{name}: {int(bad.sum())} non-finite values where fp32 is finite", worst
            difference = np.abs(got[finite].astype(np.float64) - want[finite].astype(np.float64))
            worst = max(worst or 0.0, float(difference.max(initial=0.0)))
        elif not np.array_equal(got, want):
            differ = int(np.sum(got != want))
            return f"{name}: {differ} of {want.size} values differ from the fp32 result", worst
    return None, worst


def widen(case: Case) -> Case:
    """``case`` as this probe runs it: fp16 tensors drawn as fp16, then widened to fp32
    (the description says float32; the values are those ``probe --sim`` feeds)."""

    def wide(item: Any) -> Any:
        if isinstance(item, tuple):
            return tuple(wide(part) for part in item)
        assert isinstance(item, Tensor)
        return replace(item, dtype="float32") if item.dtype == "float16" else item

    return replace(case, inputs=tuple(wide(item) for item in case.inputs))


def _fp32(value: Any) -> Any:
    """``value`` with every fp16 array or scalar widened to fp32 (exactly)."""
    if isinstance(value, tuple | list):
        return type(value)(_fp32(item) for item in value)
    if isinstance(value, np.ndarray | np.generic) and value.dtype == np.float16:
        return value.astype(np.float32)
    return value


def _fp16(var: Any) -> bool:
    from anekit._milgraph import numpy_dtype

    dtype = numpy_dtype(var)
    return dtype is not None and dtype == np.float16


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("coreai-core")
    except PackageNotFoundError:
        return "unknown"


@contextlib.contextmanager
def _native_stderr(into: list[str]) -> Iterator[None]:
    """File descriptor 2 sent to a temporary file while the block runs (Core AI's
    runtime logs every function it loads there); what it wrote is appended to ``into``,
    for a failure's message. Without a descriptor 2, nothing is captured."""
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            into.append(sink.read().decode("utf-8", "replace"))


__all__ = [
    "FP16_TOLERANCE",
    "FP32_TOLERANCE",
    "NO_LOWERING",
    "RUNTIME",
    "STATUSES",
    "CoreAIReport",
    "CoreAIResult",
    "available",
    "compare",
    "measure",
    "run",
    "widen",
]
