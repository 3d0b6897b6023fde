"""What the benchmark scripts record about the machine and their processes."""

from __future__ import annotations

import os
import platform
import resource
import subprocess
from pathlib import Path
from typing import Any


def peak_memory_mb(pid: int | str = "self") -> float:
    """A process's peak resident memory in MB. ``VmHWM`` (Linux) starts afresh at exec,
    unlike ``ru_maxrss``, which keeps the forking parent's peak (the fallback for this
    process elsewhere)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    if pid != "self":
        raise RuntimeError(f"no peak memory for process {pid}: needs Linux's /proc")
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def machine() -> str:
    """CPU model, core count and OS, for the tables' headers."""
    from anekit.analysis.compute_plan import chip

    return f"{chip()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def redacted(value: Any) -> Any:
    """``value`` (a JSON-ready record) with this machine's paths in its strings replaced
    by stand-ins: the checkout by ``<checkout>``, the home folder by ``~``, the
    temporary folder by ``$TMPDIR``, so that a committed record names no local path."""
    import tempfile

    checkout = str(Path(__file__).resolve().parent.parent)
    prefixes = [
        (checkout, "<checkout>"),
        (str(Path.home()), "~"),
        (tempfile.gettempdir(), "$TMPDIR"),
    ]
    prefixes.sort(key=lambda pair: -len(pair[0]))
    if isinstance(value, str):
        for prefix, stand_in in prefixes:
            if prefix and prefix != "/":
                value = value.replace(prefix, stand_in)
        return value
    if isinstance(value, dict):
        return {redacted(key): redacted(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redacted(item) for item in value]
    return value


def source_state() -> dict[str, Any]:
    """Where the anekit that runs comes from, and its git commit and whether its
    ``src`` differs from it (a tree edited during a run mixes versions)."""
    import importlib.util

    spec = importlib.util.find_spec("anekit")
    location = Path(spec.origin).parent if spec and spec.origin else None
    state: dict[str, Any] = {"anekit": str(location), "PYTHONPATH": os.environ.get("PYTHONPATH")}
    if location is None:
        return state
    root = location.parent.parent

    def git(*arguments: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(root), *arguments], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    state["commit"] = git("rev-parse", "HEAD")
    changed = git("status", "--porcelain", "--", "src")
    state["src_changed"] = None if changed is None else changed.splitlines()
    return state


def emit(record: dict[str, Any], save: Path | None) -> None:
    """Print ``record`` as JSON (its local paths redacted) and write it to ``save``."""
    import json

    text = json.dumps(redacted(record), indent=1)
    if save is not None:
        save.write_text(text + "\n")
    print(text)
