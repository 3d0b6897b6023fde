"""``anekit lanes`` (the lanes on this machine) and ``anekit embed`` (texts to vectors)."""

from __future__ import annotations

import codecs
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.progress import TimeElapsedColumn

from anekit.cli._common import (
    emit_json,
    esc,
    esc_path,
    handles_errors,
    positive_seconds,
    progress_bar,
    stderr,
    stdout,
    titled_table,
    with_json,
)
from anekit.cli.search import lane_names, model_option

if TYPE_CHECKING:  # imported where used: the embedder loads NumPy and the models
    from anekit.embedder import Embedder


@click.command()
@click.option(
    "--lane", "lanes", multiple=True, help="Lanes to start (repeatable or comma-separated)."
)
@click.option("--all", "every", is_flag=True, help="Start every lane this machine can run.")
@model_option
@with_json
def lanes(lanes: tuple[str, ...], every: bool, model: str | None, as_json: bool) -> None:
    """Start the lanes, admit them on the known answers, report each, and stop them.

    Without --lane or --all: the default lanes (the ANE lane on a Mac, else the CPU
    lane). The sim lane stands in for the ANE off macOS, and the direct lane (the private
    ANE framework; experimental): each is only started when named.
    """
    from anekit.lanes import LANES, Scheduler, unavailable_reason

    names = lane_names(lanes)
    unavailable: list[dict[str, Any]] = []
    if every:
        names = [
            name
            for name in LANES
            if name not in ("sim", "direct") and unavailable_reason(name) is None
        ]
        unavailable = [
            {"lane": name, "state": "unavailable", "reason": unavailable_reason(name)}
            for name in LANES
            if unavailable_reason(name) is not None
        ]
        if unavailable_reason("direct") is None:  # experimental: listed, not started
            unavailable.append(
                {"lane": "direct", "state": "skipped",
                 "reason": "experimental (private API); start it with --lane direct"}
            )  # fmt: skip
    if not as_json:
        stderr.print("Starting lanes and checking them on the known answers...")
    with Scheduler(names, model=model) as scheduler:
        scheduler.start()
        report = scheduler.status() + unavailable
    if as_json:
        emit_json(report)
        return
    columns = ("lane", "state", "device", "tokens/s", "chunks/s", "min cosine", "why")
    table = titled_table("Lanes", columns)
    for item in report:
        rate = item.get("rate_tokens_per_s")
        chunks = item.get("chunks_per_s")
        cosine = item.get("min_cosine")
        # Cells are rich markup: a worker's reason (its stderr) or device is shown as written.
        table.add_row(
            esc(item["lane"]),
            esc(item["state"]),
            esc(item.get("device") or ""),
            f"{rate:.0f}" if rate else "",
            f"{chunks:.1f}" if chunks else "",
            f"{cosine:.6f}" if cosine is not None else "",
            esc(item.get("reason") or ""),
        )
    stdout.print(table)


#: How ``anekit embed`` reads its input (``--format``).
FORMATS = ("auto", "text", "jsonl")
_JSONL_SUFFIXES = (".jsonl", ".ndjson")
_QUOTED = 60  # characters of a bad line quoted in its warning
_LISTED = 10  # line numbers listed in the summary
_TRUNCATED_CHARACTER = "truncated (no newline at the end, in the middle of a UTF-8 character)"


@dataclass
class _Input:
    """The texts of ``anekit embed``'s input, by line number (1-based)."""

    name: str  # "stdin" or the path, for messages
    why: str  # how --format auto chose JSON lines from the first line, else ""
    lines: int = 0
    texts: list[tuple[int, str]] = field(default_factory=list)
    bad: list[tuple[int, str]] = field(default_factory=list)  # (line, what is wrong)


def _choose_format(chosen: str, source: str, lines: list[bytes]) -> tuple[str, str]:
    """``text`` or ``jsonl`` for ``--format chosen``, and how auto decided."""
    if chosen != "auto":
        return chosen, ""
    if source != "-" and source.lower().endswith(_JSONL_SUFFIXES):
        return "jsonl", ""  # no note: the name says so
    first = next((line.strip() for line in lines if line.strip()), b"")
    if first[:1] in (b"{", b'"'):
        return "jsonl", f"its first line begins with {first[:1].decode()}"
    return "text", ""


