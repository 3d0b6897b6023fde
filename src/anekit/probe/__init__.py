"""``anekit probe``: every op type of the op table as a small single-op program, run on
this machine's Neural Engine (Core ML, ``CPU_AND_NE``; macOS) or, with ``simulate``,
through the simulator's fp16 numerics (any OS); its values compared with the
simulator's fp32 result and, on a Mac, its device read from ``MLComputePlan``.

On a Mac each op runs in a fresh worker process (:mod:`anekit.probe.worker`): a
compiler crash or a hang costs that worker and is reported as the op's result. The
report (:class:`~anekit.probe.report.ProbeReport`, JSON) is what a user contributes;
``anekit ops --from-probe REPORT`` (:mod:`anekit.probe.contribute`) turns it into the
op table's verdicts for that chip family. With ``direct``, the programs run through
the experimental direct ANE path instead (:mod:`anekit.backends.direct`, private API):
what its compiler takes, a finding of its own that does not change the op table. The
Core ML and direct paths are unverified on hardware in this project's CI (no Mac).
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from anekit.analysis import compute_plan, optable
from anekit.errors import ProbeError
from anekit.probe.cases import CASES, CONSTANT, NOT_PROBED, Case, by_op
from anekit.probe.measure import measure
from anekit.probe.report import DIRECT_UNITS, OpResult, ProbeReport

__all__ = ["CASES", "Case", "OpResult", "ProbeReport", "op_types", "run"]

#: Seconds one op may take in its worker (build, save, compile, plan, run).
TIMEOUT = 120.0

#: A worker: :mod:`anekit.probe.worker` with coremltools' optional frontends kept out
#: (it imports torch, scikit-learn and transformers when they are installed: 7 of a
#: worker's 10 s of start-up here; a MIL program needs none of them).
_WORKER = (
    "import sys; "
    "sys.modules.update(dict.fromkeys(('torch', 'sklearn', 'tensorflow', 'transformers'))); "
    "from anekit.probe.worker import main; raise SystemExit(main(sys.argv[1:]))"
)


def op_types(ops: Iterable[str] | None = None) -> list[str]:
    """The op types to probe: ``ops`` (checked against the op table) or every op type
    the table lists, sorted."""
    table = optable.load()
    if ops is None:
        return sorted(table.ops)
    chosen = list(dict.fromkeys(ops))
    unknown = [op for op in chosen if op not in table.ops]
    if unknown:
        raise ProbeError(f"not in the op table: {', '.join(unknown)} (anekit ops lists them)")
    return chosen


def run(
    ops: Iterable[str] | None = None,
    *,
    simulate: bool = False,
    direct: bool = False,
    compute_units: str = "CPU_AND_NE",
    isolate: bool | None = None,
    timeout: float = TIMEOUT,
    on_result: Callable[[OpResult], None] | None = None,
) -> ProbeReport:
    """Probe ``ops`` (default: every op type of the op table).

    ``simulate``: run the programs in the simulator (fp16 numerics) instead of Core
    ML; ``direct``: through the direct ANE path (macOS, experimental). ``isolate``:
    one worker process per op (default: on a device, not in the simulator; a worker
    per op also gives each its own compile budget on the direct path). ``on_result``
    sees each op's result as it lands."""
    chosen = op_types(ops)
    if simulate and direct:
        raise ProbeError("choose the simulator or the direct path, not both")
    backend = "sim" if simulate else "direct" if direct else "coreml"
    if direct:
        from anekit.runtimes import RUNTIMES

        reason = RUNTIMES["direct"].unavailable_reason()
        if reason is not None:
            raise ProbeError(f"anekit probe --direct: {reason}")
    elif not simulate and not compute_plan.available():
        raise ProbeError(
            "anekit probe runs ops on Core ML, which needs macOS 14.4 or later "
            "(MLComputePlan); `anekit probe --sim` runs the same programs in the simulator"
        )
    isolate = (not simulate) if isolate is None else isolate
    cases = by_op()
    if direct and not isolate:
        from anekit.backends.direct import compiles_left

        probed, left = sum(op in cases for op in chosen), compiles_left()
        if probed > left:
            raise ProbeError(
                f"probing {probed} ops in this process takes {probed} ANE compiles and it has "
                f"{left} left (ANEKIT_DIRECT_COMPILE_BUDGET); without --in-process each op "
                "runs in a worker of its own, with a budget of its own"
            )
    table = optable.load()
    results = []
    with tempfile.TemporaryDirectory(prefix="anekit-probe-") as scratch:
        for op in chosen:
            case = cases.get(op)
            if case is None:
                constant = not table.ops[op].is_compute
                reason = CONSTANT if constant else NOT_PROBED.get(op, "no probe case yet")
                result = OpResult(op, "not probed", message=reason)
            elif isolate:
                result = _in_worker(case, Path(scratch), backend, compute_units, timeout)
            else:
                result = measure(case, Path(scratch), backend=backend, compute_units=compute_units)
            results.append(result)
            if on_result is not None:
                on_result(result)
    return ProbeReport(
        machine=_machine(),
        compute_units=(
            "simulated (fp16 numerics)" if simulate else DIRECT_UNITS if direct else compute_units
        ),
        simulated=simulate,
        created=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        results=results,
    )


def _machine() -> dict[str, object]:
    from anekit.bench import machine

    found = machine()
    found["family"] = compute_plan.family_of(str(found["chip"]))
    return found


def _in_worker(
    case: Case, scratch: Path, backend: str, compute_units: str, timeout: float
) -> OpResult:
    """``case`` measured in a fresh ``python -m anekit.probe.worker`` process."""
    out = scratch / f"{case.op}.json"
    stage_file = out.with_name(out.name + ".stage")
    command = [sys.executable, "-c", _WORKER, case.op, str(out)]
    command += ["--backend", backend, "--compute-units", compute_units]
    died = OpResult(case.op, "crashed", program=case.describe(), tolerance=case.tolerance)
    try:
        finished = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, env=dict(os.environ)
        )
    except subprocess.TimeoutExpired:
        died.status, died.seconds = "timeout", timeout
        died.stage = _read(stage_file)
        died.message = f"the worker ran past {timeout:g} s (stage {died.stage}) and was killed"
        return died
    if finished.returncode == 0 and out.exists():
        try:
            return OpResult(**json.loads(out.read_text(encoding="utf-8")))
        except (ValueError, TypeError) as error:
            died.message = f"the worker wrote an unreadable result: {error}"
            return died
    died.stage = _read(stage_file)
    code = finished.returncode
    how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
    tail = finished.stderr.strip().splitlines()[-3:]
    died.message = f"the worker died ({how}) during stage {died.stage}" + (
        ": " + " | ".join(tail) if tail else ""
    )
    return died


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None
