"""``anekit bench``: every column this machine has, measured on the seed-003 workloads and
the embedding model (small sizes here); a column it lacks says why; a column that fails is
a cell, not a crash."""

from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from anekit import bench
from anekit.cli import cli
from standins import CoreMLTools, simulated_device

ON_MAC = platform.system() == "Darwin"


@pytest.fixture(scope="module")
def result() -> bench.BenchResult:
    return bench.run(size="small", repeat=2, passes=3, warmup=1)


def test_the_rows_are_the_seed_003_workloads_scaled_down() -> None:
    names = [workload.name for workload in bench.workloads("small")]
    assert names == [
        "FFN block D=64 H=192 T=32",
        "x·W 32x128·128x128",
        "x·W 128x128·128x128",
        "x·W 256x256·256x256",
    ]
    full = bench.workloads("full")
    assert full[0].name == "FFN block D=512 H=1536 T=256"
    assert full[0].flops == 6 * 256 * 512 * 1536
    assert full[-1].flops == 2 * 2048**3
    with pytest.raises(ValueError, match="size must be"):
        bench.workloads("medium")


@pytest.mark.skipif(ON_MAC, reason="Core ML is there on a Mac")
def test_core_ml_columns_off_macos_are_unavailable_with_the_reason(
    result: bench.BenchResult,
) -> None:
    for _, cells in result.rows:
        for key in ("ane", "gpu"):
            reason = cells[key].reason
            assert reason is not None and "macOS" in reason
            assert cells[key].passes == []


def test_each_available_column_is_timed_and_checked_against_float64(
    result: bench.BenchResult,
) -> None:
    # NumPy fp32 is within fp32 rounding; ONNX Runtime computes in fp32 but the traced
    # program's outputs are fp16 (2^-11 relative); the simulator adds fp16 inside.
    bounds = {"numpy": 1e-5, "onnxruntime": 6e-4, "simulator": 5e-3}
    for workload, cells in result.rows[:-1]:
        for key, bound in bounds.items():
            cell = cells[key]
            assert cell.reason is None, (workload.name, key, cell.reason)
            assert len(cell.passes) == 3 and all(len(times) == 2 for times in cell.passes)
            assert cell.rel_error is not None and cell.rel_error < bound, (workload.name, key)
            data = cell.to_json(workload.flops)
            assert data["calls"] == 6
            assert data["gflops"] == pytest.approx(workload.flops / (data["median_ms"] / 1e3) / 1e9)
            low, high = data["spread_ms"]
            assert 0 < low <= high
        # fp16 inside makes the simulator measurably less exact than fp32 NumPy
        simulated, exact = cells["simulator"].rel_error, cells["numpy"].rel_error
        assert simulated is not None and exact is not None and simulated > 10 * exact


