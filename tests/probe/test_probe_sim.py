"""``anekit probe --sim``: every op of the op table as its single-op program, saved as a
package and simulated in fp16 numerics against the fp32 result; every op the table marks
as ANE-capable passes (the acceptance test of the probe itself). Worker isolation is
checked with the worker's fault hook."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from anekit import probe
from anekit.analysis import optable
from anekit.cli import cli
from anekit.errors import ProbeError
from anekit.ops import groups
from anekit.probe.cases import CASES, CONSTANT, NOT_PROBED, case, t
from anekit.probe.measure import compare
from anekit.probe.report import ProbeReport
from anekit.probe.worker import FAULT_VARIABLE


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path, int]:
    out = tmp_path_factory.mktemp("probe") / "probe-sim.json"
    outcome = CliRunner().invoke(cli, ["probe", "--sim", "--json", "--out", str(out)])
    return json.loads(outcome.output), out, outcome.exit_code


def test_every_ane_capable_op_passes_in_the_simulator(
    sim_run: tuple[dict[str, Any], Path, int],
) -> None:
    payload, _, exit_code = sim_run
    results = {item["op"]: item for item in payload["results"]}
    failing = {
        op: results[op]["message"]
        for op in optable.load().ane_capable()
        if results[op]["status"] != "ok"
    }
    assert failing == {}
    assert exit_code == 0
    assert payload["simulated"] is True and "simulated" in payload["compute_units"]


def test_the_report_covers_the_whole_table_once_each(
    sim_run: tuple[dict[str, Any], Path, int],
) -> None:
    payload, out, _ = sim_run
    ops = [item["op"] for item in payload["results"]]
    assert ops == sorted(optable.load().ops)
    probed = {item.op for item in CASES}
    table = optable.load()
    constants = {op for op, entry in table.ops.items() if not entry.is_compute}
    assert constants == {"_const_symbolic", "const", *groups.CONSTEXPR}
    assert probed.isdisjoint(NOT_PROBED) and probed.isdisjoint(constants)
    assert probed | set(NOT_PROBED) | constants == set(ops)
    for item in payload["results"]:
        if item["op"] in constants:
            assert (item["status"], item["message"]) == ("not probed", CONSTANT)
        elif item["op"] in NOT_PROBED:
            assert (item["status"], item["message"]) == ("not probed", NOT_PROBED[item["op"]])
        else:  # every case the probe has passes, not only the ANE-capable ones
            assert item["status"] == "ok", (item["op"], item["message"])
    assert ProbeReport.load(out).to_json() == payload


def test_fp16_numerics_are_compared_with_fp32(sim_run: tuple[dict[str, Any], Path, int]) -> None:
    """A probe comparing fp32 with fp32 would find no error anywhere: rounding ops show
    fp16's, moves of values show none."""
    results = {item["op"]: item for item in sim_run[0]["results"]}
    for op in ("add", "exp", "matmul", "softmax", "layer_norm", "conv"):
        assert 1e-5 < results[op]["rel_error"] <= results[op]["tolerance"], op
    for op in ("relu", "transpose", "reshape", "concat", "max_pool"):
        assert results[op]["rel_error"] == 0.0, op
    # an op coremltools folds into a constant ran nowhere: it is no evidence of placement
    assert results["fill"]["device"] is None and "folded" in results["fill"]["message"]
    assert results["concat"]["device"] == "simulated"  # a tuple of runtime inputs


def test_an_op_outside_its_tolerance_fails_the_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    strict = case("add", t(1, 64, 1, 64), t(1, 64, 1, 64), tolerance=1e-9)
    monkeypatch.setattr(probe, "by_op", lambda: {"add": strict})
    outcome = CliRunner().invoke(cli, ["probe", "--sim", "add"])
    assert outcome.exit_code == 1
    assert "add: mismatch (relative error" in outcome.output
    assert "ANE-capable ops that did not pass: add" in outcome.output


def test_unknown_ops_are_refused_by_name() -> None:
    with pytest.raises(ProbeError, match="not in the op table: addd, relux"):
        probe.run(["relu", "addd", "relux"], simulate=True)


def test_compare_names_what_is_wrong() -> None:
    names = ["result"]
    want = np.array([[1.0, 2.0, 4.0]], np.float32)
    error, problem = compare([want + np.float32(0.04)], [want], names)
    assert problem is None and error == pytest.approx(0.01)
    _, problem = compare([want[:, :2]], [want], names)
    assert problem == "result: shape (1, 2), expected (1, 3)"
    _, problem = compare([np.array([[1.0, np.inf, 4.0]], np.float32)], [want], names)
    assert problem == "result: 1 non-finite values where fp32 is finite"
    ints = np.array([1, 2, 3], np.int32)
    _, problem = compare([np.array([1, 2, 4], np.int32)], [ints], names)
    assert problem == "result: 1 of 3 values differ from the fp32 result"


def test_a_crashing_op_costs_its_worker_not_the_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_VARIABLE, "add:save:crash")
    report = probe.run(["add", "relu"], simulate=True, isolate=True)
    add, relu = report.results
    assert (add.status, add.stage) == ("crashed", "save")
    assert add.message is not None and "signal SIGABRT" in add.message
    assert (relu.status, relu.device) == ("ok", "simulated")  # in the next worker


@pytest.mark.slow  # waits out the timeout
def test_a_hanging_op_is_killed_at_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_VARIABLE, "relu:run:hang")
    (result,) = probe.run(["relu"], simulate=True, isolate=True, timeout=20).results
    assert (result.status, result.stage) == ("timeout", "run")
    assert result.message == "the worker ran past 20 s (stage run) and was killed"
