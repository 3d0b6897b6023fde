"""``anekit run`` and ``program.last_run``: what ran where, cold and warm times apart,
I/O shapes and bytes, simulated runs labelled."""

from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result

import anekit
from anekit.backends import RunReport
from anekit.cli import cli


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    weight = np.full((64, 64), 0.01, np.float16)
    program = anekit.compile(lambda x: np.tanh(x @ weight), np.zeros((8, 64), np.float16))
    return Path(program.save(tmp_path_factory.mktemp("run") / "tiny.mlpackage"))


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["run", *args])


def _json(*args: str) -> dict[str, Any]:
    outcome = _run(*args, "--json")
    assert outcome.exit_code == 0, outcome.output
    data: dict[str, Any] = json.loads(outcome.output)
    return data


@pytest.mark.parametrize(
    ("backend", "mode", "simulated"), [("sim", "ane", True), ("onnx", "fp32", False)]
)
def test_the_report_keeps_cold_and_warm_apart(
    package: Path, backend: str, mode: str, simulated: bool
) -> None:
    data = _json(str(package), "--backend", backend, "--mode", mode, "--repeat", "4")
    assert data["backend"] == backend and data["requested"] == mode
    assert data["simulated"] is simulated
    assert data["function"] == "main" and data["source"] == str(package)
    assert data["residency"] is None and data["fell_back"] is None  # no compute plan off a Mac
    warm = data["warm"]
    assert warm["calls"] == 4 and 0 < warm["p50_ms"] <= warm["p95_ms"]
    assert data["load_ms"] is not None and data["cold_ms"] >= data["load_ms"] > 0
    io = {"shape": [8, 64], "dtype": "float16", "bytes": 8 * 64 * 2}
    assert data["inputs"] == [{"name": "x", **io}]
    assert data["outputs"] == [{"name": "output", **io}]


def test_the_text_report_says_a_simulated_run_is_not_a_device_figure(package: Path) -> None:
    outcome = _run(str(package), "--backend", "sim", "--repeat", "2")
    assert outcome.exit_code == 0, outcome.output
    first = outcome.output.splitlines()[0]
    assert first.endswith("(simulated, not a device measurement)")
    assert "warm (2 calls): p50" in outcome.output
    assert "in: x float16[8, 64] (1024 bytes)" in outcome.output


def test_inputs_come_from_the_npz_file(package: Path, tmp_path: Path) -> None:
    np.savez(tmp_path / "in.npz", y=np.ones((8, 64), np.float16))
    outcome = _run(str(package), "--inputs", str(tmp_path / "in.npz"))
    assert outcome.exit_code == 2
    assert "has no array for input(s) x (it has y)" in outcome.output


@pytest.mark.skipif(platform.system() == "Darwin", reason="Core ML is there on a Mac")
def test_core_ml_compute_units_off_macos_are_a_clear_error(package: Path) -> None:
    outcome = _run(str(package), "--compute-units", "CPU_AND_NE")
    assert outcome.exit_code == 2
    assert "backend 'coreml' cannot run here: Core ML exists only on macOS" in outcome.output


def test_compute_units_and_numerics_together_are_a_usage_error(package: Path) -> None:
    for flag in ("--numerics", "--mode"):  # --mode: the older name
        outcome = _run(str(package), "--compute-units", "CPU_AND_GPU", flag, "ane")
        assert outcome.exit_code == 2
        assert "give --compute-units or --numerics, not both" in outcome.output
    outcome = _run(str(package), "--compute-units", "CPU_AND_GPU", "--backend", "sim")
    assert outcome.exit_code == 2 and "applies to Core ML, not --backend sim" in outcome.output


def test_the_cli_offers_core_mls_compute_units() -> None:
    from anekit.backends.coreml import COMPUTE_UNITS
    from anekit.cli.run import run

    (option,) = [param for param in run.params if param.name == "compute_units"]
    assert tuple(option.type.choices) == COMPUTE_UNITS  # type: ignore[attr-defined]


def test_program_last_run_says_what_the_call_loaded_and_moved(package: Path) -> None:
    program = anekit.load(package)
    x = np.ones((8, 64), np.float32)  # cast to the package's float16 on the way in
    program(x, backend="sim")
    first = program.last_run
    assert first is not None and first.function == "main"
    assert first.load_seconds is not None and first.load_seconds > 0
    assert first.inputs == (("x", (8, 64), "float16", 1024),)
    program(x, backend="sim")
    assert program.last_run is not None and program.last_run.load_seconds is None
    program.unload()
    program(x, backend="sim")
    assert program.last_run is not None and program.last_run.load_seconds is not None


def test_latency_and_throughput_are_computed_from_the_warm_calls() -> None:
    from anekit.runs import RunMeasurement

    report = RunReport("sim", "CPU", True, 0.001)
    measured = RunMeasurement("p", report, cold_ms=50.0, load_ms=40.0, warm_ms=(1.0, 3.0))
    assert measured.p50_ms == 2.0 and measured.p95_ms == pytest.approx(2.9)
    assert measured.calls_per_second == pytest.approx(500.0)  # 2 calls in 4 ms


@pytest.mark.parametrize(
    ("residency", "fell_back"),
    [(None, None), ({}, None), ({"ane": 12}, False), ({"ane": 11, "cpu": 1}, True)],
)
def test_fell_back_reads_the_compute_plan(
    residency: dict[str, int] | None, fell_back: bool | None
) -> None:
    report = RunReport("coreml", "ANE", False, 0.001, residency=residency)
    assert report.fell_back is fell_back


@pytest.mark.macos
def test_a_core_ml_run_reports_the_compute_plan(package: Path) -> None:
    data = _json(str(package), "--compute-units", "CPU_AND_NE", "--repeat", "3")
    assert data["backend"] == "coreml" and data["requested"] == "CPU_AND_NE"
    assert data["simulated"] is False
    assert data["residency"] and sum(data["residency"].values()) >= 2


def test_a_core_ml_run_on_a_stand_in_mac_reports_the_plan_and_the_fallback(
    package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """coremltools, Core ML and its compute plan as the contract-enforcing stand-ins (the
    "device" is the simulator; the plan puts the tanh on the CPU): the report says what
    was asked for, where each op ran, and that something fell back."""
    from anekit import runtimes
    from anekit.analysis import compute_plan
    from standins import CoreMLComputePlan, CoreMLTools, simulated_device

    monkeypatch.setattr(runtimes, "core_ml_reason", lambda **_: None)  # as on a Mac
    monkeypatch.setattr(compute_plan, "core_ml_runtime_available", lambda: True)
    tools = CoreMLTools(compute=simulated_device()).install(monkeypatch)
    CoreMLComputePlan(
        place=lambda function, op: "cpu" if op.operator_name == "tanh" else "gpu"
    ).install(monkeypatch)
    data = _json(str(package), "--backend", "coreml", "--compute-units", "CPU_AND_GPU")
    assert (data["backend"], data["requested"], data["simulated"]) == (
        "coreml",
        "CPU_AND_GPU",
        False,
    )
    assert data["residency"]["cpu"] == 1 and data["residency"]["gpu"] >= 1
    assert data["fell_back"] is True
    assert [str(load.compute_units) for load in tools.loads] == ["ComputeUnit.CPU_AND_GPU"]
