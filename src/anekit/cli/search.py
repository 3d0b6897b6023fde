"""``anekit index``, ``search``, ``status`` and ``forget``: code search from the shell."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import click

from anekit.cli._common import (
    emit_json,
    esc,
    esc_path,
    format_bytes,
    printable,
    progress_bar,
    shown,
    stderr,
    stdout,
    with_json,
)
from anekit.search.limits import MAX_K

store_option = click.option(
    "--store",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The store folder (default: $ANEKIT_STORE, else .anekit at the indexed root).",
)


def root_for(paths: tuple[Path, ...]) -> Path:
    """The root to index: the index holding the first path (or the current folder)
    when there is one, else that folder itself."""
    from anekit.errors import SearchError
    from anekit.search.index import find_root

    start = paths[0] if paths else Path.cwd()
    try:
        return find_root(start if start.is_dir() else start.parent)
    except SearchError:
        if paths and not start.is_dir():
            raise SearchError(f"{start}: no index holds it; index a folder first") from None
        return start.resolve()


lanes_option = click.option(
    "--lane", "lanes", multiple=True, help="Lanes to embed with (default: this machine's)."
)
model_option = click.option("--model", default=None, help="Model name or Hugging Face folder.")


def lane_names(lanes: tuple[str, ...]) -> list[str] | None:
    """``--lane`` values (repeated or comma-separated) as a list, None for the default."""
    names = [name.strip() for item in lanes for name in item.split(",") if name.strip()]
    return names or None


#: How often ``anekit index`` prints a progress line when stderr is not a terminal.
PROGRESS_EVERY_S = 5.0

wait_option = click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    metavar="SECONDS",
    help="How long to wait for another process writing the same index (one writer at a time).",
)


def _open(store: Path | None, **options: Any) -> Any:
    """The index that search, status and forget act on: the store given (``--store``,
    else ``$ANEKIT_STORE``), which must exist, with the root it was indexed from; else
    the one found at or above the current folder."""
    from anekit import config
    from anekit.errors import SearchError
    from anekit.search.index import Index, find_root
    from anekit.search.store import DB_FILE, Store

    store = store or config.search_store()
    if store is None:
        return Index(find_root(Path.cwd()), **options)
    if not (store / DB_FILE).is_file():
        raise SearchError(
            f"{store}: no search store here (is the path right? `anekit index` makes one)"
        )
    with Store(store, create=False) as opened:
        root = opened.root
    if root is None or not root.is_dir():
        root = Path.cwd()  # a store from before roots were recorded, or moved
    return Index(root, store, **options)


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
@store_option
@lanes_option
@model_option
@click.option(
    "--verbose",
    "list_skipped",
    is_flag=True,
    help="List the skipped files and why, and with --ray each node's rate.",
)
@click.option(
    "--ray",
    "ray",
    is_flag=False,
    flag_value="local",
    default=None,
    metavar="[ADDRESS]",
    help="Embed on a Ray cluster: ADDRESS (auto, HOST:PORT, ray://HOST:PORT), or without "
    "one an instance of this machine's own. Needs anekit[ray]; see docs/scale-out.md.",
)
@wait_option
@with_json
def index(
    paths: tuple[Path, ...],
    store: Path | None,
    lanes: tuple[str, ...],
    model: str | None,
    list_skipped: bool,
    ray: str | None,
    wait: float,
    as_json: bool,
) -> None:
    """Index PATHS (default: the current folder) for code search.

    The index lives in .anekit at the indexed root. Run again to bring it up to date:
    unchanged files are not read again and unchanged chunks not embedded again; a
    run that was interrupted resumes. PATHS inside an indexed root update that index.
    With --ray, the chunks' token ids are embedded on a Ray cluster (one lane: --lane,
    or auto for each node's best) and the vectors written here.
    """
    from rich.progress import TextColumn, TimeRemainingColumn

    from anekit.search.index import Index
    from anekit.search.index import Progress as IndexProgress

    root = root_for(paths)
    names = lane_names(lanes)
    plain = not as_json and not stderr.is_terminal  # a log: a line every few seconds
    bar = progress_bar(
        "indexing",
        TextColumn(
            "chunks, {task.fields[files]} files, {task.fields[rate]} chunks/s, {task.fields[lane]}"
        ),
        TimeRemainingColumn(),
        quiet=as_json,
    )
    started = time.monotonic()
    with Index(root, store, lanes=names, model=model, wait=wait, ray=ray) as built, bar:
        task = bar.add_task("index", total=None, files="0/0", rate="-", lane="")

        last_line = [started]

        def show(step: IndexProgress) -> None:
            now = time.monotonic()
            elapsed = max(now - started, 1e-6)
            if plain and now - last_line[0] >= PROGRESS_EVERY_S:
                last_line[0] = now
                stderr.print(
                    f"indexing: {step.chunks_done}/{step.chunks_total} chunks, "
                    f"{step.files_done}/{step.files_total} files, "
                    f"{step.chunks_done / elapsed:.0f} chunks/s, {esc(step.lane)}"
                )
            bar.update(
                task,
                total=step.chunks_total,
                completed=step.chunks_done,
                files=f"{step.files_done}/{step.files_total}",
                rate=f"{step.chunks_done / elapsed:.0f}",
                lane=step.lane,
            )

        summary = built.update(paths=list(paths) or None, progress=show)
    if as_json:
        emit_json({"root": str(root), **summary.as_dict()})
    else:
        if summary.rebuilt:
            stderr.print(
                f"[yellow]warning[/]: the index was damaged ({esc(summary.rebuilt)}); "
                "it was set aside as store.db.damaged and rebuilt from the files"
            )
        stderr.print(esc(_summary_line(root, summary, list_skipped)))
        for item in summary.skipped if list_skipped else ():
            detail = f" ({item.detail})" if item.detail else ""
            stderr.print(f"skipped {esc_path(item.relpath)}: {esc(item.reason)}{esc(detail)}")
        for path, why in summary.replaced.items() if list_skipped else ():
            stderr.print(f"[yellow]note[/]: {esc_path(path)}: {esc(why)}")
        for node in summary.nodes if list_skipped else ():
            stderr.print(
                f"node {esc(node['node'][:12])} ({esc(node['lane'])}): {node['chunks']} chunks, "
                f"{node['chunks_per_s']:.1f} chunks/s"
            )
        for path, why in summary.failed.items():
            stderr.print(f"[red]error[/]: {esc_path(path)}: not indexed: {esc(why)}")
    if summary.failed:
        raise SystemExit(1)


def _summary_line(root: Path, summary: Any, listed: bool = False) -> str:
    skipped = ", ".join(
        f"{count} {reason}" for reason, count in summary.skipped_by_reason().items()
    )
    parts = [
        f"{shown(root)}: {summary.indexed} file(s) indexed, {summary.unchanged} unchanged, "
        f"{summary.removed} removed",
    ]
    if skipped:
        parts.append(f"skipped: {skipped}" + ("" if listed else " (--verbose lists them)"))
    if summary.failed:
        parts.append(f"{len(summary.failed)} failed")
    if summary.replaced:
        parts.append(
            f"{len(summary.replaced)} not wholly UTF-8, read with U+FFFD for those bytes"
            + ("" if listed else " (--verbose lists them)")
        )
    parts.append(
        f"{summary.chunks} chunks in the index ({summary.embedded} embedded"
        + (f" on {summary.lane}" if summary.lane else "")
        + f", {summary.cached} from the cache)"
    )
    if summary.stand_ins:
        parts.append(
            f"{summary.stand_ins} chunk(s) embedded by a fallback lane of other numerics: "
            "the next run embeds them again"
        )
    if summary.reset:
        parts.append("the index was made by another model or chunker: embedded afresh")
    if summary.vector_index:
        parts.append(f"approximate vector index {summary.vector_index}")
    return "; ".join(parts) + f"; {summary.seconds:.1f} s"


@click.command()
@click.argument("query")
@click.option("-k", "k", type=click.IntRange(1, MAX_K), default=10, show_default=True)
@click.option(
    "--mode",
    type=click.Choice(["hybrid", "vector", "keyword"]),
    default="hybrid",
    show_default=True,
    help="hybrid: vector and keyword candidates fused by reciprocal rank.",
)
@click.option("--path", "paths", multiple=True, help="Only paths matching GLOB; !GLOB excludes.")
@click.option("--ext", "exts", multiple=True, help="Only this extension (py, .ts); !EXT excludes.")
@click.option("--lang", "langs", multiple=True, help="Only this language (python); !LANG excludes.")
@click.option(
    "--all",
    "every_root",
    is_flag=True,
    help="Search every root indexed on this machine (anekit status --all lists them).",
)
@click.option(
    "--root",
    "named_roots",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Search the index of this root too (repeatable); hits of several merged by score.",
)
@store_option
@click.option(
    "--model",
    default=None,
    help="Model name or Hugging Face folder to embed the query with (default: the one the "
    "index was made with, when given as a folder; else the default model).",
)
@with_json
def search(
    query: str,
    k: int,
    mode: str,
    paths: tuple[str, ...],
    exts: tuple[str, ...],
    langs: tuple[str, ...],
    every_root: bool,
    named_roots: tuple[Path, ...],
    store: Path | None,
    model: str | None,
    as_json: bool,
) -> None:
    """Search the index that holds the current folder for QUERY: a question in words
    or an identifier (getUserName, Client.send). With --all or --root, several roots'
    indexes, each hit naming its root; a root that cannot be searched is reported."""
    from anekit.search.limits import check_query

    check_query(query)  # before the store is opened (Index.search checks it too)
    if every_root or named_roots:
        from anekit.cli.search_all import chosen_roots, search_roots

        if store is not None:
            raise click.UsageError("--store names one index: give it or --all/--root")
        chosen = chosen_roots(every_root, named_roots)
        search_roots(query, k, mode, (paths, exts, langs), chosen, as_json)
        return
    with _open(store, model=model) as opened:
        started = time.monotonic()
        hits = opened.search(query, k=k, mode=mode, paths=paths, exts=exts, langs=langs)
        elapsed = time.monotonic() - started
        embedded, chunks = opened.store.embedded_counts()
    if as_json:
        emit_json(
            {
                "query": query,
                "mode": mode,
                "k": k,
                "milliseconds": round(elapsed * 1000, 1),
                "embedded_fraction": round(embedded / chunks, 4) if chunks else 1.0,
                "hits": [hit.as_dict() for hit in hits],
            }
        )
        return
    if embedded < chunks and mode != "keyword":
        stderr.print(
            f"note: {embedded:,} of {chunks:,} chunks embedded so far: the vector half "
            "sees only those (an index run is filling in the rest, or `anekit index` will)"
        )
    if not hits:
        stderr.print("no hits")
        return
    for hit in hits:
        echo_hit(hit)


def echo_hit(hit: Any, prefix: str = "") -> None:
    """A hit as text: ``prefix`` (its root, for several), path, lines, symbol, kind,
    score, and the snippet's first lines."""
    # click's styles, not rich's markup: a one-shot search need not import rich (about 45
    # ms); click leaves the colours out when stdout is not a terminal, and so does NO_COLOR.
    color = False if os.environ.get("NO_COLOR") else None
    head = click.style(printable(prefix), fg="magenta") if prefix else ""
    head += click.style(printable(shown(hit.path)), fg="cyan")
    head += f":{hit.start_line}-{hit.end_line}"
    if hit.symbol:
        head += "  " + click.style(printable(hit.symbol), bold=True)
    head += "  " + click.style(f"{printable(hit.kind)} {hit.score:.4f}", dim=True)
    click.echo(head, color=color)
    lines = [line for line in hit.snippet.splitlines() if line.strip()][:3]
    for line in lines:
        click.echo("    " + click.style(printable(line[:120]), dim=True), color=color)


