"""``anekit probe``: every op of the op table on this machine's Neural Engine (macOS), or
through the simulator (``--sim``, any OS), or its Core AI lowering on Core AI's CPU
reference runtime (``--coreai``); a table, ``--json``, and the report file."""

from __future__ import annotations

import datetime
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from anekit.cli._common import (
    emit_json,
    esc,
    esc_path,
    progress_bar,
    stderr,
    stdout,
    titled_table,
    with_json,
)

if TYPE_CHECKING:
    from anekit.probe.coreai import CoreAIReport
    from anekit.probe.report import ProbeReport

#: Statuses that mean something went wrong with an op (``not probed`` is not one).
PROBLEMS = ("mismatch", "failed", "crashed", "timeout")


@click.command()
@click.argument("ops", nargs=-1)
@click.option(
    "--sim",
    "simulate",
    is_flag=True,
    help="Run the programs in the simulator (fp16 numerics) against its fp32 result; any OS.",
)
@click.option(
    "--direct",
    is_flag=True,
    help="Run the programs through the experimental direct ANE path (private API, macOS) "
    "instead of Core ML; its report does not change the op table.",
)
@click.option(
    "--coreai",
    is_flag=True,
    help="Write each lowered op's program as a Core AI asset and run it on Core AI's CPU "
    "reference runtime (not an ANE) against the simulator's fp32 mode; any OS, needs "
    "the coreai extra.",
)
@click.option(
    "--compute-units",
    type=click.Choice(["CPU_AND_NE", "CPU_AND_GPU", "CPU_ONLY", "ALL"]),
    default="CPU_AND_NE",
    show_default=True,
    help="What Core ML may use (macOS).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=120.0,
    show_default=True,
    help="Seconds one op's worker may take before it is killed.",
)
@click.option(
    "--in-process",
    is_flag=True,
    help="Run every op in this process: faster, but a compiler crash ends the probe.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the report here (default on a Mac: probe-CHIP-macOSVER-DATE.json here).",
)
@with_json
def probe(
    ops: tuple[str, ...],
    simulate: bool,
    direct: bool,
    coreai: bool,
    compute_units: str,
    timeout: float,
    in_process: bool,
    out: Path | None,
    as_json: bool,
) -> None:
    """Probe every op of the op table (or OPS): each as a small single-op program, compiled
    and run on Core ML for --compute-units in its own worker process (a compiler crash
    costs the worker, not the probe), its device read from Core ML's compute plan and its
    values compared with the simulator's fp32 result.

    The report file is the contribution: `anekit ops --from-probe REPORT` turns it into
    the op table's verdicts for your chip family. --direct runs the programs through the
    experimental direct ANE path instead: what the private compiler takes, reported
    apart. Core ML's and the direct path's sides are unverified on hardware in anekit's
    CI (no Mac there).

    --coreai writes each op that has a Core AI lowering as a Core AI asset and runs it on
    Core AI's CPU reference runtime (Apple's CPU executor, not an ANE), in this process,
    against the simulator's fp32 mode on the same inputs; every other op is listed with
    why it is not lowered.

    Exit status 1 with --sim when an op the table marks ANE-capable does not pass
    (that is anekit's bug), and with --coreai when a lowered op disagrees with the
    simulator or fails; on a Mac a failing op is a finding, written to the report."""
    from anekit import probe as probe_module
    from anekit.analysis import optable

    if coreai and (simulate or direct):
        from anekit.errors import ProbeError

        raise ProbeError("choose one of --sim, --direct and --coreai")
    if coreai:
        _probe_coreai(ops, out, as_json)
        return

    chosen = probe_module.op_types(ops or None)
    with progress_bar("probing", quiet=as_json) as bar:
        task = bar.add_task("", total=len(chosen))

        def landed(result: probe_module.OpResult) -> None:
            bar.advance(task)
            if not as_json and result.status in PROBLEMS:
                bar.console.print(f"  {esc(result.op)}: {result.status} ({esc(result.message)})")

        report = probe_module.run(
            chosen,
            simulate=simulate,
            direct=direct,
            compute_units=compute_units,
            isolate=False if in_process else None,
            timeout=timeout,
            on_result=landed,
        )
    if out is None and not simulate:
        out = Path(_default_name(report.machine, direct))
    if out is not None:
        report.save(out)
    capable = optable.load().ane_capable()
    gate = [r.op for r in report.results if simulate and r.op in capable and r.status != "ok"]
    if as_json:
        emit_json(report.to_json())
    else:
        _print(report)
        if out is not None:
            stderr.print(f"report written to {esc_path(out)}")
            if not simulate and not direct:
                stderr.print(f"contribute it: anekit ops --from-probe {esc_path(out)}")
        if gate:
            stderr.print(f"[bold red]ANE-capable ops that did not pass:[/] {esc(', '.join(gate))}")
    if gate:
        sys.exit(1)


