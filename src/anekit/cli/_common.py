"""Shared pieces of the ``anekit`` commands: consoles, JSON output, error handling.

Errors anekit raises on purpose print one line (``error: ...``) and exit with
status 2; ``-v`` shows the traceback. With ``--json`` an error is printed as
``{"error": <code>, "message": ...}`` where the code is the exception class name.

Text that comes from the user (paths, source lines, op names, error messages) is
printed through :func:`esc` wherever it meets rich markup: ``[bold]`` in a comment
or a file name is shown as written, never interpreted. Only light modules are
imported here and at the top of the command modules, so that ``anekit --help``
does not pay for coremltools or torch.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape

from anekit import errors

F = TypeVar("F", bound=Callable[..., Any])

EXIT_ERROR = 2

stdout = Console(
    highlight=False, emoji=False, soft_wrap=True, width=None if sys.stdout.isatty() else 120
)
stderr = Console(stderr=True, highlight=False, emoji=False, soft_wrap=True)


def esc(value: object) -> str:
    """``value`` as text that rich prints verbatim (its ``[...]`` not read as markup)."""
    return escape(str(value))


def emit_json(payload: Any) -> None:
    # A NaN in machine output is a bug, never a value (allow_nan=False).
    click.echo(json.dumps(payload, indent=2, allow_nan=False))


def fail(error: Exception, as_json: bool, verbose: bool) -> None:
    code = error.code if isinstance(error, errors.AnekitError) else type(error).__name__
    if as_json:
        emit_json({"error": code, "message": str(error)})
    else:
        stderr.print(f"[bold red]error[/] ({code}): {esc(error)}", markup=True)
        if verbose:
            stderr.print_exception()
    sys.exit(EXIT_ERROR)


def handles_errors(func: F) -> F:
    """Turn AnekitErrors into one-line messages and exit status 2."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        context = click.get_current_context()
        verbose = bool(context.find_root().params.get("verbose"))
        try:
            return func(*args, **kwargs)
        except errors.AnekitError as error:
            fail(error, bool(kwargs.get("as_json")), verbose)

    wrapper.__name__ = func.__name__
    wrapper.__doc__ = func.__doc__
    return wrapper  # type: ignore[return-value]


json_option = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")


def format_bytes(count: int) -> str:
    size = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{count} B"
