"""The program page: placement per op (and function), the simulator's numerics beside it,
the pass report. Built from the reports' JSON; see :func:`program_page`."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from anekit.ops.limits import FP16_MAX
from anekit.pages.render import asset, render

__all__ = ["program_page"]

#: Devices in the order counts and legends list them.
DEVICES = ("ane", "gpu", "cpu")


@dataclass
class OpRow:
    """One op of one function, as a table row."""

    index: int
    name: str
    op_type: str
    outputs: str
    compute: bool
    device: dict[str, str]
    actual: str | None
    rules: list[str]
    reason: dict[str, str]
    fix: dict[str, str]
    numerics: dict[str, Any] | None = None
    #: log10(max |value|) scaled so that FP16_MAX is 100 and 1.0 is 0 (a bar's width, %).
    range_percent: float = 0.0
    first_nonfinite: bool = False
    warnings: list[dict[str, Any]] = field(default_factory=list)

    @property
    def reasons(self) -> list[tuple[str, str, str]]:
        """(families, reason, fix) per distinct reason: families that share one, once."""
        grouped: dict[tuple[str, str], list[str]] = {}
        for family, reason in self.reason.items():
            if reason:
                grouped.setdefault((reason, self.fix.get(family, "")), []).append(family)
        return [(", ".join(families), *key) for key, families in grouped.items()]

    @property
    def off_ane(self) -> bool:
        return self.compute and any(device != "ane" for device in self.device.values())

    @property
    def problem(self) -> bool:
        """Numerics worth a look: inf/NaN, a rule that fired, an output zeroed."""
        stats = self.numerics or {}
        return bool(stats.get("nonfinite") or self.warnings or stats.get("constant") == 0.0)


@dataclass
class Group:
    """Consecutive ops traced from one source line (or with none)."""

    location: str | None
    ops: list[OpRow]


@dataclass
class FunctionView:
    """One function (a bucket of a multifunction package): a tab of the page."""

    name: str
    totals: dict[str, Any]
    findings: list[dict[str, Any]]
    groups: list[Group]
    counts: dict[str, dict[str, int]]
    numerics: dict[str, Any] | None
    numerics_error: str | None

    @property
    def op_count(self) -> int:
        return sum(len(group.ops) for group in self.groups)


def program_page(
    placement: Mapping[str, Any],
    numerics: Mapping[str, Mapping[str, Any] | str] | None = None,
    passes: Mapping[str, Any] | None = None,
    *,
    title: str | None = None,
) -> str:
    """The page of one program: ``placement`` is :meth:`PlacementReport.to_json`;
    ``numerics`` maps a function name to its :meth:`NumericsReport.to_json`, or to the
    error that stopped its simulation; ``passes`` is :meth:`PassReport.to_json` (None: not
    recorded, as for a saved package)."""
    families = list(placement.get("families") or [])
    functions = [
        _function_view(function, families, (numerics or {}).get(function["name"]))
        for function in sorted(placement.get("functions") or [], key=_natural)
    ]
    script = asset("program.js")
    has_plan = any(op.actual for view in functions for group in view.groups for op in group.ops)
    return render(
        "program.html.j2",
        title=title or f"anekit: {placement.get('source', 'program')}",
        placement=placement,
        families=families,
        functions=functions,
        passes=passes,
        simulated=numerics is not None,
        has_plan=has_plan,
        devices=DEVICES,
        fp16_max=FP16_MAX,
        rules=placement.get("rules") or {},
        style=asset("page.css"),
        script=script,
    )


def _natural(function: Mapping[str, Any]) -> list[Any]:
    """Functions in the order a reader expects: seq128 before seq1024, main first."""
    name = str(function["name"])
    return [name != "main"] + [
        int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)
    ]


def _function_view(
    function: Mapping[str, Any], families: Sequence[str], numerics: Mapping[str, Any] | str | None
) -> FunctionView:
    stats_by_output: dict[str, dict[str, Any]] = {}
    warnings_by_output: dict[str, list[dict[str, Any]]] = {}
    first: str | None = None
    report: Mapping[str, Any] | None = numerics if isinstance(numerics, Mapping) else None
    if report is not None:
        stats_by_output = {item["op"]: dict(item) for item in report.get("ops") or []}
        for warning in report.get("warnings") or []:
            warnings_by_output.setdefault(warning["op"], []).append(dict(warning))
        if report.get("first_nonfinite"):
            first = report["first_nonfinite"]["op"]
    groups: list[Group] = []
    counts = {family: dict.fromkeys(DEVICES, 0) for family in families}
    # An op off the ANE with no finding of its own is off because of the function's
    # fallbacks (too small a program, a package too large): its row says so.
    whole = {
        family: [
            finding
            for finding in function.get("findings") or []
            if finding["severity"] == "fallback"
            and (finding.get("families") is None or family in finding["families"])
        ]
        for family in families
    }
    for index, op in enumerate(function.get("ops") or []):
        names = list(op.get("output_names") or []) or [op["name"]]
        stats = next((stats_by_output[name] for name in names if name in stats_by_output), None)
        row = OpRow(
            index=index,
            name=op["name"],
            op_type=op["type"],
            outputs=op.get("outputs", ""),
            compute=bool(op.get("compute")),
            device={family: op["device"][family] for family in families},
            actual=op.get("actual"),
            rules=sorted({finding["rule"] for finding in op.get("findings") or []}),
            reason=_with_function_reasons(op, "reason", "message", whole),
            fix=_with_function_reasons(op, "fix", "fix", whole),
            numerics=stats,
            range_percent=_range_percent(stats),
            first_nonfinite=first is not None and first in names,
            warnings=[w for name in names for w in warnings_by_output.get(name, [])],
        )
        if row.compute:
            for family in families:
                counts[family][row.device[family]] = counts[family].get(row.device[family], 0) + 1
        location = op.get("location")
        if groups and groups[-1].location == location:
            groups[-1].ops.append(row)
        else:
            groups.append(Group(location, [row]))
    return FunctionView(
        name=function["name"],
        totals=dict(function.get("totals") or {}),
        findings=list(function.get("findings") or []),
        groups=groups,
        counts=counts,
        numerics=dict(report) if report is not None else None,
        numerics_error=numerics if isinstance(numerics, str) else None,
    )


def _with_function_reasons(
    op: Mapping[str, Any], key: str, field_name: str, whole: Mapping[str, list[Any]]
) -> dict[str, str]:
    """The op's ``reason`` or ``fix`` per family; for a compute op off the ANE without one,
    the function-level fallbacks' (``field_name``: their message or fix)."""
    own = dict(op.get(key) or {})
    for family, findings in whole.items():
        off = op.get("compute") and op["device"].get(family) != "ane"
        if off and not own.get(family) and findings:
            texts = "; ".join(dict.fromkeys(str(finding[field_name]) for finding in findings))
            own[family] = f"the whole function: {texts}" if key == "reason" else texts
    return own


def _range_percent(stats: Mapping[str, Any] | None) -> float:
    """Where max |value| sits between 1 and fp16's largest finite value, on a log scale
    (0 to 100; an output with inf/NaN is 100)."""
    if not stats:
        return 0.0
    if stats.get("nonfinite"):
        return 100.0
    peak = float(stats.get("max_abs") or 0.0)
    if peak <= 1.0:
        return 0.0
    return min(100.0, 100.0 * math.log10(peak) / math.log10(FP16_MAX))
