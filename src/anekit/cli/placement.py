"""``anekit doctor`` (where a program's ops will run, and why not) and ``anekit ops``
(the op table)."""

from __future__ import annotations

import contextlib
import json
import platform
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from anekit.cli._common import (
    emit_json,
    esc,
    esc_path,
    stderr,
    stdout,
    titled_table,
    with_json,
)
from anekit.cli._inputs import check_package, seed_option
from anekit.cli._pages import (
    check_html,
    html_option,
    saved_for_simulation,
    simulate_functions,
    write_page,
)
from anekit.errors import AnekitError, PlacementError, ProbeError, ProgramError, TraceError

if TYPE_CHECKING:  # imported where used: anekit.analysis imports coremltools
    from anekit.analysis import OpTable, PlacementReport
    from anekit.analysis.report import Finding, FunctionReport, OpPlacement

EXIT_FALLBACKS = 1

_DEVICE_STYLE = {"ane": "green", "cpu": "red", "gpu": "yellow"}


def _device(text: str) -> str:
    return f"[{_DEVICE_STYLE.get(text, 'white')}]{esc(text)}[/]"


def _checked(
    target: str, shapes: tuple[str, ...], function: str | None, passes: bool
) -> Path | None:
    """The checks of TARGET and its options that need no heavy import (a missing file, a
    bad --shape, an option that does not apply); the package path, None for a function."""
    from anekit.frontends.function_ref import check_reference, is_function_reference

    if is_function_reference(target):
        if function:
            raise PlacementError("--function applies to packages, not to a traced function")
        check_reference(target, shapes)
        return None
    if target.endswith(".py") and not Path(target).exists():
        raise PlacementError(f"{target}: no such Python file")
    if target.endswith(".py"):
        raise PlacementError(
            f"{target}: is a Python file; name the function to trace as {target}:FUNCTION, "
            "with a --shape for each of its inputs"
        )
    if shapes:
        raise PlacementError("--shape applies to module:function targets, not to packages")
    if not passes:
        raise PlacementError("--no-passes applies to module:function targets, not to packages")
    path = Path(target)
    check_package(path)
    return path


def _analysed(
    target: str,
    package: Path | None,
    shapes: tuple[str, ...],
    families: tuple[str, ...],
    function: str | None,
    platform_name: str,
    passes: bool = True,
) -> tuple[PlacementReport, Any]:
    """The report for ``target`` (the ``package`` at that path, or a function to trace)
    and the traced program (None for a package)."""
    from anekit.analysis import analyze

    if package is None:
        program = _traced(target, shapes, passes)
        report = analyze(program, families=families or None, platform=platform_name)
        report.source = target  # as the user named it
        return report, program
    report = analyze(package, families=families or None, function=function, platform=platform_name)
    return report, None


def _traced(target: str, shapes: tuple[str, ...], passes: bool) -> Any:
    """``target`` imported and traced, with the user's ``print`` output sent to stderr
    (stdout carries the report, which --json keeps machine-readable) and an exception
    the user's code raises turned into a TraceError naming their line."""
    from anekit.frontends.function_ref import compile_reference

    with contextlib.redirect_stdout(sys.stderr):
        try:
            return compile_reference(target, shapes, passes=passes)
        except AnekitError:
            raise
        except Exception as error:
            location = _raising_user_line(error)
            hint = (
                "make the function run on arrays of the --shape given (-v shows the traceback)"
                if location is not None
                else "no line of your code raised it: -v shows the traceback; please report it"
            )
            raise TraceError(
                f"{target}: raised {type(error).__name__}: {error}", location=location, hint=hint
            ) from error


def _raising_user_line(error: BaseException) -> Any:
    """The innermost frame of ``error``'s traceback in the user's code (not in anekit,
    the standard library or an installed package), as a SourceLocation, or None."""
    import linecache
    import sysconfig
    import traceback

    from anekit.trace.source import SourceLocation

    library_dirs = {Path(__file__).resolve().parents[1]}  # anekit itself
    paths = sysconfig.get_paths()
    library_dirs |= {Path(paths[key]).resolve() for key in ("stdlib", "purelib", "platlib")}
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        filename = frame.filename
        if filename.startswith("<"):
            continue
        resolved = Path(filename).resolve()
        if any(resolved.is_relative_to(base) for base in library_dirs):
            continue
        code = (frame.line or linecache.getline(filename, frame.lineno or 0)).strip()
        return SourceLocation(filename, frame.lineno or 0, frame.name, code)
    return None


