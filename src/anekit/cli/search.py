"""``anekit index``, ``search``, ``status`` and ``forget``: code search from the shell."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from anekit.cli._common import emit_json, esc, format_bytes, progress_bar, stderr, stdout, with_json

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


wait_option = click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    metavar="SECONDS",
    help="How long to wait for another process writing the same index (one writer at a time).",
)


def _open(store: Path | None, **options: Any) -> Any:
    """The index that search, status and forget act on: the store given, else the one
    found at or above the current folder."""
    from anekit.search.index import Index, find_root

    if store is not None:
        return Index(Path.cwd(), store, **options)
    return Index(find_root(Path.cwd()), **options)


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

        def show(step: IndexProgress) -> None:
            elapsed = max(time.monotonic() - started, 1e-6)
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
        stderr.print(esc(_summary_line(root, summary)))
        for item in summary.skipped if list_skipped else ():
            detail = f" ({item.detail})" if item.detail else ""
            stderr.print(f"skipped {esc(item.relpath)}: {esc(item.reason)}{esc(detail)}")
        for node in summary.nodes if list_skipped else ():
            stderr.print(
                f"node {esc(node['node'][:12])} ({esc(node['lane'])}): {node['chunks']} chunks, "
                f"{node['chunks_per_s']:.1f} chunks/s"
            )
        for path, why in summary.failed.items():
            stderr.print(f"[red]error[/]: {esc(path)}: not indexed: {esc(why)}")
    if summary.failed:
        raise SystemExit(1)


def _summary_line(root: Path, summary: Any) -> str:
    skipped = ", ".join(
        f"{count} {reason}" for reason, count in summary.skipped_by_reason().items()
    )
    parts = [
        f"{root}: {summary.indexed} file(s) indexed, {summary.unchanged} unchanged, "
        f"{summary.removed} removed",
    ]
    if skipped:
        parts.append(f"skipped: {skipped} (--verbose lists them)")
    if summary.failed:
        parts.append(f"{len(summary.failed)} failed")
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
    return "; ".join(parts) + f"; {summary.seconds:.1f} s"


@click.command()
@click.argument("query")
@click.option("-k", "k", type=click.IntRange(min=1), default=10, show_default=True)
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
@store_option
@with_json
def search(
    query: str,
    k: int,
    mode: str,
    paths: tuple[str, ...],
    exts: tuple[str, ...],
    langs: tuple[str, ...],
    store: Path | None,
    as_json: bool,
) -> None:
    """Search the index that holds the current folder for QUERY: a question in words
    or an identifier (getUserName, Client.send)."""
    with _open(store) as opened:
        started = time.monotonic()
        hits = opened.search(query, k=k, mode=mode, paths=paths, exts=exts, langs=langs)
        elapsed = time.monotonic() - started
    if as_json:
        emit_json(
            {
                "query": query,
                "mode": mode,
                "k": k,
                "milliseconds": round(elapsed * 1000, 1),
                "hits": [hit.as_dict() for hit in hits],
            }
        )
        return
    if not hits:
        stderr.print("no hits")
        return
    for hit in hits:
        symbol = f"  [bold]{esc(hit.symbol)}[/]" if hit.symbol else ""
        stdout.print(
            f"[cyan]{esc(hit.path)}[/]:{hit.start_line}-{hit.end_line}{symbol}"
            f"  [dim]{esc(hit.kind)} {hit.score:.4f}[/]"
        )
        lines = [line for line in hit.snippet.splitlines() if line.strip()][:3]
        for line in lines:
            stdout.print(f"    [dim]{esc(line[:120])}[/]")


@click.command()
@store_option
@with_json
def status(store: Path | None, as_json: bool) -> None:
    """The index that holds the current folder: files, chunks, model, size, last update."""
    with _open(store) as opened:
        stats = opened.store.stats()
        report = {"root": str(opened.root), "store": str(opened.directory), **stats}
    if as_json:
        emit_json(report)
        return
    identity = stats.get("identity") or {}
    stdout.print(f"index:  {esc(report['store'])}")
    stdout.print(f"files:  {stats.get('files')}   chunks: {stats.get('chunks')}")
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
@click.argument("path", type=click.Path(path_type=Path))
@store_option
@wait_option
@with_json
def forget(path: Path, store: Path | None, wait: float, as_json: bool) -> None:
    """Drop PATH (a file or folder) from the index; it comes back on the next index
    unless it is ignored (.anekitignore)."""
    with _open(store, wait=wait) as opened:
        removed = opened.forget(path)
    if as_json:
        emit_json({"path": str(path), "removed": removed})
    else:
        stderr.print(f"forgot {len(removed)} file(s) under {esc(path)}")
