"""``anekit simulate``: a package's fp16 numerics in the ANE simulator."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from anekit import errors
from anekit.cli._common import emit_json, handles_errors, json_option, stdout


def _simulation_inputs(program: Any, inputs: Path | None, seed: int) -> dict[str, Any]:
    import numpy as np

    if inputs is not None:
        try:
            data = np.load(inputs)
        except (OSError, ValueError) as error:
            raise errors.ProgramError(f"{inputs}: not a readable .npz file: {error}") from error
        missing = [str(spec.name) for spec in program.input_specs if spec.name not in data]
        if missing:
            raise errors.ProgramError(f"{inputs}: has no array for input(s) {', '.join(missing)}")
        return {str(spec.name): data[str(spec.name)] for spec in program.input_specs}
    rng = np.random.default_rng(seed)
    feeds = {}
    for spec in program.input_specs:
        if spec.dtype.kind == "f":
            feeds[str(spec.name)] = rng.standard_normal(spec.shape).astype(spec.dtype)
        else:
            feeds[str(spec.name)] = np.ones(spec.shape, spec.dtype)
    return feeds


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--function", "function", default=None, help="Function of a multifunction package.")
@click.option(
    "--mode",
    type=click.Choice(["ane", "fp32"]),
    default="ane",
    show_default=True,
    help="ane: fp16 storage as on the Neural Engine; fp32: reference math.",
)
@click.option(
    "--accumulation",
    type=click.Choice(["fp16", "fp32"]),
    default="fp16",
    show_default=True,
    help="How reduce_sum/reduce_mean accumulate in ane mode.",
)
@click.option(
    "--inputs",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="An .npz file with one array per input (default: random normal floats, integer ones).",
)
@click.option(
    "--engine",
    type=click.Choice(["auto", "interpreter", "compiled"]),
    default="auto",
    show_default=True,
    help="auto: one ONNX Runtime graph when every op can be lowered, else op by op.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for random inputs.")
@click.option("--top", type=int, default=10, show_default=True, help="Ops to list by magnitude.")
@json_option
@handles_errors
def simulate(
    path: Path,
    function: str | None,
    mode: str,
    accumulation: str,
    inputs: Path | None,
    engine: str,
    seed: int,
    top: int,
    as_json: bool,
) -> None:
    """Run a package in the ANE simulator and report its fp16 numerics.

    Exit status: 0 when no inf/NaN appeared and no numerics rule fired, 1 when
    some did, 2 on errors. Results are simulated, never ANE measurements.
    """
    import anekit
    from anekit import sim

    program = anekit.load(path, function=function)
    feeds = program.package_feeds(_simulation_inputs(program, inputs, seed))
    result = sim.run(
        program.program,
        feeds,
        mode=mode,
        accumulation=accumulation,
        function=program.function_name,
        engine=engine,
    )
    report = result.report
    if as_json:
        payload = report.to_json()
        payload["package"] = str(path)
        payload["seconds"] = result.seconds
        payload["outputs"] = [
            {"name": name, "shape": list(value.shape), "dtype": str(value.dtype)}
            for name, value in result.outputs.items()
        ]
        emit_json(payload)
    else:
        stdout.print(f"[bold]{path}[/] function {program.function_name!r}: {len(report.ops)} ops")
        stdout.print(report.summary(), markup=False)
        table = Table(title=f"Largest values ({mode} numerics, simulated)", title_justify="left")
        for column in ("op", "type", "shape", "max |value|", "inf/NaN", "traced from"):
            table.add_column(column)
        ranked = sorted(report.ops, key=lambda item: (-item.nonfinite, -item.max_abs))[:top]
        for item in ranked:
            table.add_row(
                item.name,
                item.op_type,
                "x".join(map(str, item.shape)),
                f"{item.max_abs:.6g}",
                str(item.nonfinite),
                item.location or "",
            )
        stdout.print(table)
        stdout.print(f"simulated in {result.seconds:.2f} s")
    if not report.ok:
        sys.exit(1)
