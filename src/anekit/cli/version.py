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


def runtimes_here() -> list[dict[str, Any]]:
    """Each runtime of the record: its name, what runs it, whether it runs here and why
    not, and whether it runs compiled programs (a backend). Its checks import no engine."""
    from anekit.runtimes import RUNTIMES

    rows = []
    for runtime in RUNTIMES.values():
        reason = runtime.unavailable_reason()
        rows.append(
            {
                "name": runtime.name,
                "device": runtime.device,
                "description": runtime.description,
                "available": reason is None,
                "reason": reason,
                "runs_programs": runtime.backend is not None,
            }
        )
    return rows


@click.command()
@json_option
def version(as_json: bool) -> None:
    """Show versions, the platform, the runtimes (which run here, and why the others
    cannot), available backends and error codes."""
    codes = sorted(
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.AnekitError)
    )
    runtimes = runtimes_here()
    # anekit.backends.available_backends(), without importing the backends
    backends = [row["name"] for row in runtimes if row["available"] and row["runs_programs"]]
    info: dict[str, Any] = {
        "anekit": __version__,
        "coremltools": _installed("coremltools"),
        "numpy": _installed("numpy"),
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "backends": backends,
        "runtimes": runtimes,
        "error_codes": codes,
        "environment": config.ENVIRONMENT,
    }
    if as_json:
        emit_json(info)
        return
    for key in ("anekit", "coremltools", "numpy", "python", "platform"):
        stdout.print(f"{key:12} {esc(info[key] or 'not installed')}")
    stdout.print(f"{'backends':12} {', '.join(backends) or 'none'}")
    for row in runtimes:
        state = "runs here" if row["available"] else f"not here: {row['reason']}"
        stdout.print(f"{'runtime':12} {esc(row['name'])}: {esc(row['device'])}; {esc(state)}")
