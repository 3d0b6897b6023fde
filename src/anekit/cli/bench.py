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
    "--latency",
    "latency_mode",
    is_flag=True,
    help="Latency of one request at a time (p50/p95/p99) apart from saturated throughput.",
)
@click.option(
    "--in-flight", default=4, show_default=True, help="--latency: requests in flight at once."
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
    latency_mode: bool,
    in_flight: int,
    save: Path | None,
    as_json: bool,
) -> None:
    """Time the seed-003 workloads (FFN block, x·W at three sizes) and the embedding
    model (4 x 256 tokens) on every column this
    machine has: the ANE and GPU through Core ML (macOS), NumPy fp32, ONNX Runtime CPU
    fp32, and the simulator (simulated, not a device figure). A missing column says why."""
    from anekit import bench as bench_module

    chosen = columns or tuple(bench_module.COLUMNS)
    progress = None if as_json else lambda message: stderr.print(esc(message))
    if latency_mode:
        try:
            rows = bench_module.latency(
                size=size,
                columns=chosen,
                requests=repeat * passes,
                in_flight=in_flight,
                warmup=warmup,
                model=not no_model,
                progress=progress,
            )
        except ValueError as error:
            raise click.UsageError(str(error)) from error
        latency_payload = {
            "machine": bench_module.machine(),
            "columns": list(chosen),
            "rows": [
                {"workload": w.name, "cells": {k: c.to_json() for k, c in cells.items()}}
                for w, cells in rows
            ],
        }
        if save is not None:
            save.write_text(json.dumps(latency_payload, indent=2) + "\n")
        if as_json:
            emit_json(latency_payload)
        else:
            click.echo(bench_module.latency_markdown(rows, chosen), nl=False)
        return
    try:
        result = bench_module.run(
            size=size,
            columns=chosen,
            repeat=repeat,
            passes=passes,
            warmup=warmup,
            model=not no_model,
            progress=progress,
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
