"""The ``anekit`` command line: thin over the library, rich tables or ``--json``.

Each command lives in its own module; this one assembles the group. Exit status
2 means an error (see ``anekit.cli._common``).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import click

from anekit.cli._common import emit_json
from anekit.cli.bench import bench
from anekit.cli.convert import convert
from anekit.cli.demo import demo
from anekit.cli.lanes import embed, lanes
from anekit.cli.models import build_model, models
from anekit.cli.placement import doctor, ops
from anekit.cli.probe import probe
from anekit.cli.run import run
from anekit.cli.search import forget, index, search, status
from anekit.cli.selftest import selftest
from anekit.cli.serve import mcp, serve
from anekit.cli.simulate import simulate
from anekit.cli.version import version
from anekit.cli.watch import watch


class _Group(click.Group):
    """The ``anekit`` group: a usage error (a bad option value, a missing file argument)
    under ``--json`` is printed as the JSON error object every command prints for its own
    errors (``{"error": "UsageError", "message": ...}``), exit status 2."""

    def main(  # type: ignore[override]  # one signature for both of click's overloads
        self, args: Any = None, prog_name: str | None = None, **extra: Any
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        extra.pop("standalone_mode", None)
        try:
            code = super().main(argv, prog_name, standalone_mode=False, **extra)
        except click.ClickException as error:
            if "--json" not in argv:
                error.show()
            else:
                name = "UsageError" if isinstance(error, click.UsageError) else "ClickError"
                emit_json({"error": name, "message": error.format_message()})
            sys.exit(error.exit_code)
        except click.exceptions.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        if isinstance(code, int) and code:
            sys.exit(code)
        return code


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(None, "-V", "--version", package_name="anekit", prog_name="anekit")
@click.option("-v", "--verbose", is_flag=True, help="Log progress and show tracebacks on errors.")
def cli(verbose: bool) -> None:
    """anekit: compile NumPy functions to Core ML for the Apple Neural Engine,
    check them anywhere, run them on a Mac."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(message)s")


for command in (
    bench, demo, embed, lanes, convert, build_model, models, simulate, run, doctor, ops, probe,
    version, selftest, index, search, status, forget, watch, mcp, serve,
):  # fmt: skip
    cli.add_command(command)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="anekit")
