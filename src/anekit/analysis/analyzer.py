"""Placement analysis: the op table and the rules applied to every op of a program.

For each op and ANE family the expected device is ``ane`` when the op table says
``ane`` (or ``ane_if`` and the condition holds) and no fallback rule fires on the
op or on the program, else ``cpu``. Constants are not compute ops.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from anekit import _miltext
from anekit._milgraph import is_constant, numpy_dtype, static_shape
from anekit.analysis import optable
from anekit.analysis.report import Finding, FunctionReport, OpPlacement, PlacementReport
from anekit.analysis.rules import (
    CONDITIONS,
    RULES,
    ProgramFacts,
    op_checks,
    program_checks,
)
from anekit.errors import PlacementError
from anekit.ops.groups import MATMUL_LIKE

#: Program-level rules after which no op of the function stays on the ANE.
WHOLE_PROGRAM_FALLBACK = frozenset({"shape.enumerated", "package.size", "program.too_small"})


@dataclass(frozen=True)
class PackageFacts:
    """What a package adds to its program: size, flexible input shapes."""

    size_bytes: int | None = None
    enumerated_inputs: tuple[str, ...] = ()


def _finding(
    rule: str, message: str, families: Sequence[str] | None = None, fix: str | None = None
) -> Finding:
    info = RULES[rule]
    return Finding(
        rule=rule,
        severity=info.severity,
        message=message,
        fix=fix or info.fix,
        families=None if families is None else tuple(families),
    )


def _table_findings(
    op: Any, entry: optable.OpEntry | None, families: list[str]
) -> tuple[dict[str, str], list[Finding]]:
    """Per family: the table's verdict and, where it keeps the op off the ANE, why."""
    verdicts: dict[str, str] = {}
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for family in families:
        rule = None if entry is None else entry.for_family(family)
        verdicts[family] = "cpu" if rule is None else rule.verdict
        if rule is None:
            key = ("cpu", f"{op.op_type} is not in the op table", RULES["op.table"].fix)
        elif rule.verdict == "ane":
            continue
        elif rule.verdict == "ane_if":
            assert rule.condition is not None
            check, requirement = CONDITIONS[rule.condition]
            if check(op):
                continue
            key = ("ane_if", f"{op.op_type}: {requirement}", requirement)
        elif rule.verdict == "decompose":
            key = (
                "decompose",
                f"{op.op_type} does not run on the ANE as is",
                f"rewrite: {rule.rewrite}",
            )
        else:
            assert entry is not None  # rule came from it
            why = rule.reason or f"{op.op_type} does not run on the ANE"
            key = ("cpu", why, (entry.rule and RULES[entry.rule].fix) or RULES["op.table"].fix)
        grouped.setdefault(key, []).append(family)
    findings = []
    for (_, message, fix), members in grouped.items():
        scoped = None if len(members) == len(families) else members
        dispute = f" (disputed: {entry.dispute})" if entry is not None and entry.dispute else ""
        findings.append(_finding("op.table", message + dispute, scoped, fix))
    return verdicts, findings


def _weight_bytes(func: Any) -> int:
    total = 0
    for op in func.operations:
        if op.op_type != "const" and not op.op_type.startswith("constexpr_"):
            continue
        if op.op_type == "const" and any(
            child.op_type.startswith("constexpr_") for child in op.outputs[0].child_ops
        ):
            continue  # counted through the constexpr that decompresses it
        for var in op.outputs:
            value = var.val if op.op_type == "const" else None
            if value is not None and np.ndim(value) > 0:
                total += int(np.asarray(value).nbytes)
            elif op.op_type.startswith("constexpr_"):
                total += int(np.prod(var.shape, dtype=np.int64)) * 2  # decompressed fp16
    return total


