"""anekit's simulator as the executor of coremltools' own MIL op test-suite.

coremltools ships a test per MIL op (``coremltools/converters/mil/mil/ops/tests/iOS14`` ...
``iOS18``): each builds a one-op program, converts it with ``ct.convert`` and, on a Mac,
checks Core ML's prediction against expected values with the suite's tolerances
(``testing_utils.compare_backend``: fp16 programs get ``atol`` x100 and ``rtol`` x100, at
least 0.5 and 0.05). On Linux that prediction is skipped. This runner runs the suite with
a pytest plugin (this module, ``-p mil_op_suite``) that makes the prediction anekit's:
``run_core_ml_predict`` simulates the converted model's MIL program
(``MLModel._mil_program``, after coremltools' passes; ``MLModel.predict`` too, for the
tests that call it themselves) with
:func:`anekit.sim.interpreter.run`, in ``fp32`` mode (reference math) or ``ane`` mode
(every float value stored in fp16). The suite's own checks then judge the outputs. A
run the simulator refuses for its input values (an index out of bounds with
``validate_indices``) raises ``RuntimeError("Unable to compute the prediction using ML
Program ...")``, as Core ML's ``predict`` does and the suite's tests expect; an op the
simulator lacks raises its own error. Outputs come back in their declared dtype, as Core
ML's do: in ``fp32`` mode an fp16 output of float32 math is rounded there.

Only ML programs are run (``PYMIL_TEST_TARGETS=mlprogram``, fp16 and fp32 precisions:
``INCLUDE_MIL_FP32_UNIT_TESTS=1``): a neural-network model has no MIL program to run.
``ane`` mode runs the fp16-precision tests only; ``fp32`` mode runs both precisions. Each
test function keeps at most ``--sample`` of its parametrizations (an evenly spaced,
deterministic choice). A test counts when it reached the executor (its prediction was
asked for); a test whose model takes an image or keeps state (Core ML interface features,
not ops) is reported apart, as are tests that never asked for a prediction (type checks,
conversion errors).

    .venv/bin/python bench/mil_op_suite.py [--mode fp32|ane|both] [--sample 20]
        [--opsets iOS14,iOS15,iOS16,iOS17,iOS18] [-k EXPR] [--json PATH]

Prints a table per mode (passed / reached by op family, the failures' first lines) and
writes a JSON record with every counted test's outcome (default
``bench/results/mil-op-suite-<date>.json``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OPSETS = ("iOS14", "iOS15", "iOS16", "iOS17", "iOS18")
MODES = ("fp32", "ane")
#: Environment of a child pytest run: the mode, where it writes its rows, the sample size.
MODE_ENV, OUT_ENV, SAMPLE_ENV = "ANEKIT_SUITE_MODE", "ANEKIT_SUITE_OUT", "ANEKIT_SUITE_SAMPLE"

#: Tests kept out of the denominator, by test function and a part of their parameters:
#: what they ask of Core ML is undefined (docs/simulator.md lists them; issue 34 allows
#: at most 1 % of the counted tests).
UNDEFINED: dict[tuple[str, str], str] = {
    (
        "TestScatter::test_ios17_invalid_indices",
        "validate_indices=False",
    ): "undefined: scatter with out-of-range indices and validate_indices=False",
}


def excluded_reason(nodeid: str) -> str | None:
    """Why the test ``nodeid`` is kept out of the denominator (:data:`UNDEFINED`), if it is."""
    function, _, params = nodeid.partition("[")
    for (name, part), reason in UNDEFINED.items():
        if function.endswith(name) and part in params:
            return reason
    return None


# --- the pytest plugin (loaded in the child run) -------------------------------------------

_current: dict[str, Any] = {}


def _simulated_predict(mlmodel: Any, input_key_values: dict[str, Any], state: Any = None) -> Any:
    """``testing_utils.run_core_ml_predict``, answered by anekit's simulator."""
    import numpy as np
    import pytest
    from coremltools.converters.mil.mil import types

    from anekit.errors import ProgramError, UnsupportedOpError
    from anekit.sim.interpreter import run

    if state is not None:
        _current["excluded"] = "stateful model"
        pytest.skip("a stateful model: Core ML's state is not simulated")
    program = getattr(mlmodel, "_mil_program", None)
    if program is None:
        _current["excluded"] = "no MIL program"
        pytest.skip("the model has no MIL program")
    func = program.functions["main"]
    feeds = {}
    for name, var in func.inputs.items():
        value = input_key_values[name]
        if not isinstance(value, np.ndarray | np.generic | int | float | bool | list):
            _current["excluded"] = "image input"
            pytest.skip("an image input: Core ML's image preprocessing is not simulated")
        dtype = types.nptype_from_builtin(var.dtype)
        feeds[name] = np.asarray(value).astype(dtype).reshape(var.shape)
    _current["reached"] = True
    try:
        outputs = run(program, feeds, mode=os.environ[MODE_ENV]).outputs
    except UnsupportedOpError:
        raise
    except (ProgramError, IndexError) as error:  # the program refused its input values
        # as Core ML's predict reports a failed prediction (the suite's tests match it)
        raise RuntimeError(f"Unable to compute the prediction using ML Program: {error}") from error
    # Core ML returns each output in its declared dtype: an fp16 output of fp32 math is
    # rounded there (the simulator's fp32 numerics keep the reference's float32)
    for var in func.outputs:
        if var.dtype == types.fp16 and var.name in outputs:
            outputs[var.name] = np.asarray(outputs[var.name]).astype(np.float16)
    return outputs


