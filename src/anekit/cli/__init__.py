"""The ``anekit`` command line: thin over the library, rich tables or ``--json``.

Each command lives in its own module; this one assembles the group. Exit status
2 means an error (see ``anekit.cli._common``).
"""

from __future__ import annotations

import importlib
import logging
import sys
from typing import Any

import click

from anekit.cli._common import emit_json

#: Each command's module: imported when the command runs (or help lists it), so that
#: ``anekit search`` does not import the converter, the probe and the server first
#: (click's lazily loaded subcommands).
COMMANDS = {
    "bench": "anekit.cli.bench",
    "build-model": "anekit.cli.models:build_model",
    "convert": "anekit.cli.convert",
    "demo": "anekit.cli.demo",
    "doctor": "anekit.cli.placement",
    "embed": "anekit.cli.lanes",
    "forget": "anekit.cli.search",
    "index": "anekit.cli.search",
    "lanes": "anekit.cli.lanes",
    "mcp": "anekit.cli.serve",
    "models": "anekit.cli.models",
    "ops": "anekit.cli.placement",
    "probe": "anekit.cli.probe",
    "run": "anekit.cli.run",
    "search": "anekit.cli.search",
    "selftest": "anekit.cli.selftest",
    "serve": "anekit.cli.serve",
    "simulate": "anekit.cli.simulate",
    "status": "anekit.cli.search",
    "version": "anekit.cli.version",
    "watch": "anekit.cli.watch",
}


def load_command(name: str) -> click.Command:
    """The command ``name`` of :data:`COMMANDS` (``module`` holds it under its own name,
    ``module:attribute`` under another)."""
    module, _, attribute = COMMANDS[name].partition(":")
    command = getattr(importlib.import_module(module), attribute or name)
    if not isinstance(command, click.Command):
        raise TypeError(f"{COMMANDS[name]} is not a click command")
    return command


class _Group(click.Group):
    """The ``anekit`` group: a usage error (a bad option value, a missing file argument)
    under ``--json`` is printed as the JSON error object every command prints for its own
    errors (``{"error": "UsageError", "message": ...}``), exit status 2. Its commands are
    loaded when asked for (:data:`COMMANDS`)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.add_command(load_command(cmd_name), cmd_name)
        return super().get_command(ctx, cmd_name)

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


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="anekit")