def _probe_coreai(ops: tuple[str, ...], out: Path | None, as_json: bool) -> None:
    from anekit import probe as probe_module
    from anekit.probe import coreai as probe_coreai

    chosen = probe_module.op_types(ops or None)
    probe_coreai.available()  # the missing extra, before the bar
    with progress_bar("probing Core AI (CPU reference runtime)", quiet=as_json) as bar:
        task = bar.add_task("", total=len(chosen))

        def landed(result: probe_coreai.CoreAIResult) -> None:
            bar.advance(task)
            if not as_json and result.status in probe_coreai.PROBLEMS:
                bar.console.print(f"  {esc(result.op)}: {result.status} ({esc(result.message)})")

        report = probe_coreai.run(chosen, on_result=landed)
    if out is not None:
        report.save(out)
    problems = [result.op for result in report.problems()]
    if as_json:
        emit_json(report.to_json())
    else:
        _print_coreai(report)
        if out is not None:
            stderr.print(f"report written to {esc_path(out)}")
        if problems:
            stderr.print(
                "[bold red]Core AI lowerings that disagree with the simulator "
                f"({probe_coreai.RUNTIME}):[/] {esc(', '.join(problems))}"
            )
    if problems:
        sys.exit(1)


def _print_coreai(report: CoreAIReport) -> None:
    title = (
        f"Op probe on the {report.runtime}, coreai-core {report.coreai_core}, "
        f"against the {report.reference}"
    )
    view = titled_table(title, ["op", "status", "max abs error", "scaled", "program / why"])
    for result in report.results:
        absolute = "" if result.abs_error is None else f"{result.abs_error:.2g}"
        scaled = "" if result.scaled_error is None else f"{result.scaled_error:.2g}"
        detail = result.message if result.status != "ok" else result.program
        if result.stage and result.status != "ok":
            detail = f"[{result.stage}] {detail}"
        view.add_row(esc(result.op), result.status, absolute, scaled, esc(detail or ""))
    stdout.print(view)
    summary = report.summary()
    tolerance = report.tolerance
    stdout.print(
        f"{summary['ops']} op types: {summary['lowered']} lower to Core AI, "
        f"{summary['probed']} of them probed, {summary['passed']} pass "
        f"(scaled error within {tolerance['fp32']:g}, fp16 outputs {tolerance['fp16']:g}); "
        f"{len(summary['refused'])} refused by their lowering, "
        f"{len(summary['no_lowering'])} with no Core AI lowering - {report.runtime}"
    )


def _default_name(machine: dict[str, object], direct: bool = False) -> str:
    chip = re.sub(r"[^a-z0-9]+", "-", str(machine.get("chip", "mac")).lower()).strip("-")
    release = str(machine.get("os", "")).rsplit("macOS ", 1)[-1].rstrip(")")
    date = datetime.date.today().isoformat()
    kind = "probe-direct" if direct else "probe"
    return f"{kind}-{chip}-macos{re.sub(r'[^0-9.]', '', release)}-{date}.json"


def _print(report: ProbeReport) -> None:
    machine = report.machine
    title = f"Op probe on {machine.get('chip')} ({machine.get('os')}), {report.compute_units}" + (
        " - simulated, not a device figure" if report.simulated else ""
    )
    view = titled_table(title, ["op", "status", "device", "rel. error", "program / why"])
    for result in report.results:
        error = "" if result.rel_error is None else f"{result.rel_error:.2g}"
        detail = result.message if result.status != "ok" else result.program
        if result.status == "ok" and result.message:  # folded by coremltools: say so
            detail = f"{result.program}: {result.message}"
        if result.stage and result.status != "ok":
            detail = f"[{result.stage}] {detail}"
        view.add_row(
            esc(result.op), result.status, esc(result.device or "-"), error, esc(detail or "")
        )
    stdout.print(view)
    counts = ", ".join(f"{count} {status}" for status, count in report.counts().items())
    stdout.print(f"{len(report.results)} op types: {counts}")