def _sampled(items: list[Any], keep: int) -> list[Any]:
    """At most ``keep`` of ``items``, evenly spaced (the first and the last kept)."""
    if len(items) <= keep:
        return items
    step = (len(items) - 1) / (keep - 1) if keep > 1 else 0
    return [items[round(i * step)] for i in range(keep)]


def pytest_configure(config: Any) -> None:
    """Make the suite ask for predictions on Linux, and answer them with the simulator."""
    import coremltools
    import coremltools.models.utils as model_utils
    from coremltools.converters.mil import testing_utils

    def mac_version() -> tuple[int, ...]:
        return (15, 2)

    model_utils._macos_version = mac_version
    if hasattr(coremltools, "utils"):
        coremltools.utils._macos_version = mac_version
    testing_utils._IS_MACOS = True  # compare_backend predicts only "on a Mac"
    testing_utils.run_core_ml_predict = _simulated_predict

    def predict(self: Any, data: Any, state: Any = None, **_: Any) -> Any:
        return _simulated_predict(self, dict(data), state)

    coremltools.models.MLModel.predict = predict  # the tests that call predict themselves


def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    """Keep ``ANEKIT_SUITE_SAMPLE`` parametrizations of each test function; in ``ane`` mode
    only the fp16-precision ones."""
    mode, keep = os.environ[MODE_ENV], int(os.environ[SAMPLE_ENV])
    by_function: dict[str, list[Any]] = defaultdict(list)
    for item in items:
        if mode == "ane" and _precision(item) != "fp16":
            continue  # the fp16 tests only (a test with no backend has no precision)
        by_function[item.nodeid.split("[", 1)[0]].append(item)
    kept = {id(item) for group in by_function.values() for item in _sampled(group, keep)}
    deselected = [item for item in items if id(item) not in kept]
    items[:] = [item for item in items if id(item) in kept]
    config.hook.pytest_deselected(items=deselected)


