"""``anekit search --all`` / ``--root`` and ``anekit status --all``: the roots this machine
has indexed (:mod:`anekit.search.roots`), searched together or listed."""

from __future__ import annotations

__all__ = ["chosen_roots", "search_roots", "status_roots"]

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from anekit.cli._common import emit_json, esc, esc_path, format_bytes, stderr, stdout


def chosen_roots(every: bool, named: Sequence[Path]) -> dict[Path, Path]:
    """Root -> store: every registered root (``every``) and the indexes holding the
    ``named`` paths (a registered root keeps its recorded store; a path with no index or
    gone is kept, to be reported as skipped)."""
    from anekit.errors import SearchError
    from anekit.search.root import find_root
    from anekit.search.roots import registered
    from anekit.search.store import store_dir

    entries = registered()
    recorded = {entry.root: entry.store for entry in entries}
    chosen = dict(recorded) if every else {}
    if every and not chosen and not named:
        raise SearchError(
            "no indexed root is recorded on this machine yet: `anekit index` records each "
            "root it indexes (or name roots with --root)"
        )
    for path in named:
        spelled = Path(os.path.abspath(path))
        try:
            root = find_root(spelled) if spelled.is_dir() else spelled.resolve()
        except SearchError:
            root = spelled.resolve()  # no index: reported as skipped
        chosen.setdefault(root, recorded.get(root) or store_dir(root))
    return chosen


def search_roots(
    query: str,
    k: int,
    mode: str,
    filters: tuple[Sequence[str], Sequence[str], Sequence[str]],
    chosen: dict[Path, Path],
    as_json: bool,
) -> None:
    """Search each chosen root's store and print the hits merged by score."""
    from anekit.cli.search import echo_hit
    from anekit.search.fanout import fan_out
    from anekit.search.index import Index
    from anekit.search.searcher import QueryModels, SharedReading

    models = QueryModels()  # one query model for every root (those of another are skipped)
    model_id = None
    if mode != "keyword":
        from anekit.models.encoders import load_model

        model_id = load_model(None).model_id  # what Index.search embeds the query with
    opened: list[Index] = []

    def open_index(root: Path) -> Index:
        opened.append(Index(root, chosen[root], cache=False, shared=SharedReading(models)))
        return opened[-1]

    paths, exts, langs = filters
    started = time.monotonic()
    try:
        found = fan_out(
            list(chosen),
            open_index,
            query,
            k=k,
            mode=mode,
            paths=paths,
            exts=exts,
            langs=langs,
            model_id=model_id,
        )
    finally:
        for index in opened:
            index.close()
    elapsed = time.monotonic() - started
    if as_json:
        emit_json(
            {
                "query": query,
                "mode": mode,
                "k": k,
                "milliseconds": round(elapsed * 1000, 1),
                "roots": [str(root) for root in found.searched],
                "skipped": found.skipped_dicts(),
                "hits": [hit.as_dict() for hit in found.hits],
            }
        )
        return
    for root, why in found.skipped:
        stderr.print(f"skipped {esc_path(root)}: {esc(why)}")
    if not found.hits:
        stderr.print("no hits")
        return
    names = _labels(found.searched)
    for item in found.hits:
        echo_hit(item.hit, f"[{names[item.root]}] ")


def _labels(roots: Sequence[Path]) -> dict[Path, str]:
    """Each root's folder name, or its whole path where two roots share a name."""
    counts: dict[str, int] = {}
    for root in roots:
        counts[root.name] = counts.get(root.name, 0) + 1
    return {root: root.name if counts[root.name] == 1 else str(root) for root in roots}


def status_roots(prune: bool, as_json: bool) -> None:
    """One row per registered root; ``prune`` forgets those whose folder or store is gone.
    Exit status 2 when a store is damaged (a missing root is reported, not an error)."""
    from anekit.search.roots import forget, registered

    rows = [_row(entry.root, entry.store, entry.missing()) for entry in registered()]
    forgotten = [row["root"] for row in rows if prune and row["missing"]]
    for root in forgotten:
        forget(root)
    damaged = any(row["state"] == "damaged" for row in rows)
    if as_json:
        emit_json({"roots": rows, "forgotten": forgotten})
    elif not rows:
        stderr.print(
            "no indexed root is recorded on this machine yet (`anekit index` records each)"
        )
    else:
        _table(rows)
        for root in forgotten:
            stderr.print(f"forgot {esc_path(root)}")
        if not prune and any(row["missing"] for row in rows):
            stderr.print(
                "`anekit status --all --prune` forgets the roots whose folder or index is gone"
            )
    if damaged:
        raise SystemExit(2)


def _row(root: Path, store: Path, missing: str | None) -> dict[str, Any]:
    """What ``anekit status --all --json`` says of one root: ``state`` is ``ok``,
    ``damaged``, or why it is missing (``missing folder``, ``no index``)."""
    from anekit.errors import DamagedStoreError
    from anekit.search.store import Store

    row: dict[str, Any] = {"root": str(root), "store": str(store), "missing": missing is not None}
    if missing is not None:
        return {**row, "state": missing}
    try:
        with Store(store, create=False) as opened:
            health = opened.check()
            stats = opened.stats() if health == "ok" else {}
    except DamagedStoreError as error:
        health, stats = str(error.__cause__ or error), {}
    identity = stats.get("identity") or {}
    return {
        **row,
        "state": "ok" if health == "ok" else "damaged",
        "health": health,
        "files": stats.get("files"),
        "chunks": stats.get("chunks"),
        "embedded_fraction": stats.get("embedded_fraction"),
        "bytes": stats.get("bytes"),
        "last_write": stats.get("last_write"),
        "model": identity.get("model"),
    }


def _table(rows: list[dict[str, Any]]) -> None:
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in ("root", "files", "chunks", "size", "updated", "health"):
        table.add_column(name, justify="right" if name in ("files", "chunks", "size") else "left")
    for row in rows:
        if row["state"] not in ("ok", "damaged"):
            table.add_row(
                esc_path(row["root"]), "-", "-", "-", "-", f"[yellow]{esc(row['state'])}[/]"
            )
            continue
        written = row.get("last_write")
        updated = (
            time.strftime("%Y-%m-%d %H:%M", time.localtime(float(written))) if written else "-"
        )
        health = "ok" if row["state"] == "ok" else f"[red]damaged: {esc(row['health'])}[/]"
        table.add_row(
            esc_path(row["root"]),
            str(row["files"] if row["files"] is not None else "-"),
            str(row["chunks"] if row["chunks"] is not None else "-"),
            format_bytes(int(row["bytes"])) if row.get("bytes") is not None else "-",
            updated,
            health,
        )
    stdout.print(table)