def _merge_compute_plan(report: PlacementReport, package: Path | None, program: Any) -> str | None:
    """On a Mac: fill each op's ``actual`` device from Core ML's compute plan.

    Returns the op-table family of this Mac's chip (or None when unknown)."""
    from anekit.analysis import compute_plan

    chip = compute_plan.chip()
    family = compute_plan.family_of(chip)
    with tempfile.TemporaryDirectory(prefix="anekit-doctor-") as scratch:
        if package is None:
            package = Path(scratch) / "traced.mlpackage"
            program.save(package)
        devices = compute_plan.actual_devices(package)
    for function in report.functions:
        actual = devices.get(function.name) or (
            devices.get("main") if len(report.functions) == 1 else None
        )
        if actual is None:
            continue
        for op in function.ops:
            op.actual = actual.get(op.output_names[0]) if op.output_names else None
    report.notes.append(
        f"actual devices: Core ML compute plan on {chip} ({platform.mac_ver()[0] or 'macOS'}), "
        "compute units CPU_AND_NE"
    )
    return family


def _coreai_plan(
    report: PlacementReport,
    package: Path | None,
    program: Any,
    function: str | None,
    required: bool,
) -> dict[str, Any] | None:
    """Core AI's compute plan per function (macOS 27 with coreai-torch), each function's
    count per device added to the report's notes; None where it cannot be read here
    (a :class:`PlacementError` naming why when ``required``; a note where the OS has
    Core AI but the plan still cannot be read)."""
    from anekit.backends import coreai_plan
    from anekit.runtimes import RUNTIMES

    def skipped(reason: str) -> None:
        if required:
            raise PlacementError(f"--coreai-plan: {reason}")
        if RUNTIMES["coreai"].available():  # the OS has Core AI: say what is missing
            report.notes.append(f"Core AI compute plan not read: {reason}")

    if (reason := coreai_plan.unavailable_reason()) is not None:
        skipped(f"Core AI's compute plan is unavailable here: {reason}")
        return None
    try:
        if program is not None:
            mil = program.program
        else:
            from anekit._mlpackage import read_function, read_program

            assert package is not None
            mil = read_function(package, function)[0] if function else read_program(package)[0]
        plans = coreai_plan.actual_devices(mil)
    except (PlacementError, ProgramError) as error:
        skipped(str(error))
        return None
    from anekit.analysis import compute_plan

    where = f"{compute_plan.chip()} (macOS {platform.mac_ver()[0]})"
    for name, ops in plans.items():
        report.notes.append(
            f"Core AI compute plan on {where}, Neural Engine preferred, function {name}: "
            f"{coreai_plan.summary(ops)} (per Core AI op)"
        )
    return plans


def _render_coreai_plan(plans: dict[str, Any], show_all: bool) -> None:
    """Core AI's compute plan, one table per function: every Core AI op (``--all``) or
    those off the Neural Engine, with the Neural Engine's reason where it gives one."""
    for name, ops in plans.items():
        shown = [op for op in ops if show_all or op.device != "ane"]
        if not shown:
            continue
        what = "Ops" if show_all else "Ops off the Neural Engine (--all lists every op)"
        table = titled_table(
            f"Core AI compute plan, function {name}: {what}",
            ("id", "Core AI op", "device", "why (Core AI's validation)"),
        )
        for op in shown:
            table.add_row(str(op.id), esc(op.op), _device(op.device), esc("; ".join(op.validation)))
        stdout.print(table)


def _disagreements(report: PlacementReport, family: str | None) -> list[dict[str, Any]]:
    if family is None:
        return []
    found = []
    for function in report.functions:
        for op in function.compute_ops():
            if op.actual is not None and op.actual != op.device.get(family):
                found.append(
                    {
                        "function": function.name,
                        "op": op.name,
                        "type": op.op_type,
                        "outputs": op.outputs,
                        "predicted": op.device.get(family),
                        "actual": op.actual,
                        "verdict": op.table.get(family),
                        "rules": op.rules,
                        "reason": op.reason(family),
                    }
                )
    return found


def _disagreement_report(
    report: PlacementReport, family: str | None, found: list[dict[str, Any]]
) -> dict[str, Any]:
    import coremltools

    from anekit._version import __version__
    from anekit.analysis import compute_plan

    return {
        "kind": "anekit placement disagreements",
        "anekit": __version__,
        "coremltools": coremltools.__version__,
        "macos": platform.mac_ver()[0],
        "chip": compute_plan.chip(),
        "family": family,
        "source": report.source,
        "disagreements": found,
    }


