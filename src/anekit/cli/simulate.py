"""``anekit simulate``: a package's fp16 numerics in the ANE simulator."""

from __future__ import annotations

import functools
import gc
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from anekit import config, errors
from anekit.cli._common import emit_json, esc, esc_path, stderr, stdout, titled_table, with_json
from anekit.cli._inputs import (
    check_inputs,
    check_package,
    inputs_option,
    program_inputs,
    seed_option,
)
from anekit.cli._pages import check_html, html_option, simulate_functions, write_page


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--function", "function", default=None, help="Function of a multifunction package.")
@click.option(
    "--numerics",
    "--mode",
    "mode",
    type=click.Choice(["ane", "fp32"]),
    default="ane",
    show_default=True,
    help="ane: fp16 storage as on the Neural Engine; fp32: reference math (--mode: the "
    "older name).",
)
@click.option(
    "--accumulation",
    type=click.Choice(["fp16", "fp32"]),
    default=None,
    help="How reduce_sum/reduce_mean accumulate in ane mode (default fp16); fp32 mode "
    "always accumulates in fp32.",
)
@inputs_option
@click.option(
    "--executor",
    "--engine",
    "engine",
    type=click.Choice(["auto", "interpreter", "compiled"]),
    default="auto",
    show_default=True,
    help="How the simulator runs it; auto: one ONNX Runtime graph when every op can be "
    "lowered, else op by op (--engine: the older name).",
)
@seed_option
@click.option("--top", type=int, default=10, show_default=True, help="Ops to list by magnitude.")
@click.option(
    "--strict",
    is_flag=True,
    help="Fail (exit 2) when an output is garbage: inf/NaN, or zeroed by an overflow "
    "(also ANEKIT_STRICT_NUMERICS=1).",
)
@html_option
@with_json
def simulate(
    path: Path,
    function: str | None,
    mode: str,
    accumulation: str | None,
    inputs: Path | None,
    engine: str,
    seed: int,
    top: int,
    strict: bool,
    html: Path | None,
    as_json: bool,
) -> None:
    """Run a package in the ANE simulator and report its fp16 numerics.

    Exit status: 0 when no inf/NaN appeared and no numerics rule fired, 1 when
    some did, 2 on errors (and, with --strict, when an output is garbage). Results
    are simulated, never ANE measurements.
    """
    if mode == "fp32" and accumulation == "fp16":
        raise click.BadParameter(
            "fp16 accumulation applies to --numerics ane; fp32 numerics accumulate in fp32",
            param_hint="--accumulation",
        )
    check_package(path)
    check_inputs(inputs)
    check_html(html)
    import anekit  # coremltools and the simulator: only once the arguments are good

    # What the simulator actually does: in fp32 mode every sum is a float32 sum.
    used = "fp32" if mode == "fp32" else (accumulation or "fp16")
    program = anekit.load(path, function=function)
    feeds = program.package_feeds(program_inputs(program, inputs, seed))
    run = functools.partial(_run, mode=mode, accumulation=used, engine=engine)
    result = run(program, feeds)
    report, seconds, name = result.report, result.seconds, program.function_name
    problems = report.output_problems(result.outputs)
    outputs = [
        {"name": output, "shape": list(value.shape), "dtype": str(value.dtype)}
        for output, value in result.outputs.items()
    ]
    if html is not None:
        # this function's program and compiled engine go before the others' are made
        del program, result, feeds
        gc.collect()  # the MIL program holds cycles
        _write_page(html, path, name, function, report, inputs, seed, run)
    if problems and (strict or config.strict_numerics()):
        raise errors.NumericsError("simulated fp16 numerics: " + "; ".join(problems))
    if as_json:
        payload = report.to_json()
        payload["package"] = str(path)
        payload["seconds"] = seconds
        payload["problems"] = problems
        payload["outputs"] = outputs
        emit_json(payload)
    else:
        stdout.print(f"[bold]{esc_path(path)}[/] function {esc(repr(name))}: {len(report.ops)} ops")
        stdout.print(report.summary(), markup=False)
        title = f"Largest values ({mode} numerics, simulated)"
        columns = ("op", "type", "shape", "max |value|", "inf/NaN", "traced from")
        table = titled_table(title, columns, overflow="ellipsis")
        ranked = sorted(report.ops, key=lambda item: (-item.nonfinite, -item.max_abs))[:top]
        for item in ranked:
            table.add_row(
                esc(item.name),
                esc(item.op_type),
                "x".join(map(str, item.shape)),
                f"{item.max_abs:.6g}",
                str(item.nonfinite),
                esc(item.location or ""),
            )
        stdout.print(table)
        stdout.print(f"simulated in {seconds:.2f} s")
        for problem in problems:
            stderr.print(f"NumericsWarning: {esc(problem)}")
    if not report.ok:
        sys.exit(1)


def _write_page(
    html: Path,
    path: Path,
    simulated: str,
    function: str | None,
    report: Any,
    inputs: Path | None,
    seed: int,
    run: Callable[[Any, dict[str, Any]], Any],
) -> None:
    """The page: placement and numerics of the function run (``simulated``), or, with no
    --function, of every function of the package (each simulated by ``run``, with the
    same options)."""
    from anekit import pages
    from anekit.analysis import analyze

    placement = analyze(path, function=function)
    others = [item.name for item in placement.functions if item.name != simulated]
    numerics: dict[str, Any] = {simulated: report.to_json()}
    if function is None:
        numerics |= simulate_functions(path, others, seed=seed, inputs=inputs, run=run)
    write_page(html, pages.program_page(placement.to_json(), numerics))


def _run(program: Any, feeds: dict[str, Any], *, mode: str, accumulation: str, engine: str) -> Any:
    """``program`` (a loaded package's function) run in the simulator on ``feeds``."""
    from anekit import sim

    return sim.run(
        program.program,
        feeds,
        mode=mode,
        accumulation=accumulation,
        function=program.function_name,
        executor=engine,
    )
