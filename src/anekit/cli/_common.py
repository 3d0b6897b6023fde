r"""Shared pieces of the ``anekit`` commands: consoles, JSON output, error handling.

Errors anekit raises on purpose print one line (``error: ...``) and exit with
status 2; ``-v`` shows the traceback. With ``--json`` an error is printed as
``{"error": <code>, "message": ...}`` where the code is the exception class name.

Text that comes from the user (paths, source lines, op names, error messages) is
printed through :func:`esc` wherever it meets rich markup: ``[bold]`` in a comment
or a file name is shown as written, never interpreted, and control characters other
than newline and tab are shown escaped (``\x1b``), never sent to the terminal. File
names go through :func:`esc_path`, which also escapes their newlines (``'a\nb.py'``),
and an error message shows the command's arguments so escaped.

Only light modules are imported here and at the top of the command modules, and each
command checks its arguments before it imports coremltools, torch, ONNX or the tracer,
so that ``--help`` and a usage error (no such file, a bad --shape) answer at once.
"""

from __future__ import annotations

import functools
import json
import math
import os
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from anekit import errors

if TYPE_CHECKING:  # rich is imported on first use (a one-shot search prints without it)
    from rich.console import Console, OverflowMethod
    from rich.progress import Progress, ProgressColumn
    from rich.table import Table

F = TypeVar("F", bound=Callable[..., Any])

EXIT_ERROR = 2


class _Console:
    """A rich ``Console`` made at its first use: rich takes about 45 ms to import, a
    good part of a one-shot ``anekit search`` that prints no markup."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Console | None = None

    @property
    def console(self) -> Console:
        """The rich console itself (for rich's own objects: a progress bar)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.console, name)

    @property
    def is_terminal(self) -> bool:
        """Whether the stream is a terminal (without making the console)."""
        stream = sys.stderr if self._options.get("stderr") else sys.stdout
        return self._console.is_terminal if self._console is not None else stream.isatty()


stdout: Any = _Console(
    highlight=False, emoji=False, soft_wrap=True, width=None if sys.stdout.isatty() else 120
)
stderr: Any = _Console(stderr=True, highlight=False, emoji=False, soft_wrap=True)


# Control characters but newline and tab, as Python writes them in a string literal.
_CONTROLS = {
    code: repr(chr(code))[1:-1]
    for code in (*range(0x20), *range(0x7F, 0xA0))
    if chr(code) not in "\n\t"
}


def esc(value: object) -> str:
    r"""``value`` as text that rich prints verbatim: its ``[...]`` not read as markup and
    its control characters (but newline and tab) escaped, as ``\x1b`` or ``\r``."""
    from rich.markup import escape

    return escape(str(value).translate(_CONTROLS))


def printable(value: object) -> str:
    """``value`` with its control characters (but newline and tab) escaped, for output
    without markup (:func:`esc` without rich)."""
    return str(value).translate(_CONTROLS)


def shown(value: object) -> str:
    r"""A file name or other user-given name as one printable line: as written when every
    character is printable, else quoted with its newlines and control characters escaped
    as Python writes them (``'a\nb.py'``)."""
    text = str(value)
    return text if text.isprintable() else repr(text)


def esc_path(value: object) -> str:
    """A file name for rich markup: :func:`shown`, then :func:`esc`."""
    return esc(shown(value))


def _arguments_shown(message: str, params: dict[str, Any]) -> str:
    """``message`` with each unprintable path or name the command was given (and the
    ``MODULE`` of a ``MODULE:FUNCTION`` one, its absolute form) replaced by :func:`shown`."""
    values: list[str] = []
    for value in params.values():
        for item in value if isinstance(value, tuple | list) else (value,):
            if isinstance(item, str | os.PathLike):
                text = os.fspath(item)
                values += [text, text.rpartition(":")[0], os.path.abspath(text)]
    for text in sorted({text for text in values if shown(text) != text}, key=len, reverse=True):
        message = message.replace(text, shown(text))
    return message


def emit_json(payload: Any) -> None:
    # A NaN in machine output is a bug, never a value (allow_nan=False).
    click.echo(json.dumps(payload, indent=2, allow_nan=False))


def handles_errors(func: F) -> F:
    """Turn AnekitErrors into one-line messages and exit status 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        verbose = click.get_current_context().find_root().params.get("verbose")
        try:
            return func(*args, **kwargs)
        except errors.AnekitError as error:
            if kwargs.get("as_json"):
                emit_json({"error": error.code, "message": str(error)})
            else:
                message = _arguments_shown(str(error), click.get_current_context().params)
                stderr.print(f"[bold red]error[/] ({error.code}): {esc(message)}", markup=True)
                if verbose:
                    stderr.print_exception()
            sys.exit(EXIT_ERROR)

    return wrapper  # type: ignore[return-value]


json_option = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")


def with_json(func: F) -> F:
    """A command's ``--json`` option (:data:`json_option`) and :func:`handles_errors`,
    which prints an error as JSON under it: the pair every command with JSON output carries."""
    return json_option(handles_errors(func))


def positive_seconds(context: click.Context, parameter: click.Parameter, value: float) -> float:
    """A click callback: ``value`` must be a finite number of seconds above 0."""
    if not math.isfinite(value) or value <= 0:
        raise click.BadParameter(f"{value} is not a number of seconds above 0")
    return value


def titled_table(title: str, columns: Iterable[str], overflow: OverflowMethod = "fold") -> Table:
    """A table titled on its left, with ``columns`` whose cells fold (by default)."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow=overflow)
    return table


def progress_bar(label: str, *columns: ProgressColumn, quiet: bool = False) -> Progress:
    """A bar on stderr (``label``, the bar, done/total, ``columns``) that goes when done,
    and is not drawn when ``quiet`` or in a log (nor the blank line it would leave)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        *columns,
        console=stderr.console,
        transient=True,
        disable=quiet or not stderr.is_terminal,
    )


def format_bytes(count: int) -> str:
    size = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{count} B"
