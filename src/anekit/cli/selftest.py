"""``anekit selftest``: the report to paste into an issue (Markdown, or ``--json``)."""

from __future__ import annotations

import click

from anekit.cli._common import emit_json, esc, stderr, with_json


@click.command()
@with_json
def selftest(as_json: bool) -> None:
    """Check this machine and report it: platform and chip, versions, every lane's
    known-answer admission, the embedding package's placement per bucket (Core ML's
    compute plan on a Mac), a short bench, and the compile cache. What does not apply
    here is listed as skipped, with why. Never needs the network.

    Exit status 1 when a section failed."""
    import sys

    from anekit import selftest as selftest_module

    sections = selftest_module.run(
        progress=None if as_json else lambda message: stderr.print(esc(message))
    )
    if as_json:
        emit_json({"sections": [section.to_json() for section in sections]})
    else:
        click.echo(selftest_module.markdown(sections), nl=False)
    if any(section.status == "failed" for section in sections):
        sys.exit(1)
