"""The ``anekit`` command line: thin over the library, rich tables or ``--json``.

Errors anekit raises on purpose print one line (``error: ...``) and exit with
status 2; ``-v`` shows the traceback. With ``--json`` an error is printed as
``{"error": <code>, "message": ...}`` where the code is the exception class name.
"""

from __future__ import annotations

import json
import logging
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

from anekit import config, errors
from anekit._version import __version__

F = TypeVar("F", bound=Callable[..., Any])

EXIT_ERROR = 2

_stdout = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 120)
_stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def _emit_json(payload: Any) -> None:
    # A NaN in machine output is a bug, never a value (allow_nan=False).
    click.echo(json.dumps(payload, indent=2, allow_nan=False))


def _fail(error: Exception, as_json: bool, verbose: bool) -> None:
    code = error.code if isinstance(error, errors.AnekitError) else type(error).__name__
    if as_json:
        _emit_json({"error": code, "message": str(error)})
    else:
        _stderr.print(f"[bold red]error[/] ({code}): {error}", markup=True)
        if verbose:
            _stderr.print_exception()
    sys.exit(EXIT_ERROR)


def handles_errors(func: F) -> F:
    """Turn AnekitErrors into one-line messages and exit status 2."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        context = click.get_current_context()
        verbose = bool(context.find_root().params.get("verbose"))
        try:
            return func(*args, **kwargs)
        except errors.AnekitError as error:
            _fail(error, bool(kwargs.get("as_json")), verbose)

    wrapper.__name__ = func.__name__
    wrapper.__doc__ = func.__doc__
    return wrapper  # type: ignore[return-value]


json_option = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="anekit")
@click.option("-v", "--verbose", is_flag=True, help="Log progress and show tracebacks on errors.")
def cli(verbose: bool) -> None:
    """anekit: compile NumPy functions to Core ML for the Apple Neural Engine,
    check them anywhere, run them on a Mac."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(message)s")


def _format_bytes(count: int) -> str:
    size = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{count} B"


@cli.command()
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where to write ffn.mlpackage (default: $ANEKIT_HOME/demo).",
)
@json_option
@handles_errors
def demo(out_dir: Path | None, as_json: bool) -> None:
    """Trace the LLaMA-style FFN block (seed 003) and save it as an .mlpackage."""
    from anekit import demo as demo_module
    from anekit.backends import available_backends

    out = out_dir if out_dir is not None else config.home() / "demo"
    if not as_json:
        _stderr.print(
            f"Tracing the feed-forward block (RMSNorm, SwiGLU, residual; "
            f"D={demo_module.D_MODEL}, H={demo_module.D_HIDDEN}, T={demo_module.TOKENS}, fp16)..."
        )
    result = demo_module.run(out)
    backends = available_backends()
    if as_json:
        payload = result.to_json()
        payload["backends"] = backends
        _emit_json(payload)
        return

    program = result.program
    _stdout.print(
        f"\n[bold]{program.source}[/]  ->  MIL program, opset {program.deployment_target}\n"
    )
    io_table = Table(title="Inputs and outputs", title_justify="left")
    for column in ("", "name", "shape", "dtype"):
        io_table.add_column(column)
    for kind, specs in (("input", program.input_specs), ("output", program.output_specs)):
        for spec in specs:
            io_table.add_row(
                kind, str(spec.name), " x ".join(map(str, spec.shape)), spec.dtype.name
            )
    _stdout.print(io_table)

    ops_table = Table(title="Ops", title_justify="left")
    for column in ("#", "op", "type", "output", "traced from"):
        ops_table.add_column(column, overflow="fold")
    compute = [op for op in program.ops() if op.op_type != "const"]
    for index, op in enumerate(compute, 1):
        ops_table.add_row(str(index), op.name, op.op_type, ", ".join(op.outputs), op.location or "")
    _stdout.print(ops_table)
    weights = program.weights()
    described = ", ".join(f"{w.name} {' x '.join(map(str, w.shape))}" for w in weights)
    _stdout.print(
        f"{len(compute)} compute ops; {len(weights)} weight tensors "
        f"({_format_bytes(sum(w.nbytes for w in weights))}): {described}"
    )
    _stdout.print(
        f"\nSaved [bold]{result.package}[/] ({_format_bytes(result.package_bytes)}; "
        f"traced in {result.trace_seconds * 1000:.0f} ms, saved in {result.save_seconds:.1f} s)"
    )
    fidelity = result.fidelity
    _stdout.print(
        f"\n[bold]Simulated[/] with the ANE's fp16 numerics (not a Neural Engine measurement): "
        f"max relative error {fidelity.max_relative_error:.2e}, min row cosine "
        f"{fidelity.min_cosine:.6f} against NumPy float64 ({fidelity.seconds * 1000:.0f} ms)"
    )
    for line in fidelity.report.summary().splitlines()[1:]:
        _stdout.print(f"  {line}", markup=False)
    _stdout.print(f"Backends that can run it here: {', '.join(backends)}")


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


@cli.command()
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
    feeds = _simulation_inputs(program, inputs, seed)
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
        _emit_json(payload)
    else:
        _stdout.print(f"[bold]{path}[/] function {program.function_name!r}: {len(report.ops)} ops")
        _stdout.print(report.summary(), markup=False)
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
        _stdout.print(table)
        _stdout.print(f"simulated in {result.seconds:.2f} s")
    if not report.ok:
        sys.exit(1)


@cli.command()
@json_option
def version(as_json: bool) -> None:
    """Show versions, the platform, available backends and error codes."""
    import coremltools
    import numpy

    from anekit.backends import available_backends

    codes = sorted(
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.AnekitError)
    )
    info = {
        "anekit": __version__,
        "coremltools": coremltools.__version__,
        "numpy": numpy.__version__,
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "backends": available_backends(),
        "error_codes": codes,
        "environment": config.ENVIRONMENT,
    }
    if as_json:
        _emit_json(info)
        return
    for key in ("anekit", "coremltools", "numpy", "python", "platform"):
        _stdout.print(f"{key:12} {info[key]}")
    _stdout.print(f"{'backends':12} {', '.join(info['backends']) or 'none'}")


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="anekit")