def _precision(item: Any) -> str | None:
    """The precision of a test's backend parameter (``BackendConfig`` or a tuple), if any."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    backend = params.get("backend") or params.get("backend_config")
    if backend is None:
        return None
    return getattr(backend, "precision", None) or (
        backend[1] if isinstance(backend, tuple) else None
    )


def pytest_runtest_setup(item: Any) -> None:
    _current.clear()
    _current["file"] = "/".join(Path(str(item.path)).parts[-2:])  # iOS17/test_conv.py
    reason = excluded_reason(item.nodeid)
    if reason:
        _current["excluded"] = reason


def pytest_runtest_logreport(report: Any) -> None:
    """One JSON row per test, after its call (or a failed or skipped setup)."""
    if report.when == "setup" and report.passed:
        return
    if report.when == "teardown":
        return
    row = {
        "test": report.nodeid,
        "file": _current.get("file", report.nodeid.split("::", 1)[0]),
        "outcome": report.outcome,
        "reached": bool(_current.get("reached")),
        "excluded": _current.get("excluded"),
        "xfail": hasattr(report, "wasxfail"),  # the suite expects it to fail (Core ML too)
        "seconds": round(report.duration, 4),
    }
    if report.failed:
        text = str(report.longrepr)
        lines = [line for line in text.splitlines() if line.startswith("E ")]
        row["error"] = (lines[0] if lines else text.splitlines()[-1] if text else "")[:300]
    with open(os.environ[OUT_ENV], "a", encoding="utf-8") as out:
        out.write(json.dumps(row) + "\n")


# --- the runner --------------------------------------------------------------------------


def family(row: dict[str, Any]) -> str:
    """A test's op family: its opset's file and class (``iOS17/test_conv.py::TestConv``)."""
    rest = row["test"].split("[", 1)[0].split("::")
    return f"{row['file']}::{rest[1]}" if len(rest) > 2 else row["file"]


def run_mode(mode: str, opsets: list[str], sample: int, keyword: str | None) -> list[dict]:
    """Run the suite in one mode in a child pytest; its rows."""
    import coremltools

    tests = Path(coremltools.__file__).parent / "converters/mil/mil/ops/tests"
    with tempfile.TemporaryDirectory(prefix="anekit-suite-") as scratch:
        out = Path(scratch) / "rows.jsonl"
        env = {
            **os.environ,
            MODE_ENV: mode,
            OUT_ENV: str(out),
            SAMPLE_ENV: str(sample),
            "PYMIL_TEST_TARGETS": "mlprogram",
            "INCLUDE_MIL_FP32_UNIT_TESTS": "1",
            "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT / "src")]),
        }
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "mil_op_suite",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            scratch,
            "-o",
            "addopts=",
            "-W",
            "ignore",
            *(["-k", keyword] if keyword else []),
            *[str(tests / opset) for opset in opsets],
        ]
        subprocess.run(command, env=env, cwd=scratch, stdout=subprocess.DEVNULL, check=False)
        if not out.exists():
            raise SystemExit(f"the {mode} run wrote no rows: run it by hand to see why")
        return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


def _expected_to_fail(row: dict[str, Any]) -> bool:
    """A test the suite marks as failing on Core ML too (xfail); in records written before
    rows said so, a test skipped after it reached the executor, not by this plugin."""
    if "xfail" in row:
        return bool(row["xfail"])
    return row["reached"] and row["outcome"] == "skipped" and not row["excluded"]


def summarise(rows: list[dict]) -> dict[str, Any]:
    """Pass rate over the tests that reached the executor, less those the suite expects to
    fail (xfail) and those excluded (image inputs, state)."""
    reached = [row for row in rows if row["reached"]]
    counted = [row for row in reached if not _expected_to_fail(row) and not row["excluded"]]
    undefined = [
        row
        for row in reached
        if not _expected_to_fail(row) and row["excluded"] in UNDEFINED.values()
    ]
    passed = sum(1 for row in counted if row["outcome"] == "passed")
    families: dict[str, Counter[str]] = defaultdict(Counter)
    for row in counted:
        families[family(row)][row["outcome"]] += 1
    return {
        "reached": len(reached),
        "expected_to_fail": sum(1 for row in reached if _expected_to_fail(row)),
        "counted": len(counted),
        "passed": passed,
        "pass_rate": passed / len(counted) if counted else None,
        "excluded": dict(Counter(row["excluded"] for row in rows if row["excluded"])),
        # the share of the tests that would count that UNDEFINED keeps out (at most 1 %)
        "undefined_share": len(undefined) / (len(counted) + len(undefined)) if reached else None,
        "not_reached": dict(
            Counter(row["outcome"] for row in rows if not row["reached"] and not row["excluded"])
        ),
        "failing_families": {
            name: {"failed": counts["failed"], "reached": sum(counts.values())}
            for name, counts in sorted(families.items(), key=lambda kv: -kv[1]["failed"])
            if counts["failed"]
        },
    }


def resummarise(path: Path) -> None:
    """Recompute the summaries of the record at ``path`` from its rows, marking the rows
    :data:`UNDEFINED` names (a record written before the exclusion), and write it back."""
    record = json.loads(path.read_text())
    for mode, entry in record["modes"].items():
        rows = entry["rows"]
        for row in rows:
            row["excluded"] = row.get("excluded") or excluded_reason(row["test"])
        record["modes"][mode] = {**summarise(rows), "seconds": entry.get("seconds"), "rows": rows}
        summary = record["modes"][mode]
        rate, share = 100 * summary["pass_rate"], 100 * summary["undefined_share"]
        print(
            f"{mode}: {summary['passed']} of {summary['counted']} ({rate:.1f} %),"
            f" undefined {share:.2f} %"
        )
    record["note"] = (
        "summaries recomputed with bench/mil_op_suite.py --summarise (xfail tests apart; "
        "the tests UNDEFINED names kept out of the denominator)"
    )
    path.write_text(json.dumps(record, indent=1) + "\n")


def _commit() -> str:
    """This checkout's commit, ``-edited`` when its source differs from it."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    return commit + ("-edited" if git("status", "--porcelain", "--", "src", "bench") else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=[*MODES, "both"], default="both")
    parser.add_argument("--sample", type=int, default=20, help="parametrizations per test")
    parser.add_argument("--opsets", default=",".join(OPSETS))
    parser.add_argument("-k", dest="keyword", help="pytest -k expression")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--summarise",
        type=Path,
        metavar="RECORD",
        help="recompute a record's summaries from its rows (with today's exclusions) and exit",
    )
    args = parser.parse_args()
    if args.summarise:
        resummarise(args.summarise)
        return
    opsets = [name.strip() for name in args.opsets.split(",") if name.strip()]
    unknown = sorted(set(opsets) - set(OPSETS))
    if unknown:
        parser.error(f"unknown opsets {', '.join(unknown)}; choose from {', '.join(OPSETS)}")
    if args.sample < 1:
        parser.error("--sample must be at least 1")
    modes = list(MODES) if args.mode == "both" else [args.mode]
    record: dict[str, Any] = {
        "script": "bench/mil_op_suite.py",
        "command": " ".join(["python", "bench/mil_op_suite.py", *sys.argv[1:]]),
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"{platform.system()} {platform.release()}",
        "anekit": _commit(),
        "settings": {"opsets": opsets, "sample": args.sample, "keyword": args.keyword},
        "modes": {},
    }
    for mode in modes:
        start = time.perf_counter()
        print(f"[{mode}] running the suite ...", file=sys.stderr, flush=True)
        rows = run_mode(mode, opsets, args.sample, args.keyword)
        summary = summarise(rows)
        summary["seconds"] = round(time.perf_counter() - start, 1)
        record["modes"][mode] = {**summary, "rows": rows}
        rate = summary["pass_rate"]
        print(
            f"\n## {mode} mode: {summary['passed']} of {summary['counted']} passed "
            f"({'-' if rate is None else f'{100 * rate:.1f} %'}), {summary['seconds']} s"
        )
        print(
            f"excluded: {summary['excluded']}; never reached the executor: {summary['not_reached']}"
        )
        print("\n| test family | failed | reached |\n|---|--:|--:|")
        for name, counts in summary["failing_families"].items():
            print(f"| {name} | {counts['failed']} | {counts['reached']} |")
    path = args.json or HERE / "results" / f"mil-op-suite-{record['date']}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"\nJSON: {path}")


if __name__ == "__main__":
    main()
