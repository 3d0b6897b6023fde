"""``anekit selftest``: every section runs or says why not; one failing section never
stops the others; no section needs the network (tests run with the hubs offline)."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from anekit import selftest
from anekit.cli import cli

ON_MAC = platform.system() == "Darwin"


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    outcome = CliRunner().invoke(cli, ["selftest", "--json"])
    assert outcome.exit_code == 0, outcome.output
    data: dict[str, Any] = json.loads(outcome.output)
    return {section["name"]: section for section in data["sections"]}


def test_every_section_runs_in_order(report: dict[str, Any]) -> None:
    assert list(report) == ["platform", "lanes", "placement", "bench", "cache"]
    assert {section["status"] for section in report.values()} == {"ok"}
    assert report["platform"]["machine"]["anekit"]


def test_each_lane_is_admitted_or_skipped_with_why(report: dict[str, Any]) -> None:
    lanes = {lane["lane"]: lane for lane in report["lanes"]["lanes"]}
    assert set(lanes) == {"ane", "gpu", "cpu", "numpy", "sim", "direct"}
    assert lanes["cpu"]["state"] == "ready" and lanes["cpu"]["min_cosine"] >= 0.98
    assert lanes["numpy"]["state"] == "ready" and lanes["numpy"]["min_cosine"] >= 0.999
    assert lanes["sim"]["state"] == "skipped"
    assert "anekit lanes --lane sim" in lanes["sim"]["reason"]
    assert lanes["direct"]["state"] == "skipped"  # experimental: never started unasked
    if not ON_MAC:
        assert lanes["ane"]["state"] == "skipped" and "macOS" in lanes["ane"]["reason"]
        assert "needs macOS" in lanes["direct"]["reason"]


def test_placement_reports_every_bucket_of_the_package(report: dict[str, Any]) -> None:
    placement = report["placement"]
    buckets = placement["buckets"]
    assert list(buckets) == ["seq128", "seq192", "seq256", "seq320", "seq384", "seq512"]
    for bucket in buckets.values():
        assert bucket["compute_ops"] > 0 and bucket["expected_on_ane"] == bucket["compute_ops"]
    if not ON_MAC:
        assert placement["compute_plan"] == "Core ML's compute plan exists only on macOS"


def test_on_a_mac_placement_adds_core_mls_plan_per_bucket(
    report: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """coremltools' compiler and Core ML's compute plan as the contract-enforcing
    stand-ins (macOS 15.5; the plan puts each bucket's first softmax on the CPU)."""
    from anekit import selftest
    from anekit.analysis import compute_plan
    from standins import CoreMLComputePlan, CoreMLTools

    moved: set[str] = set()

    def place(function: str, op: Any) -> str:
        if op.operator_name == "softmax" and function not in moved:
            moved.add(function)
            return "cpu"
        return "ane"

    monkeypatch.setattr(compute_plan, "core_ml_runtime_available", lambda: True)
    tools = CoreMLTools().install(monkeypatch)
    CoreMLComputePlan(place=place).install(monkeypatch)
    placement = selftest._placement(None)
    assert placement["compute_plan"] == "CPU_AND_NE"
    for name, bucket in placement["buckets"].items():
        plan = bucket["compute_plan"]
        assert plan["cpu"] == 1 and plan["cpu"] + plan["ane"] == bucket["compute_ops"], name
    assert [Path(source).name for source, _ in tools.compiles] == [Path(placement["package"]).name]


def test_the_short_bench_and_the_cache_are_reported(report: dict[str, Any]) -> None:
    rows = report["bench"]["bench"]["rows"]
    assert rows[0]["workload"] == "FFN block D=64 H=192 T=32"
    assert "| workload |" in report["bench"]["table"]
    cache = report["cache"]
    assert cache["packages_dir"] == os.environ["ANEKIT_PACKAGES"]
    placed = os.path.basename(report["placement"]["package"])
    assert placed in [item["name"] for item in cache["packages"]]


def test_a_failing_section_is_reported_and_the_rest_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> dict[str, Any]:
        raise RuntimeError("the BLAS crashed")

    monkeypatch.setattr(selftest, "_bench", broken)
    monkeypatch.setattr(selftest, "_lanes", lambda: {"lanes": []})
    monkeypatch.setattr(selftest, "_placement", lambda progress: {"buckets": {}})
    outcome = CliRunner().invoke(cli, ["selftest", "--json"])
    assert outcome.exit_code == 1
    sections = {item["name"]: item for item in json.loads(outcome.output)["sections"]}
    assert sections["bench"]["status"] == "failed"
    assert sections["bench"]["why"] == "RuntimeError: the BLAS crashed"
    assert sections["cache"]["status"] == "ok"


def test_without_the_model_its_sections_are_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    from anekit.models import registry

    monkeypatch.setattr(registry, "default_folder", lambda: None)
    monkeypatch.setattr(selftest, "_bench", lambda: {"table": "", "bench": {}})
    sections = {section.name: section for section in selftest.run()}
    for name in ("lanes", "placement"):
        assert sections[name].status == "skipped"
        assert sections[name].why == "the default model is not installed here (anekit models fetch)"
    assert "### lanes: skipped (the default model is not installed here" in selftest.markdown(
        list(sections.values())
    )
