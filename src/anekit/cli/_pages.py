"""``--html`` of ``anekit doctor`` and ``anekit simulate``: simulate a package's functions
for the page, and write the page."""

from __future__ import annotations

import gc
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import click

from anekit.cli._common import esc, esc_path, stderr
from anekit.cli._inputs import program_inputs
from anekit.errors import AnekitError

html_option = click.option(
    "--html",
    "html",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the report as one self-contained HTML page (no network) to this file.",
)


def check_html(path: Path | None) -> None:
    """A page path whose folder exists and that is not a folder (before any work)."""
    if path is None:
        return
    if path.is_dir():
        raise click.BadParameter(f"{path}: is a folder; give a file name", param_hint="--html")
    if not path.parent.is_dir():
        raise click.BadParameter(f"{path.parent}: no such folder for the page", param_hint="--html")


def simulate_functions(
    package: Path,
    functions: Iterable[str],
    *,
    seed: int,
    inputs: Path | None = None,
    run: Callable[[Any, dict[str, Any]], Any] | None = None,
) -> dict[str, dict[str, Any] | str]:
    """Each function of ``package`` run in the simulator on ``inputs`` (else random ones
    from ``seed``): its numerics report's JSON, or the error that stopped it (a page
    shows that function's failure and the others' numerics). ``run`` (program, feeds) ->
    SimResult; default: ANE numerics, the automatic executor."""
    import anekit
    from anekit import sim

    def default_run(program: Any, feeds: dict[str, Any]) -> Any:
        return sim.run(program.program, feeds, function=program.function_name)

    simulated: dict[str, dict[str, Any] | str] = {}
    for name in functions:
        try:
            program = anekit.load(package, function=name)
            feeds = program.package_feeds(program_inputs(program, inputs, seed))
            simulated[name] = (run or default_run)(program, feeds).report.to_json()
        except (AnekitError, ValueError, FloatingPointError, MemoryError) as error:
            simulated[name] = f"{type(error).__name__}: {error}"
        gc.collect()  # the function's program and compiled engine, before the next one's
    return simulated


def saved_for_simulation(program: Any) -> tuple[Path, Callable[[], None]]:
    """A traced program saved as a package in a temporary folder (the simulator runs the
    package form, whose op names the placement report uses), and how to remove it."""
    folder = tempfile.TemporaryDirectory(prefix="anekit-page-")
    path = Path(folder.name) / "program.mlpackage"
    program.save(path)
    return path, folder.cleanup


def write_page(path: Path, html: str) -> None:
    """``html`` into ``path``, whole or not at all (a temporary file beside it, renamed);
    its mode as any file the user creates (the umask's, not a temporary file's 0600)."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        with open(partial, "x", encoding="utf-8") as handle:
            handle.write(html)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    stderr.print(f"wrote {esc_path(path)} ({esc(f'{len(html.encode()) / 1e6:.1f}')} MB)")