def _finding_groups(ops: list[OpPlacement], family: str) -> dict[tuple[str, str], list[Finding]]:
    """Findings on ``ops`` for ``family``, grouped by rule (op-table findings by op type)."""
    groups: dict[tuple[str, str], list[Finding]] = {}
    for op in ops:
        for finding in op.findings:
            if finding.applies(family):
                key = (finding.rule, op.op_type if finding.rule == "op.table" else "")
                groups.setdefault(key, []).append(finding)
    return groups


def _render_function(
    report: PlacementReport, function: FunctionReport, show_all: bool, family: str | None
) -> None:
    from anekit.analysis.rules import RULES

    stdout.print(f"\n[bold]function {esc(function.name)}[/]")
    for key in report.families:
        segments = " -> ".join(f"{seg.device} {seg.ops}" for seg in function.segments(key))
        stdout.print(
            f"  {esc(function.summary(key))}  [dim]({esc(segments or 'no compute ops')})[/]"
        )
    has_actual = any(op.actual is not None for op in function.ops)
    ops = [
        op
        for op in function.compute_ops()
        if show_all
        or op.findings
        or any(op.device[key] != "ane" for key in report.families)
        or (family is not None and op.actual is not None and op.actual != op.device[family])
    ]
    if ops:
        title = "Ops" if show_all else "Ops with findings (--all lists every op)"
        table = titled_table(title, ("op", "type", "output", *report.families))
        if has_actual:
            table.add_column("actual")
        table.add_column("rules", overflow="fold")
        for op in ops:
            row = [esc(op.name), esc(op.op_type), esc(op.outputs)]
            row += [_device(op.device[key]) for key in report.families]
            if has_actual:
                actual = op.actual or ""
                disagrees = family is not None and actual and actual != op.device[family]
                row.append(f"[bold reverse]{esc(actual)}[/]" if disagrees else _device(actual))
            row.append(esc(", ".join(op.rules)))
            table.add_row(*row)
        stdout.print(table)
    first = family if family in report.families else report.families[0]
    groups = _finding_groups(function.ops, first)
    if not function.findings and not groups:
        return
    stdout.print(f"\n[bold]Why, and how to fix[/] ({esc(first)})")
    for finding in function.findings:
        style = "red" if finding.severity == "fallback" else "yellow"
        stdout.print(
            f"  [{style}]{esc(finding.severity)}[/] [bold]{esc(finding.rule)}[/] (program): "
            f"{esc(finding.message)}.\n      fix: {esc(finding.fix)}"
        )
    for (rule, op_type), findings in sorted(groups.items()):
        sample = findings[0]
        style = "red" if sample.severity == "fallback" else "yellow"
        what = f"{op_type} " if op_type else ""
        message = sample.message if rule == "op.table" else RULES[rule].title
        stdout.print(
            f"  [{style}]{esc(sample.severity)}[/] [bold]{esc(rule)}[/] ({esc(what)}"
            f"{len(findings)} op{'s' if len(findings) != 1 else ''}): {esc(message)}\n"
            f"      fix: {esc(sample.fix)}"
        )


def _no_plan() -> PlacementError:
    return PlacementError(
        "--report-disagreements needs Core ML's compute plan (macOS 14.4 or later)"
    )


def _exit_status(report: PlacementReport, strict: bool) -> int:
    if not report.all_on_ane:
        return EXIT_FALLBACKS
    if strict and any(
        finding.severity == "risk"
        for function in report.functions
        for finding in [*function.findings, *(f for op in function.ops for f in op.findings)]
    ):
        return EXIT_FALLBACKS
    return 0


