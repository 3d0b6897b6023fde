"""``anekit bench``: the seed-003 table for this machine (and ``bench sweep``, a grid of
conv1x1 and matmul shapes), Markdown or ``--json``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from anekit._bench_columns import COLUMNS, DEFAULT_COLUMNS
from anekit.cli._common import emit_json, esc, stderr, with_json
from anekit.cli._pages import check_html, html_option, write_page

F = TypeVar("F", bound=Callable[..., Any])

#: ``anekit.bench.COLUMNS``' keys, from the light module that states them.
COLUMN_KEYS = tuple(COLUMNS)


def _known_columns(
    ctx: click.Context, param: click.Parameter, columns: tuple[str, ...]
) -> tuple[str, ...]:
    """--column's check: each a column of the bench, else a usage error naming them."""
    unknown = sorted(set(columns) - set(COLUMN_KEYS))
    if unknown:
        raise click.BadParameter(
            f"unknown column(s) {', '.join(unknown)}; choose from {', '.join(COLUMN_KEYS)}"
        )
    return columns


_AT_LEAST_ONE = click.IntRange(min=1)
_MEASURE_OPTIONS = [
    click.option(
        "--column",
        "columns",
        multiple=True,
        callback=_known_columns,
        help="Only these columns (ane, gpu, numpy, onnxruntime, simulator, and the experimental "
        "direct, run only when named); repeatable.",
    ),
    click.option(
        "--repeat", type=_AT_LEAST_ONE, default=5, show_default=True, help="Calls per pass."
    ),
    click.option(
        "--passes",
        type=_AT_LEAST_ONE,
        default=3,
        show_default=True,
        help="Passes, columns taking turns.",
    ),
    click.option(
        "--warmup",
        type=_AT_LEAST_ONE,
        default=2,
        show_default=True,
        help="Warm-up calls per column (the first is also timed as the cold call).",
    ),
    click.option(
        "--save",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Also write the JSON report here (the file to share with the table).",
    ),
    html_option,
]


def measure_options(func: F) -> F:
    for option in reversed(_MEASURE_OPTIONS):
        func = option(func)
    return func


def _show(
    payload: dict[str, Any], text: str, save: Path | None, html: Path | None, as_json: bool
) -> None:
    if save is not None:
        save.write_text(json.dumps(payload, indent=2) + "\n")
    if html is not None:
        from anekit import pages

        name = save.name if save is not None else "this run"
        write_page(html, pages.bench_page([(name, payload)]))
    if as_json:
        emit_json(payload)
    else:
        click.echo(text, nl=False)


def _progress(as_json: bool) -> Callable[[str], None] | None:
    return None if as_json else lambda message: stderr.print(esc(message))


@click.group(invoke_without_command=True)
@click.option(
    "--size",
    type=click.Choice(["full", "small"]),
    default="full",
    show_default=True,
    help="small: every dimension divided by 8 (a quick look; what CI runs).",
)
@measure_options
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
    "--in-flight",
    type=_AT_LEAST_ONE,
    default=4,
    show_default=True,
    help="--latency: requests in flight at once.",
)
@with_json
@click.pass_context
def bench(
    ctx: click.Context,
    size: str,
    columns: tuple[str, ...],
    repeat: int,
    passes: int,
    warmup: int,
    save: Path | None,
    html: Path | None,
    no_model: bool,
    latency_mode: bool,
    in_flight: int,
    as_json: bool,
) -> None:
    """Time the seed-003 workloads (FFN block, x·W at three sizes) and the embedding
    model (4 x 256 tokens) on every column this machine has: the ANE and GPU through
    Core ML (macOS), NumPy fp32, ONNX Runtime CPU fp32, and the simulator (simulated,
    not a device figure); `--column direct` adds the experimental direct ANE path
    (private API, macOS). A missing column says why. `anekit bench sweep`: a grid."""
    if ctx.invoked_subcommand is not None:
        return
    check_html(html)
    if latency_mode and html is not None:
        raise click.UsageError("--html charts throughput; it does not take --latency")
    from anekit import bench as bench_module

    chosen = columns or DEFAULT_COLUMNS
    try:
        if latency_mode:
            rows = bench_module.latency(
                size=size,
                columns=chosen,
                requests=repeat * passes,
                in_flight=in_flight,
                warmup=warmup,
                model=not no_model,
                progress=_progress(as_json),
            )
            text = bench_module.latency_markdown(rows, chosen)
            _show(bench_module.latency_json(rows, chosen), text, save, None, as_json)
            return
        result = bench_module.run(
            size=size,
            columns=chosen,
            repeat=repeat,
            passes=passes,
            warmup=warmup,
            model=not no_model,
            progress=_progress(as_json),
        )
    except ValueError as error:
        raise click.UsageError(str(error)) from error
    _show(result.to_json(), bench_module.markdown(result), save, html, as_json)


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise click.BadParameter(f"{text!r}: comma-separated integers") from None
    if not sizes or min(sizes) < 1:
        raise click.BadParameter(f"{text!r}: sizes must be at least 1")
    return sizes


@bench.command()
@click.option(
    "--channels", default="256,512,1024,2048", show_default=True, help="Channels C (comma list)."
)
@click.option(
    "--sequence", default="64,256,1024", show_default=True, help="Sequence lengths S (comma list)."
)
@measure_options
@with_json
def sweep(
    channels: str,
    sequence: str,
    columns: tuple[str, ...],
    repeat: int,
    passes: int,
    warmup: int,
    save: Path | None,
    html: Path | None,
    as_json: bool,
) -> None:
    """conv1x1 on (1, C, 1, S) and x·W with x (S, C), W (C, C) over a grid of channels and
    sequence lengths, on every column: where throughput steps as shapes grow."""
    grid = _sizes(channels), _sizes(sequence)
    check_html(html)
    from anekit import bench as bench_module  # coremltools: only once the arguments are good

    rows = bench_module.sweep_workloads(*grid)
    try:
        result = bench_module.run(
            columns=columns or DEFAULT_COLUMNS,
            repeat=repeat,
            passes=passes,
            warmup=warmup,
            progress=_progress(as_json),
            rows=rows,
        )
    except ValueError as error:
        raise click.UsageError(str(error)) from error
    _show(result.to_json(), bench_module.markdown(result), save, html, as_json)


@bench.command()
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option(
    "--html",
    "html",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The page to write: one self-contained HTML file (no network).",
)
def plot(files: tuple[Path, ...], html: Path) -> None:
    """Chart saved bench JSON (`anekit bench --save FILE`, `bench sweep --save FILE`):
    GFLOP/s against each workload's size, one line per column and per file, so that
    several machines' runs read on one chart."""
    from anekit import pages

    check_html(html)
    runs = []
    for path in files:
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as error:
            raise click.BadParameter(f"{path}: not JSON: {error}", param_hint="FILES") from error
        try:
            runs.append((path.name, pages.check_bench_json(payload, str(path))))
        except pages.BenchFileError as error:
            raise click.BadParameter(str(error), param_hint="FILES") from error
    write_page(html, pages.bench_page(runs))