def test_on_a_mac_the_core_ml_columns_compile_once_and_run_on_their_units(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """coremltools and Core ML as the contract-enforcing stand-ins (the "device" is the
    simulator): each Core ML column compiles the program once, loads it for its compute
    units, and its cells are timed and checked like the others."""
    from anekit import runtimes

    monkeypatch.setattr(runtimes, "core_ml_reason", lambda **_: None)  # as on a Mac
    tools = CoreMLTools(compute=simulated_device()).install(monkeypatch)
    every = bench.workloads
    monkeypatch.setattr(bench, "workloads", lambda size: every(size)[:2])
    result = bench.run(size="small", columns=["ane", "gpu"], repeat=1, passes=3, model=False)
    for workload, cells in result.rows:
        for key in ("ane", "gpu"):
            cell = cells[key]
            assert cell.reason is None and len(cell.passes) == 3, (workload.name, key)
            assert cell.rel_error is not None and 1e-5 < cell.rel_error < 5e-3  # fp16 inside
    assert len(tools.compiles) == 4  # one per workload and column, not one per call
    assert all(str(destination).endswith(".mlmodelc") for _, destination in tools.compiles)
    units = [str(load.compute_units) for load in tools.loads]
    assert units == ["ComputeUnit.CPU_AND_NE", "ComputeUnit.CPU_AND_GPU"] * 2


def test_the_embedding_row_runs_each_columns_encoder(result: bench.BenchResult) -> None:
    workload, cells = result.rows[-1]
    assert isinstance(workload, bench.ModelWorkload)
    assert workload.name == "all-MiniLM-L6-v2 embed 4x32"
    assert [len(ids) for ids in workload.token_ids] == [32] * 4
    assert workload.flops == 2.0 * 4 * 6 * (32 * (4 * 384**2 + 2 * 384 * 1536) + 2 * 32**2 * 384)
    # The reference is the fp32 NumPy encoder; ONNX Runtime fp32 agrees to fp32 rounding,
    # the fp16 package in the simulator to fp16's.
    errors = {key: cells[key].rel_error for key in ("numpy", "onnxruntime", "simulator")}
    assert errors["numpy"] == 0.0
    assert errors["onnxruntime"] is not None and errors["onnxruntime"] < 1e-5
    assert errors["simulator"] is not None and 1e-4 < errors["simulator"] < 1e-2
    assert result.to_json()["rows"][-1]["reference"] == "the fp32 NumPy encoder"


def test_the_markdown_table_has_every_column_and_row(result: bench.BenchResult) -> None:
    text = bench.markdown(result)
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| workload |"))
    # every column but the experimental direct path, which runs only when named
    assert [cell.strip() for cell in header.strip("|").split("|")][1:] == [
        bench.COLUMNS[key] for key in ("ane", "gpu", "numpy", "onnxruntime", "simulator")
    ]
    rows = [line for line in lines if line.startswith(("| FFN", "| x·W", "| all-MiniLM"))]
    assert len(rows) == 5
    for line in rows[:-1]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert len(cells) == 1 + len(bench.DEFAULT_COLUMNS)
        numpy_cell = cells[1 + list(bench.DEFAULT_COLUMNS).index("numpy")]
        assert "GFLOP/s" in numpy_cell
        assert numpy_cell.endswith(tuple(f"e-0{d}" for d in range(5, 10)))  # fp32-exact
    assert "simulated, not a device figure" in text
    assert "openblas" in text.lower() or "mkl" in text.lower() or "accelerate" in text.lower()
    if not ON_MAC:
        assert "- ANE (Core ML, CPU_AND_NE): backend 'coreml' cannot run here" in text


def test_a_column_that_fails_is_a_cell_that_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    real = bench._caller

    def caller(column: str, workload: Any, program: Any) -> Any:
        if column == "onnxruntime":
            raise RuntimeError("no lowering for this op")
        return real(column, workload, program)

    monkeypatch.setattr(bench, "_caller", caller)
    every = bench.workloads
    monkeypatch.setattr(bench, "workloads", lambda size: every(size)[:1])
    result = bench.run(
        size="small", columns=["numpy", "onnxruntime"], repeat=1, passes=1, model=False
    )
    ((_, cells),) = result.rows
    assert cells["onnxruntime"].reason == "failed: RuntimeError: no lowering for this op"
    assert cells["numpy"].reason is None and cells["numpy"].median_ms > 0
    assert "| failed |" in bench.markdown(result)


def test_a_column_that_fails_after_its_warm_up_is_a_cell_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = bench._caller

    def caller(column: str, workload: Any, program: Any) -> Any:
        call = real(column, workload, program)
        count = [0]

        def flaky() -> Any:
            count[0] += 1
            if column == "simulator" and count[0] > 2:
                raise MemoryError("out of memory in pass 1")
            return call()

        return flaky

    monkeypatch.setattr(bench, "_caller", caller)
    every = bench.workloads
    monkeypatch.setattr(bench, "workloads", lambda size: every(size)[:1])
    result = bench.run(
        size="small", columns=["numpy", "simulator"], repeat=2, passes=3, warmup=1, model=False
    )
    ((_, cells),) = result.rows
    assert cells["simulator"].reason == "failed: MemoryError: out of memory in pass 1"
    assert cells["simulator"].to_json(1.0) == {
        "available": False,
        "reason": "failed: MemoryError: out of memory in pass 1",
    }
    assert len(cells["numpy"].passes) == 3


def test_the_cli_prints_json_for_the_chosen_columns(tmp_path: Path) -> None:
    saved = tmp_path / "mine.json"
    outcome = CliRunner().invoke(
        cli,
        ["bench", "--size", "small", "--column", "numpy", "--column", "simulator",
         "--repeat", "1", "--passes", "1", "--warmup", "1", "--no-model", "--json",
         "--save", str(saved)],
    )  # fmt: skip
    assert outcome.exit_code == 0, outcome.output
    data = json.loads(outcome.output)
    assert json.loads(saved.read_text()) == data
    assert [column["key"] for column in data["columns"]] == ["numpy", "simulator"]
    assert [column["simulated"] for column in data["columns"]] == [False, True]
    assert data["machine"]["numpy"].startswith(np.__version__)
    assert len(data["rows"]) == 4
    for row in data["rows"]:
        assert set(row["cells"]) == {"numpy", "simulator"}
        assert all(cell["available"] and cell["median_ms"] > 0 for cell in row["cells"].values())


def test_an_unknown_column_is_a_usage_error() -> None:
    outcome = CliRunner().invoke(cli, ["bench", "--column", "tpu"])
    assert outcome.exit_code == 2
    assert "unknown column(s) tpu; choose from ane, gpu, numpy, onnxruntime, simulator" in (
        outcome.output
    )


def test_latency_keeps_single_requests_apart_from_requests_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = bench._caller
    calls: list[list[int]] = []

    def counted(column: str, workload: Any, program: Any) -> Any:
        call = real(column, workload, program)
        count = [0]
        calls.append(count)

        def caller() -> Any:
            count[0] += 1
            return call()

        return caller

    monkeypatch.setattr(bench, "_caller", counted)
    rows = bench.latency(
        size="small", columns=["numpy", "ane"], requests=5, in_flight=2, warmup=1, model=False
    )
    assert len(rows) == 4
    # Per workload, two loaded copies: the first takes the 5 single requests, then both
    # share the 5 requests in flight (3 + 2), each after 1 warm-up call.
    assert [count[0] for count in calls[:2]] == [1 + 5 + 3, 1 + 2]
    for _, cells in rows:
        cell = cells["numpy"]
        data = cell.to_json()
        p50, p95, p99 = (data["latency_ms"][f"p{q}"] for q in (50, 95, 99))
        assert 0 < p50 <= p95 <= p99 and data["latency_calls"] == 5
        assert data["throughput"]["in_flight"] == 2 and data["throughput"]["requests"] == 5
        assert cell.requests_per_second == pytest.approx(5 / cell.seconds)
        if not ON_MAC:
            assert cells["ane"].to_json()["available"] is False
    text = bench.latency_markdown(rows, ["numpy", "ane"])
    assert "req/s at 2 in flight" in text and "p50 / p95 / p99" in text


def test_the_cli_latency_mode_prints_json() -> None:
    outcome = CliRunner().invoke(
        cli,
        ["bench", "--latency", "--size", "small", "--column", "onnxruntime", "--repeat", "2",
         "--passes", "1", "--warmup", "1", "--in-flight", "2", "--no-model", "--json"],
    )  # fmt: skip
    assert outcome.exit_code == 0, outcome.output
    data = json.loads(outcome.output)
    assert data["columns"] == ["onnxruntime"]
    for row in data["rows"]:
        cell = row["cells"]["onnxruntime"]
        assert cell["latency_calls"] == 2 and cell["throughput"]["in_flight"] == 2


def test_the_sweep_walks_the_grid_of_conv1x1_and_matmul_shapes() -> None:
    outcome = CliRunner().invoke(
        cli,
        ["bench", "sweep", "--channels", "64,128", "--sequence", "32", "--column", "numpy",
         "--column", "simulator", "--repeat", "1", "--passes", "1", "--warmup", "1", "--json"],
    )  # fmt: skip
    assert outcome.exit_code == 0, outcome.output
    rows = json.loads(outcome.output)["rows"]
    assert [row["workload"] for row in rows] == [
        "conv1x1 C=64 S=32",
        "conv1x1 C=128 S=32",
        "x·W 32x64·64x64",
        "x·W 32x128·128x128",
    ]
    assert [row["gflop"] for row in rows] == [2 * c * c * 32 / 1e9 for c in (64, 128, 64, 128)]
    for row in rows:
        assert row["cells"]["numpy"]["rel_error"] < 1e-5
        assert 1e-5 < row["cells"]["simulator"]["rel_error"] < 5e-3  # fp16 storage


def test_a_bad_sweep_grid_is_a_usage_error() -> None:
    outcome = CliRunner().invoke(cli, ["bench", "sweep", "--channels", "64,x"])
    assert outcome.exit_code == 2 and "'64,x': comma-separated integers" in outcome.output


def test_the_direct_column_runs_only_when_named_and_never_on_core_ml(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The direct path's column through the stand-in framework (the simulator as the
    device): each workload compiled once and timed; a refusal is a failed cell."""
    from standins import simulated_ane

    assert "direct" not in bench.DEFAULT_COLUMNS and "direct" in bench.COLUMNS
    stand_in = simulated_ane(monkeypatch, row_align=128)
    rows = bench.workloads("small")[:2]
    result = bench.run(columns=["simulator", "direct"], rows=rows, repeat=2, passes=3, warmup=1)
    for _, cells in result.rows:
        cell = cells["direct"]
        assert cell.reason is None and len(cell.passes) == 3
        # the device is the simulator, so the direct column's error is the simulator's
        assert cell.rel_error == cells["simulator"].rel_error
    assert [model.steps[:2] for model in stand_in.models] == [["compile", "load"]] * 2
    assert "experimental" in bench.markdown(result)
    stand_in.refuse = "compile"
    result = bench.run(columns=["direct"], rows=rows[:1], repeat=1, passes=3, warmup=1)
    reason = result.rows[0][1]["direct"].reason
    assert reason is not None
    assert reason.startswith("failed: DirectError: the ANE framework refused to compile")


@pytest.mark.skipif(ON_MAC, reason="the direct path may run on a Mac")
def test_off_macos_the_direct_column_says_why() -> None:
    result = bench.run(columns=["direct"], rows=bench.workloads("small")[:1], passes=3)
    assert result.rows[0][1]["direct"].reason == (
        "backend 'direct' cannot run here: the direct ANE path needs macOS"
    )