@click.command()
@click.argument("target")
@click.option(
    "--shape",
    "shapes",
    multiple=True,
    metavar="[NAME=]DIMS[:DTYPE]",
    help="Example input of a module:function target, e.g. x=1,256,1,128:float16 (repeatable).",
)
@click.option(
    "--family",
    "families",
    multiple=True,
    help="ANE family to report (a14, a15, a17; repeatable; default all).",
)
@click.option("--function", default=None, help="One function of a multifunction package.")
@click.option(
    "--platform",
    "platform_name",
    type=click.Choice(["macos", "ios"]),
    default="macos",
    show_default=True,
    help="Deployment platform (sets the package-size limit).",
)
@click.option(
    "--passes/--no-passes",
    default=True,
    show_default=True,
    help="For a module:function target, run anekit's ANE passes on the trace first.",
)
@click.option(
    "--all", "show_all", is_flag=True, help="List every op, not only those with findings."
)
@click.option("--markdown", is_flag=True, help="Print the report as Markdown.")
@click.option("--strict", is_flag=True, help="Exit 1 on risks (slowdowns, wrong-value risks) too.")
@click.option(
    "--plan/--no-plan",
    "use_plan",
    default=True,
    show_default=True,
    help="On macOS, also load Core ML's compute plan and show the actual device per op.",
)
@click.option(
    "--coreai-plan/--no-coreai-plan",
    "coreai_plan",
    default=None,
    help="Core AI's compute plan per Core AI op (macOS 27 with anekit[coreai-plan]): "
    "shown with --plan where it can be read; --coreai-plan requires it (exit 2 saying why not).",
)
@click.option(
    "--report-disagreements",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="On macOS, write ops where the compute plan disagrees with the prediction as JSON.",
)
@html_option
@click.option(
    "--simulate/--no-simulate",
    "simulate_page",
    default=True,
    show_default=True,
    help="With --html, run each function in the fp16 simulator (random inputs, --seed) "
    "and show its numerics per op on the page.",
)
@seed_option
@with_json
def doctor(
    target: str,
    shapes: tuple[str, ...],
    families: tuple[str, ...],
    function: str | None,
    platform_name: str,
    passes: bool,
    show_all: bool,
    markdown: bool,
    strict: bool,
    use_plan: bool,
    coreai_plan: bool | None,
    report_disagreements: Path | None,
    html: Path | None,
    simulate_page: bool,
    seed: int,
    as_json: bool,
) -> None:
    """Which ops of TARGET Core ML is expected to place on the ANE, and why not.

    TARGET is an .mlpackage, an mlprogram .mlmodel, or a NumPy function as
    module:function or path/to/file.py:function with --shape for each input.
    The prediction works on any OS (op table + rules); on macOS the actual
    device from Core ML's compute plan is shown next to it, and on macOS 27
    Core AI's compute plan per Core AI op (with anekit[coreai-plan]).

    Exit status: 0 when every compute op is expected on the ANE, 1 when some
    fall back (or, with --strict, when any risk is found), 2 on errors.
    """
    package = _checked(target, shapes, function, passes)
    check_html(html)
    from anekit.analysis.optable import load as load_op_table

    load_op_table().chosen_families(families)  # the op table alone: no coremltools yet
    if report_disagreements is not None and not use_plan:
        raise _no_plan()
    from anekit.analysis import compute_plan  # coremltools: only once the arguments are good

    report, program = _analysed(target, package, shapes, families, function, platform_name, passes)
    family: str | None = None
    found: list[dict[str, Any]] = []
    if use_plan and compute_plan.available():
        family = _merge_compute_plan(report, package, program)
        found = _disagreements(report, family)
        if report_disagreements is not None:
            payload = _disagreement_report(report, family, found)
            report_disagreements.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    elif report_disagreements is not None:
        raise _no_plan()
    plans = None
    if coreai_plan or (coreai_plan is None and use_plan):
        plans = _coreai_plan(report, package, program, function, required=bool(coreai_plan))
    if html is not None:
        write_page(html, _page(report, package, program, simulate_page, seed))
    if as_json:
        click.echo(report.dumps(), nl=False)
    elif markdown:
        click.echo(report.to_markdown(), nl=False)
    else:
        stdout.print(f"[bold]{esc_path(report.source)}[/]: expected placement by Core ML")
        stdout.print(
            "[dim]A prediction from anekit's op table and rules"
            + (", with the actual devices from Core ML's compute plan" if family else "")
            + (" and Core AI's compute plan per Core AI op" if plans else "")
            + "; see docs/placement.md.[/]"
        )
        for item in report.functions:
            _render_function(report, item, show_all, family)
        if plans:
            _render_coreai_plan(plans, show_all)
        for note in report.notes:
            stdout.print(f"[dim]{esc(note)}[/]")
        if found:
            where = report_disagreements or "a file"
            stderr.print(
                f"[bold]{len(found)} op(s) landed elsewhere than predicted[/]; "
                f"--report-disagreements {esc_path(where)} writes them for an op-table issue."
            )
    sys.exit(_exit_status(report, strict))


def _page(
    report: PlacementReport, package: Path | None, program: Any, simulate: bool, seed: int
) -> str:
    """The report's HTML page: with each function's simulated numerics (``simulate``) and,
    for a traced function, the pass report."""
    numerics = None
    if simulate:
        names = [item.name for item in report.functions]
        if package is not None:
            numerics = simulate_functions(package, names, seed=seed)
        else:
            saved, remove = saved_for_simulation(program)
            try:
                numerics = simulate_functions(saved, names, seed=seed)
            finally:
                remove()
    return report.to_html(numerics, program.pass_report if program is not None else None)