@click.command()
@click.option(
    "--all", "every_root", is_flag=True, help="Every root indexed on this machine, a row each."
)
@click.option(
    "--prune", is_flag=True, help="With --all: forget roots whose folder or index is gone."
)
@store_option
@with_json
def status(every_root: bool, prune: bool, store: Path | None, as_json: bool) -> None:
    """The index that holds the current folder: files, chunks, model, size, last update.
    With --all, every root indexed on this machine (a gone one reported as missing)."""
    from anekit.errors import DamagedStoreError

    if prune and not every_root:
        raise click.UsageError("--prune goes with --all")
    if every_root:
        from anekit.cli.search_all import status_roots

        if store is not None:
            raise click.UsageError("--store names one index: give it or --all")
        status_roots(prune, as_json)
        return
    with _open(store) as opened:
        try:
            health = opened.store.check()
            stats = opened.store.stats() if health == "ok" else {}
        except DamagedStoreError as error:
            health, stats = str(error.__cause__ or error), {}
        report = {
            "root": str(opened.root),
            "store": str(opened.directory),
            "health": health,
            **stats,
        }
    if health != "ok":
        message = (
            f"{opened.directory}: the index is damaged ({health}): run `anekit index`, "
            "which rebuilds it from the files"
        )
        if as_json:
            emit_json({**report, "error": "DamagedStoreError", "message": message})
        else:
            stderr.print(f"[bold red]error[/] (DamagedStoreError): {esc(message)}")
        raise SystemExit(2)
    if as_json:
        emit_json(report)
        return
    identity = stats.get("identity") or {}
    stdout.print(f"index:  {esc_path(report['store'])}")
    stdout.print(f"health: {esc(health)} (SQLite quick_check)")
    stdout.print(f"files:  {stats.get('files')}   chunks: {stats.get('chunks')}")
    if stats.get("embedded", 0) < stats.get("chunks", 0):
        stdout.print(
            f"embedded: {stats['embedded']} of {stats['chunks']} chunks "
            f"({stats['embedded_fraction']:.0%}): keyword search finds every chunk, vector "
            "search only these until `anekit index` finishes"
        )
    languages = stats.get("languages") or {}
    if languages:
        listed = ", ".join(f"{esc(name)} {count}" for name, count in languages.items())
        stdout.print(f"languages: {listed} (files; --lang takes these names)")
    if identity:
        stdout.print(
            f"model:  {esc(identity.get('model'))} ({esc(identity.get('variant'))}), "
            f"chunker {esc(identity.get('chunker'))}, max length {identity.get('max_length')}"
        )
    for variant, count in (stats.get("stand_ins") or {}).items():
        stdout.print(
            f"note:   {count} chunk(s) embedded by a {esc(variant)} lane standing in for the "
            "store's; the next `anekit index` embeds them again"
        )
    if stats.get("bytes") is not None:
        stdout.print(f"size:   {format_bytes(int(stats['bytes']))}")
    if stats.get("last_write"):
        written = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(stats["last_write"])))
        stdout.print(f"updated: {written}")


@click.command()
@click.argument("path", required=False)
@click.option("--all", "everything", is_flag=True, help="Drop every file (PATH not given).")
@store_option
@wait_option
@with_json
def forget(
    path: str | None, everything: bool, store: Path | None, wait: float, as_json: bool
) -> None:
    """Drop PATH (a file or folder) from the index; it comes back on the next index
    unless it is ignored (.anekitignore). The whole index needs --all."""
    from anekit.errors import SearchError
    from anekit.search.walk import relpath_in

    if everything == (path is not None):
        raise click.UsageError("give PATH or --all (not both)")
    with _open(store, wait=wait) as opened:
        if path is not None and (not path.strip() or relpath_in(opened.root, Path(path)) == ""):
            raise SearchError(
                f"{path!r} is the whole index at {opened.root}: to drop every file, "
                "run `anekit forget --all`"
            )
        removed = opened.forget(opened.root if path is None else path)
    named = "--all" if path is None else path
    if as_json:
        emit_json({"path": named, "removed": removed})
    else:
        stderr.print(f"forgot {len(removed)} file(s) under {esc_path(named)}")
