"""``anekit simulate``: a package's fp16 numerics in the ANE simulator."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from anekit import config, errors
from anekit.cli._common import emit_json, esc, stderr, stdout, titled_table, with_json


def _simulation_inputs(program: Any, inputs: Path | None, seed: int) -> dict[str, Any]:
    import numpy as np

    if inputs is not None:
        return _read_npz(inputs, [str(spec.name) for spec in program.input_specs])
    rng = np.random.default_rng(seed)
    feeds = {}
    for spec in program.input_specs:
        if spec.dtype.kind == "f":
            feeds[str(spec.name)] = rng.standard_normal(spec.shape).astype(spec.dtype)
        else:
            feeds[str(spec.name)] = np.ones(spec.shape, spec.dtype)
    return feeds


def _read_npz(path: Path, names: list[str]) -> dict[str, Any]:
    """The arrays called ``names`` in the .npz file ``path``; a ProgramError naming the
    file when it is missing, empty, truncated, not an .npz archive or lacks an input."""
    import zipfile

    import numpy as np

    def unreadable(reason: object) -> errors.ProgramError:
        return errors.ProgramError(
            f"--inputs {path}: not a readable .npz file ({reason}); write one with "
            "numpy.savez(path, NAME=array, ...)"
        )

    try:
        data = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise errors.ProgramError(f"--inputs {path}: no such file") from None
    except EOFError:  # NumPy's answer to an empty file
        raise unreadable("the file is empty") from None
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        raise unreadable(error) from error
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise unreadable("it holds a single .npy array, not named arrays")
    with data:
        missing = [name for name in names if name not in data.files]
        if missing:
            raise errors.ProgramError(
                f"--inputs {path}: has no array for input(s) {', '.join(missing)} "
                f"(it has {', '.join(data.files) or 'none'})"
            )
        try:
            return {name: data[name] for name in names}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
            raise unreadable(error) from error


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
    default=None,
    help="How reduce_sum/reduce_mean accumulate in ane mode (default fp16); fp32 mode "
    "always accumulates in fp32.",
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
@click.option(
    "--strict",
    is_flag=True,
    help="Fail (exit 2) when an output is garbage: inf/NaN, or zeroed by an overflow "
    "(also ANEKIT_STRICT_NUMERICS=1).",
)
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
    as_json: bool,
) -> None:
    """Run a package in the ANE simulator and report its fp16 numerics.

    Exit status: 0 when no inf/NaN appeared and no numerics rule fired, 1 when
    some did, 2 on errors (and, with --strict, when an output is garbage). Results
    are simulated, never ANE measurements.
    """
    import anekit
    from anekit import sim

    if mode == "fp32" and accumulation == "fp16":
        raise click.BadParameter(
            "fp16 accumulation applies to --mode ane; fp32 mode accumulates in fp32",
            param_hint="--accumulation",
        )
    # What the simulator actually does: in fp32 mode every sum is a float32 sum.
    used = "fp32" if mode == "fp32" else (accumulation or "fp16")
    program = anekit.load(path, function=function)
    feeds = program.package_feeds(_simulation_inputs(program, inputs, seed))
    result = sim.run(
        program.program,
        feeds,
        mode=mode,
        accumulation=used,
        function=program.function_name,
        engine=engine,
    )
    report = result.report
    problems = report.output_problems(result.outputs)
    if problems and (strict or config.strict_numerics()):
        raise errors.NumericsError("simulated fp16 numerics: " + "; ".join(problems))
    if as_json:
        payload = report.to_json()
        payload["package"] = str(path)
        payload["seconds"] = result.seconds
        payload["problems"] = problems
        payload["outputs"] = [
            {"name": name, "shape": list(value.shape), "dtype": str(value.dtype)}
            for name, value in result.outputs.items()
        ]
        emit_json(payload)
    else:
        stdout.print(
            f"[bold]{esc(path)}[/] function {esc(repr(program.function_name))}: "
            f"{len(report.ops)} ops"
        )
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
        stdout.print(f"simulated in {result.seconds:.2f} s")
        for problem in problems:
            stderr.print(f"NumericsWarning: {esc(problem)}")
    if not report.ok:
        sys.exit(1)
