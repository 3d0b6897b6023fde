"""``anekit probe``: every op of the op table on this machine's Neural Engine (macOS), or
through the simulator (``--sim``, any OS); a table, ``--json``, and the report file."""

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

    Exit status 1 with --sim when an op the table marks ANE-capable does not pass
    (that is anekit's bug); on a Mac a failing op is a finding, written to the report."""
    from anekit import probe as probe_module
    from anekit.analysis import optable

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
