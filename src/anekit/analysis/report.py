"""``PlacementReport``: what is expected to run on the ANE, per op and family, and why not.

Rendered as JSON (schema in docs/placement.md; byte-identical for the same
program), Markdown, an HTML page (:meth:`PlacementReport.to_html`, from the JSON), or rich
tables by the CLI.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from importlib import resources
from typing import Any

from anekit.analysis.rules import placement_rules

SCHEMA_VERSION = 1


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of :meth:`PlacementReport.to_json`."""
    text = resources.files("anekit.analysis").joinpath("data/placement.schema.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


@dataclass(frozen=True)
class Finding:
    """A rule that fired, on an op or on the whole function (for some families, or all)."""

    rule: str
    severity: str
    message: str
    fix: str
    families: tuple[str, ...] | None = None

    def applies(self, family: str) -> bool:
        return self.families is None or family in self.families

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "families": None if self.families is None else list(self.families)}


@dataclass
class OpPlacement:
    """One op: the op table's verdict and the expected device, per family."""

    name: str
    op_type: str
    outputs: str
    location: str | None
    compute: bool
    table: dict[str, str]
    device: dict[str, str]
    findings: list[Finding] = field(default_factory=list)
    #: Where Core ML's compute plan put the op (macOS only; None elsewhere).
    actual: str | None = None
    #: Names of the op's outputs (how compute-plan operations are matched to ops).
    output_names: tuple[str, ...] = ()

    @property
    def rules(self) -> list[str]:
        return sorted({finding.rule for finding in self.findings})

    def _relevant(self, family: str) -> list[Finding]:
        mine = [finding for finding in self.findings if finding.applies(family)]
        fallbacks = [finding for finding in mine if finding.severity == "fallback"]
        return fallbacks or mine

    def reason(self, family: str) -> str:
        """Why the op is not (or only riskily) on the ANE for ``family``."""
        return "; ".join(finding.message for finding in self._relevant(family))

    def fix(self, family: str) -> str:
        return "; ".join(dict.fromkeys(finding.fix for finding in self._relevant(family)))

    def to_json(self, families: list[str]) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.op_type,
            "outputs": self.outputs,
            "output_names": list(self.output_names),
            "location": self.location,
            "compute": self.compute,
            "verdict": {family: self.table[family] for family in families},
            "device": {family: self.device[family] for family in families},
            "findings": [finding.to_json() for finding in self.findings],
            "reason": {family: self.reason(family) for family in families},
            "fix": {family: self.fix(family) for family in families},
            "actual": self.actual,
        }


@dataclass
class Segment:
    """A run of consecutive compute ops on one device."""

    device: str
    ops: int

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "ops": self.ops}


@dataclass
class FunctionReport:
    """The placement of one function of a program."""

    name: str
    families: list[str]
    ops: list[OpPlacement]
    findings: list[Finding]

    def compute_ops(self) -> list[OpPlacement]:
        return [op for op in self.ops if op.compute]

    def on_ane(self, family: str) -> int:
        return sum(1 for op in self.compute_ops() if op.device[family] == "ane")

    def segments(self, family: str) -> list[Segment]:
        result: list[Segment] = []
        for op in self.compute_ops():
            device = op.device[family]
            if result and result[-1].device == device:
                result[-1].ops += 1
            else:
                result.append(Segment(device, 1))
        return result

    def transitions(self, family: str) -> int:
        return max(len(self.segments(family)) - 1, 0)

    def fallbacks(self, family: str) -> int:
        return len(self.compute_ops()) - self.on_ane(family)

    def summary(self, family: str) -> str:
        total = len(self.compute_ops())
        return (
            f"{self.on_ane(family)} of {total} compute ops expected on the ANE "
            f"({family}); {self.transitions(family)} ANE/CPU transitions"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "totals": {
                family: {
                    "compute_ops": len(self.compute_ops()),
                    "ane": self.on_ane(family),
                    "fallback": self.fallbacks(family),
                    "transitions": self.transitions(family),
                    "segments": [segment.to_json() for segment in self.segments(family)],
                }
                for family in self.families
            },
            "findings": [finding.to_json() for finding in self.findings],
            "ops": [op.to_json(self.families) for op in self.ops],
        }


@dataclass
class PlacementReport:
    """Placement of every function of a program, for the chosen ANE families."""

    source: str
    families: list[str]
    functions: list[FunctionReport]
    platform: str = "macos"
    notes: list[str] = field(default_factory=list)

    @property
    def all_on_ane(self) -> bool:
        """True when every compute op of every function is expected on the ANE in every family."""
        return all(
            function.fallbacks(family) == 0
            for function in self.functions
            for family in self.families
        )

    def function(self, name: str) -> FunctionReport:
        for function in self.functions:
            if function.name == name:
                return function
        raise KeyError(name)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA_VERSION,
            "source": self.source,
            "platform": self.platform,
            "families": self.families,
            "all_on_ane": self.all_on_ane,
            "functions": [function.to_json() for function in self.functions],
            "notes": self.notes,
            "rules": {
                rule.id: {"severity": rule.severity, "title": rule.title, "source": rule.source}
                for rule in sorted(placement_rules(), key=lambda item: item.id)
            },
        }

    def dumps(self) -> str:
        """The report as JSON text: sorted keys, no NaN, stable for the same program."""
        return json.dumps(self.to_json(), indent=2, sort_keys=True, allow_nan=False) + "\n"

    def to_html(self, numerics: Mapping[str, Any] | None = None, passes: Any = None) -> str:
        """The report as one self-contained HTML page (what ``anekit doctor --html``
        writes). ``numerics``: per function name, its :class:`NumericsReport` (or its JSON,
        or the error that stopped its simulation); ``passes``: the :class:`PassReport`."""
        from anekit.pages import program_page

        simulated = None
        if numerics is not None:
            simulated = {
                name: value.to_json() if hasattr(value, "to_json") else value
                for name, value in numerics.items()
            }
        recorded = passes.to_json() if hasattr(passes, "to_json") else passes
        return program_page(self.to_json(), simulated, recorded)

    def to_markdown(self) -> str:
        lines = [
            f"# Placement report: {self.source}",
            "",
            "Expected placement by Core ML (anekit's op table and rules; not a measurement).",
        ]
        for function in self.functions:
            lines += ["", f"## Function `{function.name}`", ""]
            for family in self.families:
                lines.append(f"- {function.summary(family)}")
            if function.findings:
                lines += ["", "Program-level findings:", ""]
                lines += [
                    f"- `{f.rule}` ({f.severity}): {f.message}. Fix: {f.fix}"
                    for f in function.findings
                ]
            header = "| op | type | " + " | ".join(self.families) + " | rules | reason / fix |"
            lines += ["", header, "|" + "---|" * (len(self.families) + 4)]
            for op in function.compute_ops():
                devices = " | ".join(op.device[family] for family in self.families)
                detail = op.reason(self.families[0])
                if detail:
                    detail += f" — fix: {op.fix(self.families[0])}"
                lines.append(
                    f"| {op.name} | {op.op_type} | {devices} | {', '.join(op.rules)} | {detail} |"
                )
        if self.notes:
            lines += ["", *[f"Note: {note}" for note in self.notes]]
        return "\n".join(lines) + "\n"