def _facts(func: Any, package: PackageFacts, platform: str) -> ProgramFacts:
    def described(var: Any, name: str) -> tuple[str, tuple[Any, ...], np.dtype[Any] | None]:
        return name, tuple(var.shape), numpy_dtype(var)

    def elements(var: Any) -> int:
        shape = static_shape(var)
        return MIN_DYNAMIC if shape is None else int(np.prod(shape, dtype=np.int64))

    return ProgramFacts(
        inputs=[described(var, name) for name, var in func.inputs.items()],
        outputs=[described(var, var.name) for var in func.outputs],
        weight_bytes=_weight_bytes(func),
        package_bytes=package.size_bytes,
        layers=sum(1 for op in func.operations if op.op_type in MATMUL_LIKE),
        largest_tensor=max(
            (elements(var) for op in func.operations for var in op.outputs), default=0
        ),
        enumerated_inputs=list(package.enumerated_inputs),
        platform=platform,
    )


def walk(operations: Sequence[Any], enclosing: Any = None) -> Iterator[tuple[Any, Any]]:
    """Every op with the control-flow op it is nested in (None at the top level)."""
    for op in operations:
        yield op, enclosing
        for block in getattr(op, "blocks", ()):
            yield from walk(block.operations, enclosing if enclosing is not None else op)


def _folded(op: Any) -> bool:
    """True when every output is known at compile time: Core ML's passes fold the op."""
    return (
        op.op_type != "const"
        and bool(op.outputs)
        and all(var.val is not None for var in op.outputs)
    )


#: A flexible tensor counts as large for the program-size rule.
MIN_DYNAMIC = 1 << 20


def analyze_function(
    func: Any, name: str, families: list[str], package: PackageFacts, platform: str
) -> FunctionReport:
    table = optable.load()
    program_findings = [
        _finding(rule, message) for rule, message in program_checks(_facts(func, package, platform))
    ]
    whole_program = any(finding.rule in WHOLE_PROGRAM_FALLBACK for finding in program_findings)
    placements = []
    symbols: dict[str, str] = {}
    for op, enclosing in walk(func.operations):
        entry = table.entry(op.op_type)
        compute = (entry.is_compute if entry is not None else True) and not _folded(op)
        common: dict[str, Any] = {
            "name": op.name,
            "op_type": op.op_type,
            "outputs": ", ".join(_miltext.type_text(var, symbols) for var in op.outputs),
            "location": _miltext.op_location(op),
            "output_names": tuple(var.name for var in op.outputs),
        }
        if not compute:
            everywhere = dict.fromkeys(families, "ane")
            placements.append(
                OpPlacement(**common, compute=False, table=everywhere, device=dict(everywhere))
            )
            continue
        verdicts, findings = _table_findings(op, entry, families)
        findings += [_finding(rule, message) for rule, message in op_checks(op)]
        if enclosing is not None:
            findings.append(
                _finding("control_flow", f"inside {enclosing.op_type} {enclosing.name}")
            )
        fallbacks = [finding for finding in findings if finding.severity == "fallback"]
        devices = {
            family: "cpu" if whole_program or any(f.applies(family) for f in fallbacks) else "ane"
            for family in families
        }
        placements.append(
            OpPlacement(**common, compute=True, table=verdicts, device=devices, findings=findings)
        )
    return FunctionReport(name, families, placements, program_findings)


def analyze_program(
    program: Any,
    *,
    source: str,
    families: Sequence[str] | None = None,
    functions: Sequence[str] | None = None,
    package: PackageFacts | None = None,
    platform: str = "macos",
) -> PlacementReport:
    """Placement of every function (or the ones named) of a MIL ``program``."""
    table = optable.load()
    chosen = table.chosen_families(families or ())
    if platform not in ("macos", "ios"):
        raise PlacementError(f"unknown platform {platform!r}; choose macos or ios")
    names = list(functions) if functions else list(program.functions)
    missing = [name for name in names if name not in program.functions]
    if missing:
        raise PlacementError(f"the program has no function {', '.join(missing)}")
    reports = [
        analyze_function(program.functions[name], name, chosen, package or PackageFacts(), platform)
        for name in names
    ]
    return PlacementReport(source=source, families=chosen, functions=reports, platform=platform)


__all__ = ["PackageFacts", "analyze_function", "analyze_program", "is_constant"]
