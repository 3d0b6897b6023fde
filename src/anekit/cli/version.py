"""``anekit version``: versions, platform, backends and error codes.

Fast on purpose: package versions come from their installed metadata and the
backends are checked without importing coremltools, torch or onnxruntime.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import platform
from typing import Any

import click

from anekit import config, errors
from anekit._version import __version__
from anekit.cli._common import emit_json, esc, json_option, stdout


def _installed(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def available_backends() -> list[str]:
    """``anekit.backends.available_backends()`` without importing the backends: the
    runtime record's checks import no engine (a test keeps the two equal)."""
    from anekit.runtimes import program_runtimes

    return [runtime.name for runtime in program_runtimes() if runtime.available()]


@click.command()
@json_option
def version(as_json: bool) -> None:
    """Show versions, the platform, available backends and error codes."""
    codes = sorted(
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.AnekitError)
    )
    backends = available_backends()
    info: dict[str, Any] = {
        "anekit": __version__,
        "coremltools": _installed("coremltools"),
        "numpy": _installed("numpy"),
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "backends": backends,
        "error_codes": codes,
        "environment": config.ENVIRONMENT,
    }
    if as_json:
        emit_json(info)
        return
    for key in ("anekit", "coremltools", "numpy", "python", "platform"):
        stdout.print(f"{key:12} {esc(info[key] or 'not installed')}")
    stdout.print(f"{'backends':12} {', '.join(backends) or 'none'}")
