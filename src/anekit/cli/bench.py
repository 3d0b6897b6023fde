"""``anekit bench``: the seed-003 table for this machine, Markdown or ``--json``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from anekit.cli._common import emit_json, esc, stderr, with_json


@click.command()
@click.option(
    "--size",
    type=click.Choice(["full", "small"]),
    default="full",
    show_default=True,
    help="small: every dimension divided by 8 (a quick look; what CI runs).",
)
@click.option(
    "--column",
    "columns",
    multiple=True,
    help="Only these columns (ane, gpu, numpy, onnxruntime, simulator); repeatable.",
)
@click.option("--repeat", default=5, show_default=True, help="Calls per pass.")
@click.option("--passes", default=3, show_default=True, help="Passes, columns taking turns.")
@click.option(
    "--warmup",
    default=2,
    show_default=True,
    help="Warm-up calls per column (the first is also timed as the cold call).",
)
@click.option(
    "--no-model",
    is_flag=True,
    help="Leave out the embedding model's row (its package is built once, about a minute).",
)
@click.option(
    "--save",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the JSON report here (the file to share with the table).",
)
@with_json
def bench(
    size: str,
    columns: tuple[str, ...],
    repeat: int,
    passes: int,
    warmup: int,
    no_model: bool,
    save: Path | None,
    as_json: bool,
) -> None:
    """Time the seed-003 workloads (FFN block, x·W at three sizes) and the embedding
    model (4 x 256 tokens) on every column this
    machine has: the ANE and GPU through Core ML (macOS), NumPy fp32, ONNX Runtime CPU
    fp32, and the simulator (simulated, not a device figure). A missing column says why."""
    from anekit import bench as bench_module

    chosen = columns or tuple(bench_module.COLUMNS)
    try:
        result = bench_module.run(
            size=size,
            columns=chosen,
            repeat=repeat,
            passes=passes,
            warmup=warmup,
            model=not no_model,
            progress=None if as_json else lambda message: stderr.print(esc(message)),
        )
    except ValueError as error:
        raise click.UsageError(str(error)) from error
    payload = result.to_json()
    if save is not None:
        save.write_text(json.dumps(payload, indent=2) + "\n")
    if as_json:
        emit_json(payload)
    else:
        click.echo(bench_module.markdown(result), nl=False)
