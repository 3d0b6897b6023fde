"""Writing an ``.mlpackage`` to disk: whole or not at all, and the one metadata key of
the I/O widths a pass changed.

Every package anekit writes (``CompiledProgram.save``, :func:`~anekit.package.save_functions`)
goes through :func:`save_package`: the model is saved into a temporary folder next to the
target, then renamed into place; a package already there is renamed aside first and
deleted once the new one is in. A save that fails part way (an exception, a full disk)
leaves the previous package as it was and no temporary folder behind; a reader never
sees half a package.

The I/O widths (``pad_io_width`` widened a last axis; callers see the width before) are
recorded per function under :data:`IO_WIDTHS_KEY` (``{"function": {"name": width}}``),
for single-function packages (their function is ``main``) and multifunction ones alike.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Mapping, MutableMapping
from pathlib import Path
from typing import Any

from anekit.errors import ProgramError

#: Metadata key of the inputs and outputs a pass widened, per function:
#: ``{"function": {"input or output": the width callers see}}``.
IO_WIDTHS_KEY = "anekit.function_io_widths"
#: The key single-function packages used before (``{"name": width}``, no function level).
#: Only read, for packages already on disk; nothing writes it.
LEGACY_IO_WIDTHS_KEY = "anekit.io_widths"

__all__ = [
    "IO_WIDTHS_KEY",
    "LEGACY_IO_WIDTHS_KEY",
    "package_target",
    "read_io_widths",
    "record_io_widths",
    "save_package",
]


def package_target(path: str | Path) -> Path:
    """``path`` as a Path, checked as somewhere an ``.mlpackage`` may be written: it ends
    in ``.mlpackage`` and is not a file."""
    target = Path(path)
    if target.suffix != ".mlpackage":
        raise ProgramError(
            f"{target}: a package path must end in .mlpackage (a Core ML ML program is "
            "saved as a directory)"
        )
    if target.exists() and not target.is_dir():
        raise ProgramError(f"{target}: exists and is not a directory")
    return target


def save_package(model: Any, path: str | Path) -> Path:
    """Save ``model`` (a coremltools ``MLModel`` of an ML program) as an ``.mlpackage`` at
    ``path``, atomically: into a temporary sibling folder, then renamed over ``path``
    (a package there is replaced only once the new one is complete). Returns the path."""
    target = package_target(path)
    return save_folder(target, lambda staged: model.save(str(staged)))


def save_folder(target: Path, write: Callable[[Path], object]) -> Path:
    """Write a model folder (an ``.mlpackage``, a Core AI ``.aimodel``) at ``target`` by
    ``write(staged)`` into a temporary sibling folder, then rename it over ``target``: a
    folder already there is replaced only once the new one is complete, and put back if
    the swap fails (or kept and named, if even that fails)."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(
            tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".saving", dir=target.parent)
        )
    except OSError as error:
        raise ProgramError(f"{target}: could not write the package: {error}") from error
    aside = scratch / "previous.mlpackage"
    try:
        staged = scratch / target.name
        write(staged)
        _swap_in(staged, target, aside)
    except _NotRestored as failed:
        # The previous package could not go back: keep it where it is, and say where.
        raise ProgramError(
            f"{target}: could not write the package ({failed.cause}), nor put the previous "
            f"one back ({failed.error}); it is at {aside}"
        ) from failed.error
    except OSError as error:
        shutil.rmtree(scratch, ignore_errors=True)
        raise ProgramError(f"{target}: could not write the package: {error}") from error
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)  # a partial new package
        raise
    shutil.rmtree(scratch, ignore_errors=True)  # the old package
    return target


class _NotRestored(Exception):
    """The new package did not go in (``cause``) and the old one did not come back
    (``error``)."""

    def __init__(self, cause: OSError, error: OSError) -> None:
        super().__init__(str(error))
        self.cause, self.error = cause, error


def _swap_in(staged: Path, target: Path, aside: Path) -> None:
    """Rename ``staged`` to ``target``; a package at ``target`` goes to ``aside`` first
    (a directory cannot be renamed over a full one) and comes back if the swap fails."""
    if not target.exists():
        staged.rename(target)
        return
    target.rename(aside)
    try:
        staged.rename(target)
    except OSError as cause:
        try:
            aside.rename(target)
        except OSError as error:
            raise _NotRestored(cause, error) from None
        raise


def record_io_widths(
    metadata: MutableMapping[str, str], widths: Mapping[str, Mapping[str, int]]
) -> None:
    """Write ``widths`` (function -> {name -> the width callers see}) to a package's
    user-defined ``metadata`` under :data:`IO_WIDTHS_KEY`; functions with none are left
    out, and the key is removed when no function has any."""
    kept = {name: dict(sorted(each.items())) for name, each in widths.items() if each}
    if kept:
        metadata[IO_WIDTHS_KEY] = json.dumps(kept, sort_keys=True)
    elif IO_WIDTHS_KEY in metadata:
        del metadata[IO_WIDTHS_KEY]


def read_io_widths(metadata: Mapping[str, str], function: str) -> dict[str, int]:
    """The I/O widths a package's ``metadata`` records for ``function`` (empty: none).

    Packages written before the one key carry a single function's widths under
    :data:`LEGACY_IO_WIDTHS_KEY`; they are read when :data:`IO_WIDTHS_KEY` has none for
    ``function``. Raises ``ValueError`` on metadata that is not such a map."""
    per_function = json.loads(metadata.get(IO_WIDTHS_KEY) or "{}")
    if not isinstance(per_function, dict):
        raise ValueError(f"{IO_WIDTHS_KEY} is not a map of functions")
    widths = per_function.get(function)
    if widths is None:
        widths = json.loads(metadata.get(LEGACY_IO_WIDTHS_KEY) or "{}")
    if not isinstance(widths, dict):
        raise ValueError(f"the widths of {function!r} are not a map of names")
    return {str(name): int(width) for name, width in widths.items()}