def _quoted(line: str) -> str:
    return line if len(line) <= _QUOTED else line[: _QUOTED - 3] + "..."


def _text_of(line: str, form: str, unterminated: bool) -> tuple[str | None, str]:
    """The text a line holds, or None and what is wrong with it."""
    if not line.strip():
        return None, "empty line"
    text = line
    if form == "jsonl":
        try:
            value = json.loads(line)
        except (ValueError, RecursionError) as error:
            if unterminated:
                return None, f"{_quoted(line)} is truncated (no newline at the end, not valid JSON)"
            reason = error.msg if isinstance(error, json.JSONDecodeError) else "nested too deep"
            return None, f"{_quoted(line)} is not valid JSON ({reason})"
        if isinstance(value, dict):
            value = value.get("text")
            if not isinstance(value, str):
                return None, f'{_quoted(line)} has no "text" string'
        elif not isinstance(value, str):
            return None, f'{_quoted(line)} is not a JSON string or an object with a "text" string'
        text = value
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return None, (
            f"{_quoted(line)} is not valid Unicode: character {error.start} of its text is a "
            f"lone surrogate (U+{ord(text[error.start]):04X})"
        )
    return text, ""


def _read_input(source: str, chosen: str) -> _Input:
    """Read SOURCE as ``--format chosen`` says: each line a text or a bad line."""
    raw = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    raw = raw.removeprefix(codecs.BOM_UTF8)
    lines = raw.splitlines()
    form, why = _choose_format(chosen, source, lines)
    read = _Input("stdin" if source == "-" else source, why, len(lines))
    unterminated_end = bool(raw) and not raw.endswith((b"\n", b"\r"))
    for number, encoded in enumerate(lines, start=1):
        unterminated = unterminated_end and number == len(lines)
        try:
            line = encoded.decode("utf-8")
        except UnicodeDecodeError as error:
            if unterminated and error.reason == "unexpected end of data":
                read.bad.append((number, _TRUNCATED_CHARACTER))
            else:
                where = f"byte {error.start + 1}: {error.reason}"
                read.bad.append((number, f"not valid UTF-8 ({where})"))
            continue
        text, problem = _text_of(line, form, unterminated)
        if text is None:
            read.bad.append((number, problem))
        else:
            read.texts.append((number, text))
    return read


