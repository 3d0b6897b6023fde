"""``anekit probe --coreai``: every op of the op table with a Core AI lowering, as its
single-op program written as a Core AI asset and run by Core AI's CPU reference runtime
(real, not a stand-in; Apple's CPU executor, never an ANE figure), against the
simulator's fp32 mode; the other ops listed with why they do not lower."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

pytest.importorskip("coreai.authoring", reason="the coreai extra")

import anekit.ops.defs  # noqa: F401  (every op record and its lowerings)
from anekit.analysis import optable
from anekit.cli import cli
from anekit.ops.lowering import NotLowerable
from anekit.ops.registry import OPS
from anekit.probe import coreai as probe_coreai
from anekit.probe.cases import CONSTANT, by_op
from anekit.runtimes import COREAI_EXTRA

RUNTIME = "Core AI CPU reference runtime (not an ANE)"


def _lowered() -> set[str]:
    """The op table's ops whose record has a Core AI lowering, read from the registry."""
    return {op for op in optable.load().ops if op in OPS and "coreai" in OPS[op].lowerings}


@pytest.fixture(scope="module")
def coreai_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path, int]:
    out = tmp_path_factory.mktemp("probe") / "probe-coreai.json"
    outcome = CliRunner().invoke(cli, ["probe", "--coreai", "--json", "--out", str(out)])
    return json.loads(outcome.stdout), out, outcome.exit_code


def test_every_case_of_a_lowered_op_runs_on_core_ai_and_passes(
    coreai_run: tuple[dict[str, Any], Path, int],
) -> None:
    payload, _, exit_code = coreai_run
    results = {item["op"]: item for item in payload["results"]}
    probed = _lowered() & set(by_op())
    assert len(probed) >= 30  # the elementwise ops, activations, matmul, conv, ... at least
    refused = {op for op in probed if results[op]["status"] == "refused"}
    for op in refused:  # a refusal names its reason
        assert results[op]["message"], op
    failing = {
        op: (results[op]["status"], results[op]["message"])
        for op in probed - refused
        if results[op]["status"] != "ok"
    }
    assert failing == {}
    assert exit_code == 0
    assert payload["runtime"] == RUNTIME and payload["coreai_core"]
    for op in probed - refused:  # in fp32, the case's values widened: fp32's bound
        item = results[op]
        assert "float16" not in item["program"], op
        assert item["scaled_error"] <= item["tolerance"], op
    # cast to fp16 is the program's own rounding: Core AI stores fp16, fp32 mode does not
    assert results["cast"]["abs_error"] > 0
    assert results["cast"]["tolerance"] == probe_coreai.FP16_TOLERANCE
    assert results["exp"]["tolerance"] == probe_coreai.FP32_TOLERANCE


def test_the_report_counts_what_lowers_and_says_why_the_rest_do_not(
    coreai_run: tuple[dict[str, Any], Path, int],
) -> None:
    payload, out, _ = coreai_run
    table = optable.load()
    lowered = _lowered()
    ops = [item["op"] for item in payload["results"]]
    assert ops == sorted(table.ops)  # the whole table, once each
    summary = payload["summary"]
    assert summary["ops"] == len(table.ops)
    assert summary["lowered"] == len(lowered | {"const"})  # const: Core AI constants
    assert summary["no_lowering"] == sorted(set(table.ops) - lowered - {"const"})
    assert (
        summary["passed"]
        == payload["counts"]["ok"]
        == len(lowered & set(by_op())) - len(summary["refused"])
    )
    assert summary["problems"] == []
    assert sum(payload["counts"].values()) == len(table.ops)
    for item in payload["results"]:
        if item["op"] not in lowered and item["op"] != "const":
            assert (item["status"], item["message"]) == ("no lowering", "no Core AI lowering")
        elif item["op"] not in by_op():  # the weights ops that lower: no case of their own
            assert item["status"] == "not probed" and item["message"], item["op"]
    lowered_constants = {op for op in lowered if not table.ops[op].is_compute}
    assert {op: summary["not_probed"][op] for op in lowered_constants} == dict.fromkeys(
        lowered_constants, CONSTANT
    )
    assert json.loads(out.read_text(encoding="utf-8")) == payload


