"""``anekit mcp``: code search for agents over MCP (stdio, for clients that spawn it)."""

from __future__ import annotations

from pathlib import Path

import click

from anekit.cli._common import handles_errors
from anekit.cli.search import root_for


@click.command()
@click.argument("roots", nargs=-1, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--lane", "lanes", multiple=True, help="Lanes to embed with (default: this machine's)."
)
@click.option("--model", default=None, help="Model name or Hugging Face folder.")
@handles_errors
def mcp(roots: tuple[Path, ...], lanes: tuple[str, ...], model: str | None) -> None:
    """Serve code search over MCP on stdin/stdout for ROOTS (default: the index holding
    the current folder). Tools: search, read, files, status, index.

    Register it with a client as the command `anekit mcp /path/to/repo`; see
    docs/agents.md. Nothing but MCP messages goes to stdout.
    """
    from anekit.search.server import SearchService, mcp_server

    chosen = [root_for((root,)) for root in roots] or [root_for(())]
    names = [name.strip() for item in lanes for name in item.split(",") if name.strip()]
    service = SearchService(chosen, lanes=names or None, model=model)
    try:
        mcp_server(service).run("stdio")
    finally:
        service.close()
