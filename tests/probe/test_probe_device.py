"""``anekit probe`` on a Mac, with coremltools' compiler and loader and Core ML's compute
plan as the contract-enforcing stand-ins of tests/standins.py: the "device" computes
with the simulator's fp16 numerics, the plan places ops as each test says. The real
path is unverified on hardware (no Mac in CI); the macos-marked test runs it there."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest
from click.testing import CliRunner

from anekit import probe
from anekit.analysis import compute_plan
from anekit.cli import cli
from anekit.errors import ProbeError
from anekit.probe.cases import case, t
from anekit.probe.measure import measure
from anekit.probe.report import ProbeReport
from standins import CoreMLComputePlan, CoreMLTools, simulated_device


@pytest.fixture
def mac(monkeypatch: pytest.MonkeyPatch) -> CoreMLTools:
    """macOS 15.5 on an Apple M2: the plan puts ``log`` on the CPU, every other op on the ANE."""
    monkeypatch.setattr(compute_plan, "core_ml_runtime_available", lambda: True)
    monkeypatch.setattr(compute_plan, "chip", lambda: "Apple M2")
    CoreMLComputePlan(
        place=lambda function, op: "cpu" if op.operator_name == "log" else "ane"
    ).install(monkeypatch)
    return CoreMLTools(compute=simulated_device()).install(monkeypatch)


def test_each_op_is_compiled_placed_and_run_on_core_ml(mac: CoreMLTools, tmp_path: Path) -> None:
    report = probe.run(["relu", "log"], isolate=False)
    assert not report.simulated and report.compute_units == "CPU_AND_NE"
    assert report.machine["family"] == "a15"
    relu, log = report.results
    assert (relu.status, relu.device, relu.placement) == ("ok", "ane", {"result": "ane"})
    assert (log.status, log.device) == ("ok", "cpu")
    assert relu.rel_error == 0.0 and log.rel_error is not None and 0 < log.rel_error < 1e-3
    # compiled once each, to a .mlmodelc beside its package, and loaded for CPU_AND_NE
    assert [Path(source).name for source, _ in mac.compiles] == ["relu.mlpackage", "log.mlpackage"]
    assert all(str(destination).endswith(".mlmodelc") for _, destination in mac.compiles)
    assert {str(load.compute_units) for load in mac.loads} == {"ComputeUnit.CPU_AND_NE"}


def test_wrong_values_on_the_device_are_a_mismatch(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(compute_plan, "core_ml_runtime_available", lambda: True)
    CoreMLComputePlan().install(monkeypatch)
    CoreMLTools(compute=simulated_device(offset=0.5)).install(monkeypatch)
    result = measure(case("relu", t(1, 64, 1, 64)), tmp_path)
    assert (result.status, result.device) == ("mismatch", "ane")
    assert result.rel_error is not None and result.rel_error > 0.1
    assert result.message is not None and "> tolerance 0.01" in result.message


def test_a_compiler_failure_is_reported_with_its_stage(mac: CoreMLTools, tmp_path: Path) -> None:
    mac.fail_compile = "ANECCompile() FAILED"
    result = measure(case("relu", t(1, 64, 1, 64)), tmp_path)
    assert (result.status, result.stage) == ("failed", "compile")
    assert result.message == "RuntimeError: Error compiling model: ANECCompile() FAILED"


def test_off_macos_the_probe_says_how_to_run_it_here() -> None:
    if compute_plan.available():
        pytest.skip("this machine has Core ML")
    outcome = CliRunner().invoke(cli, ["probe", "relu", "--json"])
    assert outcome.exit_code == 2
    assert "anekit probe --sim" in outcome.output and "ProbeError" in outcome.output


def test_a_report_round_trips_through_its_file(mac: CoreMLTools, tmp_path: Path) -> None:
    out = tmp_path / "probe.json"
    outcome = CliRunner().invoke(cli, ["probe", "relu", "log", "--in-process", "--out", str(out)])
    assert outcome.exit_code == 0, outcome.output
    report = ProbeReport.load(out)
    assert [(r.op, r.status, r.device) for r in report.results] == [
        ("relu", "ok", "ane"),
        ("log", "ok", "cpu"),
    ]
    assert "contribute it: anekit ops --from-probe" in outcome.output


@pytest.mark.macos
def test_on_this_mac_relu_runs_on_the_neural_engine() -> None:
    (result,) = probe.run(["relu"]).results
    assert result.status == "ok", result.message
    assert result.device == "ane"


def test_the_direct_path_probes_each_op_in_the_private_compiler(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``anekit probe --direct`` through the stand-in framework: each op compiled, loaded
    and run by it (the simulator as the device); a refusal names the compile stage; the
    report is labelled as the direct path's and cannot change the op table."""
    from anekit.backends import direct
    from anekit.probe import contribute
    from anekit.probe.report import DIRECT_UNITS
    from standins import simulated_ane

    stand_in = simulated_ane(monkeypatch)
    out = tmp_path / "direct.json"
    outcome = CliRunner().invoke(
        cli, ["probe", "relu", "exp", "--direct", "--in-process", "--out", str(out)]
    )
    assert outcome.exit_code == 0, outcome.output
    report = ProbeReport.load(out)
    assert report.compute_units == DIRECT_UNITS and not report.simulated
    assert [(r.op, r.status, r.device) for r in report.results] == [
        ("relu", "ok", "ane"),
        ("exp", "ok", "ane"),
    ]
    assert [model.steps for model in stand_in.models] == [["compile", "load", "evaluate"]] * 2
    assert "contribute it" not in outcome.output
    with pytest.raises(ProbeError, match="direct ANE path"):
        contribute.apply(report, contribute.table_path().read_text())
    monkeypatch.setenv("ANEKIT_DIRECT_COMPILE_BUDGET", str(direct._compiles + 1))
    with pytest.raises(ProbeError, match=r"takes 2 ANE compiles and it has 1 left.*worker"):
        probe.run(["relu", "exp"], direct=True, isolate=False)
    stand_in.refuse = "compile"
    (refused,) = probe.run(["relu"], direct=True, isolate=False).results
    assert (refused.status, refused.stage) == ("failed", "compile")
    assert refused.message is not None and "refused to compile: ANECCompile" in refused.message


def test_off_macos_the_direct_probe_says_why() -> None:
    if platform.system() == "Darwin":
        pytest.skip("a Mac")
    with pytest.raises(ProbeError, match="probe --direct: the direct ANE path needs macOS"):
        probe.run(["relu"], direct=True)
    with pytest.raises(ProbeError, match="not both"):
        probe.run(["relu"], direct=True, simulate=True)


@pytest.mark.macos
def test_on_this_mac_each_direct_probe_worker_has_a_budget_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A budget of one compile a process: every op still runs, each in a fresh worker."""
    from anekit.backends.direct import unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    monkeypatch.setenv("ANEKIT_DIRECT_COMPILE_BUDGET", "1")
    results = probe.run(["relu", "exp", "add"], direct=True).results
    assert [(r.op, r.status, r.device) for r in results] == [
        ("relu", "ok", "ane"),
        ("exp", "ok", "ane"),
        ("add", "ok", "ane"),
    ], [r.message for r in results]