def test_a_wrong_lowering_is_caught_with_exit_status_1(monkeypatch: pytest.MonkeyPatch) -> None:
    """sin lowered as cos runs and disagrees; a lowering that raises fails; exp still
    passes."""
    monkeypatch.setitem(OPS["sin"].lowerings, "coreai", OPS["cos"].lowerings["coreai"])

    def broken(builder: Any, op: Any) -> Any:
        raise RuntimeError("a lowering with a bug")

    monkeypatch.setitem(OPS["tanh"].lowerings, "coreai", broken)
    outcome = CliRunner().invoke(cli, ["probe", "--coreai", "sin", "tanh", "exp"])
    assert outcome.exit_code == 1, outcome.output
    assert "sin: mismatch (scaled error" in outcome.output
    assert "tanh: failed (" in outcome.output and "a lowering with a bug" in outcome.output
    assert (
        f"Core AI lowerings that disagree with the simulator ({RUNTIME}): sin, tanh"
        in outcome.output
    )
    assert f"Op probe on the {RUNTIME}" in outcome.stdout  # the table says what ran
    assert "3 op types: 3 lower to Core AI, 3 of them probed, 1 pass" in outcome.stdout


def test_a_refused_case_is_reported_with_its_reason_and_is_no_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuses(builder: Any, op: Any) -> Any:
        raise NotLowerable("a variant Core AI lacks")

    monkeypatch.setitem(OPS["relu"].lowerings, "coreai", refuses)
    outcome = CliRunner().invoke(cli, ["probe", "--coreai", "--json", "relu", "abs"])
    assert outcome.exit_code == 0, outcome.output
    payload = json.loads(outcome.stdout)
    relu, absolute = payload["results"]
    assert (relu["status"], relu["message"]) == ("refused", "a variant Core AI lacks")
    assert absolute["status"] == "ok"
    assert payload["summary"]["refused"] == {"relu": "a variant Core AI lacks"}
    assert payload["summary"]["lowered"] == 2 and payload["summary"]["passed"] == 1


def test_the_programs_take_the_values_probe_sim_feeds_widened_to_fp32(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from anekit.package import coreai as emitter

    seen: dict[str, np.ndarray] = {}
    run = emitter.run_coreai

    def recording(path: Any, feeds: dict[str, np.ndarray], function: str = "main") -> Any:
        seen.update(feeds)
        return run(path, feeds, function)

    monkeypatch.setattr(emitter, "run_coreai", recording)
    case = by_op()["pow"]
    result = probe_coreai.measure(case, tmp_path)
    assert result.status == "ok", result.message
    drawn = case.arrays(0)
    assert [value.dtype for value in seen.values()] == [np.dtype(np.float32)] * 2
    for got, want in zip(seen.values(), drawn, strict=True):
        assert want.dtype == np.float16
        np.testing.assert_array_equal(got, want.astype(np.float32))


def test_without_the_extra_it_exits_2_naming_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "coreai.authoring", None)  # import raises ImportError
    outcome = CliRunner().invoke(cli, ["probe", "--coreai"])
    assert outcome.exit_code == 2
    lines = outcome.output.strip().splitlines()
    assert len(lines) == 1 and COREAI_EXTRA in lines[0], outcome.output
    outcome = CliRunner().invoke(cli, ["probe", "--coreai", "--json"])
    assert outcome.exit_code == 2
    assert COREAI_EXTRA in json.loads(outcome.stdout)["message"]


@pytest.mark.parametrize("other", ["--sim", "--direct"])
def test_coreai_excludes_the_other_modes(other: str) -> None:
    outcome = CliRunner().invoke(cli, ["probe", "--coreai", other, "relu"])
    assert outcome.exit_code == 2
    assert "choose one of --sim, --direct and --coreai" in outcome.output
