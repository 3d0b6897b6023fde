"""``anekit ops --from-probe REPORT``: a Mac's probe report turned into the op table's
verdicts for that chip's family, written into ``analysis/data/ops.toml`` (comments and
layout kept, with tomlkit) and ``docs/op-support.md``.

What a probe result says, and what it changes for the family:

- ran on the ANE and matched: the op is ``ane`` there (an ``ane_if`` op keeps its
  condition: one shape does not prove the condition unneeded);
- placed on the CPU or GPU, or Core ML refused it (failed or crashed while compiling,
  planning or running): the op is ``cpu`` there, unless the table already says it
  is not placed as is (``cpu``, ``decompose``);
- ran on the ANE with values off: the verdict stays and the op gets a ``dispute``;
- failed in anekit's own stages (build, reference, save), timed out or not probed:
  nothing changes.

Every probed op gets a source line ``probe FAMILY (chip, OS, date): what it saw``,
replacing that family's earlier probe line.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import tomlkit

from anekit.analysis import compute_plan, optable
from anekit.analysis.docs import op_support_markdown
from anekit.analysis.optable import ON_ANE
from anekit.errors import ProbeError
from anekit.probe.report import DIRECT_UNITS, OpResult, ProbeReport

#: Stages where a failure is Core ML's refusal, not anekit's own problem.
CORE_ML_STAGES = ("compile", "plan", "run")


@dataclass(frozen=True)
class Change:
    """What one probe result did to the table."""

    op: str
    before: str
    after: str
    note: str
    disputed: bool = False

    @property
    def changed(self) -> bool:
        return self.before != self.after


def table_path() -> Path:
    """The op table anekit reads (in a source checkout: the repository's file)."""
    return Path(str(resources.files("anekit.analysis").joinpath("data/ops.toml")))


def docs_path(table: Path) -> Path | None:
    """``docs/op-support.md`` of the checkout that holds ``table``, if there is one."""
    for parent in table.resolve().parents:
        candidate = parent / "docs" / "op-support.md"
        if candidate.is_file():
            return candidate
    return None


def family_of(report: ProbeReport, family: str | None = None) -> str:
    """The table family the report speaks for (``family`` overrides the chip's)."""
    table = optable.load()
    chosen = (
        family
        or report.machine.get("family")
        or compute_plan.family_of(str(report.machine.get("chip", "")))
    )
    if chosen not in table.families:
        raise ProbeError(
            f"the report's chip ({report.machine.get('chip')}) maps to no family of the op "
            f"table; name one with --family ({', '.join(table.families)})"
        )
    return str(chosen)


def observation(result: OpResult) -> tuple[str | None, str] | None:
    """(the placement the result shows: ``ane``, ``cpu`` or None for values off on the
    ANE; what it saw), or None when it is no evidence about the hardware."""
    error = "" if result.rel_error is None else f", relative error {result.rel_error:.2g}"
    if result.status in ("ok", "mismatch") and result.device in ("cpu", "gpu"):
        return "cpu", f"Core ML placed it on the {result.device.upper()}"
    if result.status == "ok" and result.device == "ane":
        return "ane", f"ran on the ANE and matched fp32{error}"
    if result.status == "mismatch" and result.device == "ane":
        return None, f"ran on the ANE but its values are off: {result.message}"
    if result.status in ("failed", "crashed") and result.stage in CORE_ML_STAGES:
        what = "crashed" if result.status == "crashed" else "failed"
        return "cpu", f"Core ML {what} at {result.stage}: {(result.message or '')[:160]}"
    return None


def apply(report: ProbeReport, text: str, family: str | None = None) -> tuple[str, list[Change]]:
    """The op table ``text`` with ``report`` applied, and what changed."""
    if report.simulated:
        raise ProbeError(
            "the report is simulated (anekit probe --sim): it says nothing about hardware; "
            "only a probe on a Mac changes the op table"
        )
    if report.compute_units == DIRECT_UNITS:
        raise ProbeError(
            "the report is of the direct ANE path (anekit probe --direct): it says what the "
            "private compiler takes, not where Core ML places an op; only a Core ML probe "
            "changes the op table"
        )
    key = family_of(report, family)
    table = optable.parse(text)
    document = tomlkit.parse(text)
    machine = report.machine
    stamp = f"probe {key} ({machine.get('chip')}, {machine.get('os')}, {report.created[:10]})"
    changes = []
    for result in report.results:
        seen = observation(result)
        entry = table.entry(result.op)
        if seen is None or entry is None:
            continue
        placed, note = seen
        before = entry.for_family(key).verdict
        op: Any = document["ops"][result.op]
        _replace_source(op, f"probe {key} (", f"{stamp}: {note}")
        after = before
        if placed == "ane" and before not in ON_ANE:
            after = "ane"
        elif placed == "cpu" and before in ON_ANE:
            after = "cpu"
        if after != before:
            _override(op, key, after, note, entry.default.verdict)
        elif placed is None:
            op["dispute"] = f"{stamp}: {note}"
        changes.append(Change(result.op, before, after, note, disputed=placed is None))
    new_text = tomlkit.dumps(document)
    optable.parse(new_text)  # what it writes, it can read
    return new_text, changes


def _replace_source(op: Any, prefix: str, line: str) -> None:
    sources = op.get("sources")
    if sources is None:
        op["sources"] = [line]
        return
    kept = [source for source in sources if not str(source).startswith(prefix)]
    sources.clear()
    sources.extend([*kept, line])


def _override(op: Any, family: str, verdict: str, note: str, default: str) -> None:
    families = op.get("families")
    if verdict == default:  # the default holds for this family again
        if families is not None and family in families:
            del families[family]
        return
    override = tomlkit.inline_table()
    override.update({"verdict": verdict, "reason": note})
    if families is None:  # written as the table writes them: families.KEY = {...}
        op.add(tomlkit.key(["families", family]), override)
    else:
        families[family] = override


def contribute(
    report_path: str | Path,
    *,
    family: str | None = None,
    table: Path | None = None,
    docs: Path | None = None,
    write: bool = True,
) -> tuple[list[Change], Path, Path | None]:
    """Apply the report at ``report_path`` to the op table file (and regenerate the
    docs page); returns the changes and the files written (or that would be)."""
    report = ProbeReport.load(report_path)
    target = table or table_path()
    new_text, changes = apply(report, target.read_text(encoding="utf-8"), family)
    page = docs or docs_path(target)
    if write:
        target.write_text(new_text, encoding="utf-8")
        if page is not None:
            page.write_text(op_support_markdown(optable.parse(new_text)), encoding="utf-8")
        optable.load.cache_clear()
    return changes, target, page
