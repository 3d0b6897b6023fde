"""``anekit watch``: keep a code-search index current as files are saved."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from anekit.cli._common import esc, esc_path, handles_errors, shown, stderr
from anekit.cli.search import lane_names, lanes_option, model_option, root_for, store_option


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
@store_option
@lanes_option
@model_option
@click.option(
    "--quiet",
    "quiet_ms",
    type=click.IntRange(min=1),
    default=500,
    show_default=True,
    metavar="MS",
    help="Index once no file has changed for this long (milliseconds).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per round on stdout.")
@handles_errors
def watch(
    paths: tuple[Path, ...],
    store: Path | None,
    lanes: tuple[str, ...],
    model: str | None,
    quiet_ms: int,
    as_json: bool,
) -> None:
    """Index PATHS (default: the current folder's index) now, then again as files
    change, until interrupted (Ctrl-C).

    File events come from the OS (no polling). A burst of changes (a git checkout) is
    one incremental run; a round that fails (another writer, a lane error) is tried
    again. Another `anekit index` on the same index waits for the round in progress.
    """
    from anekit.search.index import Index
    from anekit.search.priority import Priority, tune_heap
    from anekit.search.watch import Round, Watcher

    tune_heap()  # a long-lived process
    root = root_for(paths)
    names = lane_names(lanes)

    def report(done: Round) -> None:
        if as_json:
            click.echo(json.dumps({"root": str(root), **done.as_dict()}))  # flushed
            return
        stderr.print(esc(round_line(done)))

    with Index(root, store, lanes=names, model=model, wait=None) as index:
        index.identity()  # a lane or model that does not exist: refused before anything
        priority = Priority()  # in the background between rounds
        watcher = Watcher(
            index, list(paths) or None, quiet_ms=quiet_ms, on_round=report, priority=priority
        )
        if not as_json:
            stderr.print(f"watching {esc_path(root)} (Ctrl-C stops)")
        priority.background()
        try:
            watcher.run()
        finally:
            priority.restore()
    if watcher.gone:
        raise SystemExit(1)


def round_line(done: Any) -> str:
    """One line saying what a watcher round did (or why it failed)."""
    if done.last:  # the watch ended: nothing is tried again
        return f"error: {done.error}"
    if done.error is not None:
        return f"error: {done.error} (tried again with the next change)"
    summary = done.summary
    what = (
        "caught up"
        if not done.paths and done.first_event is None
        else ("whole tree" if done.whole else f"{len(done.paths)} changed path(s)")
    )
    aside = "".join(
        f"; set aside {shown(item.relpath)} ({item.reason}"
        + (f": {item.detail})" if item.detail else ")")
        for item in done.set_aside[:5]
    )
    if len(done.set_aside) > 5:
        aside += f" and {len(done.set_aside) - 5} more"
    return (
        f"{what}: {summary.indexed} indexed, {summary.removed} removed, "
        f"{summary.embedded} chunk(s) embedded, {summary.chunks} in the index; "
        f"{done.seconds:.2f} s{aside}"
    )
