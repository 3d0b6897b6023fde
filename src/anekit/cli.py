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
    if backends:
        _stdout.print(f"Backends that can run it here: {', '.join(backends)}")
    else:
        _stdout.print(
            "No backend can run it on this machine: Core ML needs macOS; the ANE simulator "
            "is not available yet. Open the package on a Mac, or inspect it with "
            "CompiledProgram.mil_text()."
        )


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