def _table_rows(table: OpTable, families: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "op": op_type,
            "kind": entry.kind,
            # Each family's Rule: its verdict, condition, rewrite and reason.
            "families": {family: asdict(entry.for_family(family)) for family in families},
            "rule": entry.rule,
            "dispute": entry.dispute,
            "sources": list(entry.sources),
        }
        for op_type, entry in sorted(table.ops.items())
    ]


@click.command()
@click.option("--family", "families", multiple=True, help="ANE family (repeatable; default all).")
@click.option(
    "--verdict",
    type=click.Choice(["ane", "ane_if", "decompose", "cpu"]),
    default=None,
    help="Only ops with this verdict in some chosen family.",
)
@click.option("--markdown", is_flag=True, help="Print docs/op-support.md.")
@click.option(
    "--from-probe",
    "probe_report",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Apply a Mac's probe report (anekit probe) to the op table and docs/op-support.md.",
)
@click.option(
    "--table",
    "table_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="With --from-probe: the op table file to rewrite (default: the one anekit reads).",
)
@click.option(
    "--docs",
    "docs_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="With --from-probe: the page to regenerate (default: the checkout's docs/op-support.md).",
)
@click.option("--dry-run", is_flag=True, help="With --from-probe: show the changes, write nothing.")
@with_json
def ops(
    families: tuple[str, ...],
    verdict: str | None,
    markdown: bool,
    probe_report: Path | None,
    table_file: Path | None,
    docs_file: Path | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Print the op table: per MIL op and ANE family, whether it runs on the ANE.

    With --from-probe REPORT, rewrite the table's verdicts for the report's chip family
    (or --family) from what the probe saw, and regenerate docs/op-support.md."""
    from anekit.analysis import load_op_table

    if probe_report is not None:
        _from_probe(probe_report, families, table_file, docs_file, dry_run, as_json)
        return
    table = load_op_table()
    chosen = table.chosen_families(families)
    if markdown:
        from anekit.analysis.docs import op_support_markdown  # the rules: coremltools

        click.echo(op_support_markdown(table), nl=False)
        return
    rows = _table_rows(table, chosen)
    if verdict:
        rows = [
            row for row in rows if any(v["verdict"] == verdict for v in row["families"].values())
        ]
    if as_json:
        emit_json({"families": {key: table.families[key].name for key in chosen}, "ops": rows})
        return
    headers = ["op", *(f"{esc(family)}\n{esc(table.families[family].name)}" for family in chosen)]
    view = titled_table("MIL ops on the ANE (anekit op table)", headers, overflow="ellipsis")
    view.add_column("condition / rewrite / dispute", overflow="fold")
    for row in rows:
        cells = [esc(row["op"])]
        notes = []
        for family in chosen:
            item = row["families"][family]
            cells.append(_device(item["verdict"]) if item["verdict"] != "ane_if" else "ane_if")
            for key in ("condition", "rewrite", "reason"):
                if item[key] and item[key] not in notes:
                    notes.append(item[key])
        if row["dispute"]:
            notes.append(f"disputed: {row['dispute']}")
        cells.append(esc("; ".join(notes)))
        view.add_row(*cells)
    stdout.print(view)
    stdout.print(f"{len(rows)} ops; sources: anekit ops --json, or docs/op-support.md")


def _from_probe(
    report: Path,
    families: tuple[str, ...],
    table_file: Path | None,
    docs_file: Path | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    from anekit.probe.contribute import contribute

    if len(families) > 1:
        raise ProbeError("--from-probe applies a report to one family; give at most one --family")
    changes, table, docs = contribute(
        report,
        family=families[0] if families else None,
        table=table_file,
        docs=docs_file,
        write=not dry_run,
    )
    changed = [change for change in changes if change.changed]
    disputed = [change for change in changes if change.disputed]
    if as_json:
        emit_json(
            {
                "table": str(table),
                "docs": str(docs) if docs else None,
                "written": not dry_run,
                "changes": [asdict(change) | {"changed": change.changed} for change in changes],
            }
        )
        return
    view = titled_table("Op table changes from the probe", ["op", "before", "after", "what it saw"])
    for change in [*changed, *disputed]:
        after = change.after + (" (disputed)" if change.disputed else "")
        view.add_row(esc(change.op), change.before, after, esc(change.note))
    stdout.print(view)
    action = "would write" if dry_run else "wrote"
    stdout.print(
        f"{len(changes)} ops probed on hardware: {len(changed)} verdicts changed, "
        f"{len(disputed)} disputed, {len(changes) - len(changed) - len(disputed)} confirmed; "
        f"{action} {esc_path(table)}"
        + (f" and {esc_path(docs)}" if docs else " (no docs page found)")
    )
