"""``anekit version``: versions, platform, backends and error codes."""

from __future__ import annotations

import platform

import click

from anekit import config, errors
from anekit._version import __version__
from anekit.cli._common import emit_json, json_option, stdout


@click.command()
@json_option
def version(as_json: bool) -> None:
    """Show versions, the platform, available backends and error codes."""
    import coremltools
    import numpy

    from anekit.backends import available_backends

    codes = sorted(
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.AnekitError)
    )
    info = {
        "anekit": __version__,
        "coremltools": coremltools.__version__,
        "numpy": numpy.__version__,
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "backends": available_backends(),
        "error_codes": codes,
        "environment": config.ENVIRONMENT,
    }
    if as_json:
        emit_json(info)
        return
    for key in ("anekit", "coremltools", "numpy", "python", "platform"):
        stdout.print(f"{key:12} {info[key]}")
    stdout.print(f"{'backends':12} {', '.join(info['backends']) or 'none'}")