def _count(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _listed(numbers: list[int]) -> str:
    """``line 3`` or ``lines 3, 7 and 2 more``."""
    shown = ", ".join(str(number) for number in numbers[:_LISTED])
    more = len(numbers) - _LISTED
    tail = f" and {more} more" if more > 0 else ""
    return f"{'lines' if numbers[1:] else 'line'} {shown}{tail}"


@click.command()
@click.argument(
    "source", default="-", type=click.Path(exists=True, dir_okay=False, allow_dash=True)
)
@click.option("--lane", "lanes", multiple=True, help="Lanes to use (default: this machine's).")
@model_option
@click.option("--max-length", type=int, default=None, help="Truncation length (max 512).")
@click.option(
    "--deadline",
    type=float,
    default=30.0,
    show_default=True,
    callback=positive_seconds,
    help="Seconds per batch.",
)
@click.option(
    "--format",
    "form",
    type=click.Choice(FORMATS),
    default="auto",
    show_default=True,
    help='text: each line is a text. jsonl: each line a JSON string or {"text": ...}. '
    'auto: jsonl for *.jsonl and *.ndjson, or when the first line begins with { or ", '
    "else text.",
)
@click.option("--strict", is_flag=True, help="A bad input line is an error: nothing is embedded.")
@handles_errors
def embed(
    source: str,
    lanes: tuple[str, ...],
    model: str | None,
    max_length: int | None,
    deadline: float,
    form: str,
    strict: bool,
) -> None:
    """Embed the texts in SOURCE (a file, or - for stdin): one output line per input line.

    Each output line is the JSON vector of the input line with the same number, or
    null for a line that was skipped: an empty line, a JSON line that is not a string
    or an object with a "text" string, a truncated last line, a line that is not
    UTF-8, a text that is not valid Unicode. Skipped lines are warned about on
    stderr, by line number; with --strict the first one is an error (exit status 2)
    and nothing is embedded.

    Vectors are written as soon as they and every line before them are done, so an
    interrupted run keeps what it finished. A worker that crashes is restarted and
    its chunks embedded again; a chunk that kills every worker that tries it is
    written as null, named on stderr, and the exit status is 1. Progress and a
    summary (embedded, retried and failed chunks) go to stderr.
    """
    from anekit.embedder import Embedder
    from anekit.errors import ModelError

    read = _read_input(source, form)
    if read.bad and strict:
        (number, problem), rest = read.bad[0], [line for line, _ in read.bad[1:]]
        more = f"; {len(rest)} more bad: {_listed(rest)}" if rest else ""
        raise ModelError(
            f"{read.name}, line {number}: {problem}; nothing embedded (--strict{more})"
        )
    for number, problem in read.bad:
        stderr.print(
            f"[yellow]warning[/]: {esc_path(read.name)}, line {number}: {esc(problem)}; skipped"
        )
    writer = _LineWriter(read.lines)
    # Made even for no texts: a bad lane, model or ANEKIT_FAULT is named all the same.
    with Embedder(
        model, lanes=lane_names(lanes) or [], max_length=max_length, deadline=deadline
    ) as embedder:
        summary = _embed(read, writer, embedder)
    writer.finish()
    skipped = [number for number, _ in read.bad]
    failed = summary.get("failed_lines", [])
    parts = [f"embedded {summary['embedded']} of {_count(read.lines, 'line')}"]
    if summary.get("retried"):
        parts.append(f"{summary['retried']} retried after a worker failed")
    if failed:
        parts.append(f"{len(failed)} failed ({_listed(failed)})")
    if skipped:
        parts.append(f"{len(skipped)} skipped ({_listed(skipped)})")
    stderr.print(esc("; ".join(parts)))
    if read.bad and read.why:
        stderr.print(
            f"note: {esc_path(read.name)} was read as JSON lines ({esc(read.why)}); "
            "--format text embeds each line as it is"
        )
    if failed:
        sys.exit(1)


class _LineWriter:
    """Writes one JSON line per input line, in order, each flushed as soon as it can
    be: a vector, or null for a skipped or failed line."""

    def __init__(self, lines: int) -> None:
        self.lines = lines
        self.next = 1  # the next line number to write

    def write(self, number: int, vector: Any) -> None:
        """Line ``number``'s vector (None: null); lines before it not given are null."""
        while self.next < number:
            self._emit(None)
        self._emit(vector)

    def finish(self) -> None:
        while self.next <= self.lines:
            self._emit(None)

    def _emit(self, vector: Any) -> None:
        values = None if vector is None else [round(float(value), 7) for value in vector]
        click.echo(json.dumps(values))  # flushed
        self.next += 1


def _embed(read: _Input, writer: _LineWriter, embedder: Embedder) -> dict[str, Any]:
    """Embed ``read``'s texts with ``embedder``'s lanes, writing each vector as it is
    done, with a progress bar on stderr; the run's summary (:class:`RunSummary` as a
    dict, plus ``failed_lines``)."""
    texts = [text for _, text in read.texts]
    if not texts:
        return {"embedded": 0}  # no worker started for nothing
    token_ids = embedder.tokenize(texts)
    failed_lines: list[int] = []
    with progress_bar("embedding", TimeElapsedColumn()) as progress:
        task = progress.add_task("embed", total=len(texts))
        pool = embedder.pool
        assert pool is not None  # made with lanes=
        pool.progress = lambda done, total: progress.update(task, completed=done)
        pool.notify = lambda line: stderr.print(f"note: {esc(line)}")
        for index, vector, why, _ in pool.stream(token_ids):
            number = read.texts[index][0]
            if why is not None:
                failed_lines.append(number)
                stderr.print(
                    f"[red]error[/]: {esc_path(read.name)}, line {number}: not embedded: {esc(why)}"
                )
            writer.write(number, vector)
    summary: dict[str, Any] = pool.summary.as_dict()
    summary["failed_lines"] = failed_lines
    return summary
