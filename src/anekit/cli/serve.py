"""``anekit mcp`` (MCP over stdio, for clients that spawn it) and ``anekit serve`` (a
long-lived server: MCP over streamable HTTP on 127.0.0.1, the roots watched)."""

from __future__ import annotations

from pathlib import Path

import click

from anekit.cli._common import esc, esc_path, handles_errors, stderr
from anekit.cli.search import lane_names, lanes_option, model_option, root_for


@click.command()
@click.argument("roots", nargs=-1, type=click.Path(exists=True, file_okay=False, path_type=Path))
@lanes_option
@model_option
@handles_errors
def mcp(roots: tuple[Path, ...], lanes: tuple[str, ...], model: str | None) -> None:
    """Serve code search over MCP on stdin/stdout for ROOTS (default: the index holding
    the current folder). Tools: search, read, files, status, index.

    Register it with a client as the command `anekit mcp /path/to/repo`; see
    docs/agents.md. Nothing but MCP messages goes to stdout.
    """
    import anyio

    from anekit.search.mcp_stdio import serve_stdio
    from anekit.search.priority import Priority, tune_heap
    from anekit.search.server import SearchService, mcp_server

    tune_heap()
    chosen = [root_for((root,)) for root in roots] or [root_for(())]
    names = lane_names(lanes)
    priority = Priority()
    service = SearchService(chosen, lanes=names, model=model, priority=priority)
    priority.on_idle.append(service.release_memory)
    try:
        priority.background()  # until the first tool call
        anyio.run(serve_stdio, mcp_server(service))
    finally:
        service.close()
        priority.restore()


@click.command()
@click.argument("roots", nargs=-1, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=None,
    help="Port on 127.0.0.1 (default 7433; a taken port is an error naming its holder).",
)
@click.option("--watch/--no-watch", default=True, show_default=True, help="Keep the roots current.")
@lanes_option
@model_option
@click.option("--rotate-token", is_flag=True, help="Write a new bearer token and exit.")
@click.option("--show-token", is_flag=True, help="Print the bearer token and exit.")
@handles_errors
def serve(
    roots: tuple[Path, ...],
    port: int | None,
    watch: bool,
    lanes: tuple[str, ...],
    model: str | None,
    rotate_token: bool,
    show_token: bool,
) -> None:
    """Serve code search for ROOTS (default: the index holding the current folder) to
    agents and scripts: MCP over streamable HTTP at http://127.0.0.1:PORT/mcp, behind
    the bearer token in ANEKIT_HOME/serve/token (GET /health is open), and each root
    watched and kept current, every root's embedding done by one lane pool (a root whose
    folder goes away is reported and no longer watched). Ctrl-C stops it. See
    docs/agents.md.
    """
    from anekit.cli.watch import round_line
    from anekit.search import http
    from anekit.search.index import Index
    from anekit.search.priority import Priority, tune_heap
    from anekit.search.server import SearchService, mcp_server
    from anekit.search.shared_lanes import SharedLanes
    from anekit.search.watch import Round
    from anekit.search.watch_roots import RootWatchers
    from anekit.search.web import WebPage

    if rotate_token or show_token:
        token = http.rotate_token() if rotate_token else http.read_token()
        click.echo(token)
        return
    tune_heap()
    chosen = [root_for((root,)) for root in roots] or [root_for(())]
    names = lane_names(lanes)
    port = port or http.DEFAULT_PORT
    http.check_port(port)
    token = http.read_token()
    priority = Priority()
    # Every root's watcher and index tool run embed through one lane pool, closed once.
    shared = SharedLanes(names)
    service = SearchService(
        chosen, lanes=names, model=model, priority=priority, shared_lanes=shared
    )
    priority.on_idle.append(service.release_memory)

    def report(root: Path, done: Round) -> None:
        stderr.print(f"watch {esc_path(root)}: {esc(round_line(done))}")

    watchers = RootWatchers(
        chosen, lanes=names, model=model, priority=priority, on_round=report, shared_lanes=shared
    )
    for root in chosen:  # a lane or model that does not exist: an error now, not in a thread
        with Index(root, lanes=names, model=model, cache=False) as probe:
            probe.identity()
    import uvicorn  # the search extra's (through mcp): after anekit.search has checked it

    try:
        if watch:
            watchers.start()
        app = http.http_app(mcp_server(service), token, WebPage(service, http.HOST, port))
        priority.background()  # out of it for each watcher round and tool call
        stderr.print(
            f"serving {', '.join(esc_path(root) for root in chosen)} at "
            f"http://{http.HOST}:{port}/mcp (token: {esc_path(http.token_path())}); "
            f"search page: http://{http.HOST}:{port}/"
        )
        uvicorn.Server(
            uvicorn.Config(
                app,
                host=http.HOST,
                port=port,
                log_level="warning",
                lifespan="on",
                http=http.protocol(),
            )
        ).run()
    finally:
        watchers.stop()
        service.close()
        shared.close()
        priority.restore()
