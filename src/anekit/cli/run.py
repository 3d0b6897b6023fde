"""``anekit run``: a package's run report: what ran where, cold and warm times, I/O."""

from __future__ import annotations

from pathlib import Path

import click

from anekit.cli._common import emit_json, with_json
from anekit.cli._inputs import (
    check_inputs,
    check_package,
    inputs_option,
    program_inputs,
    seed_option,
)
from anekit.runtimes import program_runtimes


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--function", default=None, help="Function of a multifunction package.")
@inputs_option
@click.option(
    "--backend",
    type=click.Choice([runtime.name for runtime in program_runtimes()]),
    default=None,
    help="Default: Core AI on macOS 27 (Core ML for a program it cannot take), Core ML on "
    "other Macs, else the simulator. direct: the experimental private "
    "ANE path (macOS), which falls back to Core ML with a warning when it cannot load. "
    "coreai-cpu: Apple's Core AI runtime on the CPU (the coreai extra; never an ANE figure).",
)
@click.option(
    "--compute-units",
    type=click.Choice(["CPU_AND_NE", "CPU_AND_GPU", "CPU_ONLY", "ALL"]),
    default=None,
    help="Core ML's compute units (default CPU_AND_NE).",
)
@click.option(
    "--numerics",
    "--mode",
    "mode",
    default=None,
    help="The simulator's numerics (ane, fp32) or ONNX Runtime's (fp32, int8) (--mode: "
    "the older name).",
)
@click.option("--repeat", default=10, show_default=True, help="Warm calls after the cold one.")
@seed_option
@with_json
def run(
    path: Path,
    function: str | None,
    inputs: Path | None,
    backend: str | None,
    compute_units: str | None,
    mode: str | None,
    repeat: int,
    seed: int,
    as_json: bool,
) -> None:
    """Run PATH (an .mlpackage) and report what ran where: backend and device, the
    compute units asked for, the compute plan's residency and any fallback (Core ML on
    a Mac), the cold call (loading included), warm p50/p95 and calls per second, and
    the I/O shapes and bytes. A simulated run says so: it is never an ANE figure."""
    if compute_units is not None and mode is not None:
        raise click.UsageError(
            "give --compute-units or --numerics, not both: on Core ML both set its compute units"
        )
    if compute_units is not None and backend not in (None, "coreml"):
        raise click.UsageError(f"--compute-units applies to Core ML, not --backend {backend}")
    if repeat < 1:
        raise click.BadParameter("must be at least 1", param_hint="--repeat")
    check_package(path)
    check_inputs(inputs)
    import anekit  # coremltools and the backends: only once the arguments are good
    from anekit.runs import measure

    program = anekit.load(path, function=function)
    feeds = program_inputs(program, inputs, seed)
    arrays = [feeds[str(spec.name)] for spec in program.input_specs]
    backend = "coreml" if compute_units is not None else backend
    result = measure(program, *arrays, backend=backend, mode=compute_units or mode, repeat=repeat)
    if as_json:
        emit_json(result.to_json())
    else:
        click.echo(result.describe())
