"""Settings read from the environment, all in one place (see docs/environment.md)."""

from __future__ import annotations

import os
from pathlib import Path

#: Environment variables anekit reads, with what each does.
ENVIRONMENT: dict[str, str] = {
    "ANEKIT_HOME": "cache root for models, demo output and compiled packages "
    "(default: $XDG_CACHE_HOME/anekit or ~/.cache/anekit)",
    "ANEKIT_PACKAGES": "where built model packages are cached (default: $ANEKIT_HOME/packages)",
    "ANEKIT_LANES": "the default embedding lanes, comma-separated, e.g. ane,cpu "
    "(default: ane on a Mac, else cpu)",
    "ANEKIT_LANE_IDLE": "seconds a lane worker waits for work before it exits (default: 300)",
    "ANEKIT_FAULT": "fault injection for lane workers, for tests: LANE:FAULT[,...] "
    "(see anekit.lanes.faults)",
    "ANEKIT_STORE": "the code search store folder for `anekit index`, `search`, `status` and "
    "`forget` (default: .anekit at the indexed root)",
    "ANEKIT_DIRECT_COMPILE_BUDGET": "compiles one process may make on the experimental "
    "direct ANE path before it refuses more (default: 100)",
    "ANEKIT_MINIFIED_LINE": "code search skips a file of 32 KiB or more whose lines average "
    "more than this many characters, as minified or generated (default: 400; 0 keeps them)",
    "ANEKIT_STRICT_NUMERICS": "1 makes a simulated run that produces garbage (inf/NaN, or "
    "outputs zeroed by an fp16 overflow) raise NumericsError instead of warning",
}


def home() -> Path:
    """anekit's cache root: ``$ANEKIT_HOME``, else ``$XDG_CACHE_HOME/anekit``."""
    configured = os.environ.get("ANEKIT_HOME")
    if configured:
        return Path(configured).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME")
    return (Path(cache).expanduser() if cache else Path.home() / ".cache") / "anekit"


def packages() -> Path:
    """Where built model packages are cached: ``$ANEKIT_PACKAGES``, else under :func:`home`."""
    configured = os.environ.get("ANEKIT_PACKAGES")
    return Path(configured).expanduser() if configured else home() / "packages"


def search_store() -> Path | None:
    """The code search store folder ``$ANEKIT_STORE``, or None (``.anekit`` at the root)."""
    configured = os.environ.get("ANEKIT_STORE")
    return Path(configured).expanduser() if configured else None


def minified_line(default: int = 400) -> int:
    """``ANEKIT_MINIFIED_LINE``, a whole number (0: no file is skipped as minified), or
    ``default``."""
    value = os.environ.get("ANEKIT_MINIFIED_LINE", "").strip()
    if not value:
        return default
    if not value.isdigit():
        raise ValueError(f"ANEKIT_MINIFIED_LINE must be a whole number, got {value!r}")
    return int(value)


def strict_numerics() -> bool:
    """``ANEKIT_STRICT_NUMERICS`` is set to a true value (1, true, yes, on)."""
    value = os.environ.get("ANEKIT_STRICT_NUMERICS", "").strip().lower()
    return value in ("1", "true", "yes", "on")


def direct_compile_budget(default: int = 100) -> int:
    """``ANEKIT_DIRECT_COMPILE_BUDGET``, a positive whole number, or ``default``."""
    value = os.environ.get("ANEKIT_DIRECT_COMPILE_BUDGET", "").strip()
    if not value:
        return default
    if not value.isdigit() or int(value) < 1:
        raise ValueError(
            f"ANEKIT_DIRECT_COMPILE_BUDGET must be a positive whole number, got {value!r}"
        )
    return int(value)
