"""``anekit ops --from-probe REPORT``: a Mac's probe report becomes the op table's verdicts
for its chip family, in the table file (comments kept) and docs/op-support.md."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from anekit.analysis import optable
from anekit.analysis.docs import op_support_markdown
from anekit.cli import cli
from anekit.errors import ProbeError
from anekit.probe import contribute
from anekit.probe.report import OpResult, ProbeReport

M2 = {"chip": "Apple M2", "os": "Darwin 24.5.0 (macOS 15.5)", "family": "a15"}


def _report(*results: OpResult, machine: dict[str, object] | None = None) -> ProbeReport:
    return ProbeReport(
        machine=dict(M2 if machine is None else machine),
        compute_units="CPU_AND_NE",
        simulated=False,
        created="2026-12-01T10:00:00+00:00",
        results=list(results),
    )


def _on(op: str, device: str, status: str = "ok", **fields: object) -> OpResult:
    return OpResult(op, status, device=device, rel_error=fields.pop("rel_error", 1e-4), **fields)  # type: ignore[arg-type]


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    table = tmp_path / "ops.toml"
    shutil.copyfile(contribute.table_path(), table)
    docs = tmp_path / "op-support.md"
    docs.write_text("stale\n")
    return table, docs


def _verdict(text: str, op: str, family: str) -> str:
    entry = optable.parse(text).entry(op)
    assert entry is not None
    return entry.for_family(family).verdict


def test_what_the_probe_saw_becomes_the_familys_verdict(files: tuple[Path, Path]) -> None:
    table_file, _ = files
    text = table_file.read_text()
    assert (_verdict(text, "log", "a15"), _verdict(text, "sin", "a15")) == ("ane", "cpu")
    report = _report(
        _on("relu", "ane"),  # confirmed
        _on("log", "cpu"),  # the table says ANE; Core ML put it on the CPU
        _on("sin", "ane"),  # the table says CPU; it ran on the ANE
        _on("abs", "ane", "failed", stage="save", message="anekit's own problem"),
        _on("exp", "ane", "mismatch", rel_error=0.3, message="relative error 0.3 > 0.01"),
        _on("acos", "ane", "crashed", stage="compile", message="the worker died (SIGABRT)"),
    )
    new, changes = contribute.apply(report, text)
    by_op = {change.op: change for change in changes}
    assert set(by_op) == {"relu", "log", "sin", "exp", "acos"}  # abs: no evidence
    assert [op for op, change in by_op.items() if change.changed] == ["log", "sin"]
    assert _verdict(new, "log", "a15") == "cpu" and _verdict(new, "log", "a14") == "ane"
    assert _verdict(new, "sin", "a15") == "ane" and _verdict(new, "sin", "a17") == "cpu"
    assert _verdict(new, "acos", "a15") == "decompose"  # already not on the ANE as is
    exp = optable.parse(new).entry("exp")
    assert exp is not None and exp.dispute is not None and "0.3" in exp.dispute
    assert by_op["exp"].disputed and _verdict(new, "exp", "a15") == "ane"
    relu = optable.parse(new).entry("relu")
    assert relu is not None
    stamp = "probe a15 (Apple M2, Darwin 24.5.0 (macOS 15.5), 2026-12-01): ran on the ANE"
    assert relu.sources[-1].startswith(stamp)
    # the file keeps its comments and the layout of the entries it did not touch
    assert new.startswith(text.split("\n[", 1)[0])
    untouched = text.split("[ops.abs]", 1)[1].split("\n[", 1)[0]
    assert untouched in new


def test_applying_the_same_report_twice_changes_nothing_more(files: tuple[Path, Path]) -> None:
    text = files[0].read_text()
    report = _report(_on("relu", "ane"), _on("log", "cpu"), _on("sin", "ane"))
    once, _ = contribute.apply(report, text)
    twice, changes = contribute.apply(report, once)
    assert twice == once
    assert not any(change.changed for change in changes)


def test_the_command_rewrites_the_table_and_the_docs_page(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    table_file, docs = files
    report = tmp_path / "probe.json"
    _report(_on("log", "cpu"), _on("relu", "ane")).save(report)
    before = table_file.read_text()
    args = ["ops", "--from-probe", str(report), "--table", str(table_file), "--docs", str(docs)]
    dry = CliRunner().invoke(cli, [*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert table_file.read_text() == before and docs.read_text() == "stale\n"
    assert "would write" in dry.output
    outcome = CliRunner().invoke(cli, [*args, "--json"])
    assert outcome.exit_code == 0, outcome.output
    payload = json.loads(outcome.output)
    assert payload["written"] is True
    assert [(c["op"], c["before"], c["after"]) for c in payload["changes"]] == [
        ("log", "ane", "cpu"),
        ("relu", "ane", "ane"),
    ]
    written = optable.parse(table_file.read_text())
    assert docs.read_text() == op_support_markdown(written)


def test_a_simulated_report_changes_nothing(files: tuple[Path, Path]) -> None:
    report = _report(_on("log", "simulated"))
    report.simulated = True
    with pytest.raises(ProbeError, match="simulated"):
        contribute.apply(report, files[0].read_text())


def test_a_chip_of_no_known_family_needs_family(files: tuple[Path, Path]) -> None:
    report = _report(_on("log", "cpu"), machine={"chip": "Apple A99", "os": "?"})
    with pytest.raises(ProbeError, match="--family"):
        contribute.apply(report, files[0].read_text())
    new, _ = contribute.apply(report, files[0].read_text(), family="a17")
    assert _verdict(new, "log", "a17") == "cpu" and _verdict(new, "log", "a15") == "ane"


def test_a_report_that_is_not_one_is_refused_by_name(tmp_path: Path) -> None:
    bad = tmp_path / "probe.json"
    bad.write_text('{"schema": 1, "results": []}')
    with pytest.raises(ProbeError, match=r"probe.json: not a probe report"):
        ProbeReport.load(bad)
    bad.write_text('{"schema": 7}')
    with pytest.raises(ProbeError, match="schema 7"):
        ProbeReport.load(bad)
