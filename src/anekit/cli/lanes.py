"""``anekit lanes`` (the lanes on this machine) and ``anekit embed`` (texts to vectors)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from anekit.cli._common import emit_json, handles_errors, json_option, stderr, stdout


def _lane_names(lanes: tuple[str, ...]) -> list[str] | None:
    names = [name.strip() for item in lanes for name in item.split(",") if name.strip()]
    return names or None


@click.command()
@click.option(
    "--lane", "lanes", multiple=True, help="Lanes to start (repeatable or comma-separated)."
)
@click.option("--all", "every", is_flag=True, help="Start every lane this machine can run.")
@click.option("--model", default=None, help="Model name or Hugging Face folder.")
@json_option
@handles_errors
def lanes(lanes: tuple[str, ...], every: bool, model: str | None, as_json: bool) -> None:
    """Start the lanes, admit them on the known answers, report each, and stop them.

    Without --lane or --all: the default lanes (the ANE lane on a Mac, else the CPU
    lane). The sim lane stands in for the ANE off macOS and is only started when named.
    """
    from anekit.lanes import LANES, Scheduler, unavailable_reason

    names = _lane_names(lanes)
    unavailable: list[dict[str, Any]] = []
    if every:
        names = [name for name in LANES if name != "sim" and unavailable_reason(name) is None]
        unavailable = [
            {"lane": name, "state": "unavailable", "reason": unavailable_reason(name)}
            for name in LANES
            if unavailable_reason(name) is not None
        ]
    if not as_json:
        stderr.print("Starting lanes and checking them on the known answers...")
    with Scheduler(names, model=model) as scheduler:
        scheduler.start()
        report = scheduler.status() + unavailable
    if as_json:
        emit_json(report)
        return
    table = Table(title="Lanes", title_justify="left")
    for column in ("lane", "state", "device", "tokens/s", "chunks/s", "min cosine", "why"):
        table.add_column(column, overflow="fold")
    for item in report:
        rate = item.get("rate_tokens_per_s")
        chunks = item.get("chunks_per_s")
        cosine = item.get("min_cosine")
        table.add_row(
            item["lane"],
            item["state"],
            item.get("device") or "",
            f"{rate:.0f}" if rate else "",
            f"{chunks:.1f}" if chunks else "",
            f"{cosine:.6f}" if cosine is not None else "",
            item.get("reason") or "",
        )
    stdout.print(table)


def _read_texts(source: str) -> list[str]:
    """One text per line; a line that is a JSON string, or an object with "text", is
    decoded (so texts can hold newlines)."""
    from anekit.errors import ModelError

    raw = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    name = "stdin" if source == "-" else source
    texts = []
    for number, encoded in enumerate(raw.splitlines(), start=1):
        try:
            line = encoded.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ModelError(f"{name}, line {number}: not UTF-8 ({error.reason})") from None
        try:
            value = json.loads(line)
        except ValueError:
            texts.append(line)
            continue
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, dict) and isinstance(value.get("text"), str):
            texts.append(value["text"])
        else:
            texts.append(line)
    return texts


@click.command()
@click.argument(
    "source", default="-", type=click.Path(exists=True, dir_okay=False, allow_dash=True)
)
@click.option("--lane", "lanes", multiple=True, help="Lanes to use (default: this machine's).")
@click.option("--model", default=None, help="Model name or Hugging Face folder.")
@click.option("--max-length", type=int, default=None, help="Truncation length (max 512).")
@click.option("--deadline", type=float, default=30.0, show_default=True, help="Seconds per batch.")
@handles_errors
def embed(
    source: str, lanes: tuple[str, ...], model: str | None, max_length: int | None, deadline: float
) -> None:
    """Embed the texts in SOURCE (a file, or - for stdin): one JSON vector per line out.

    Input is one text per line; a line holding a JSON string or an object with a
    "text" field is decoded first. Progress goes to stderr.
    """
    from anekit.models import Embedder

    texts = _read_texts(source)
    with Embedder(
        model, lanes=_lane_names(lanes) or [], max_length=max_length, deadline=deadline
    ) as embedder:
        token_ids = embedder.tokenize(texts)
        progress = Progress(
            TextColumn("embedding"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=stderr,
            transient=True,
        )
        with progress:
            task = progress.add_task("embed", total=len(texts))
            scheduler = embedder.scheduler
            scheduler.progress = lambda done, total: progress.update(task, completed=done)
            vectors = embedder.embed_ids(token_ids)
    for vector in vectors:
        click.echo(json.dumps([round(float(value), 7) for value in vector]))
