"""Core AI assets on disk (``.aimodel`` folders), read without Core AI: the check of
their bytecode against its digest, and the source package anekit keeps inside the
assets it writes (:mod:`anekit.package.coreai` writes them).

An asset is a folder: ``main.mlirb`` (MLIR bytecode of the ``coreai`` dialect),
``main.hash`` (its SHA-256, raw bytes, written by ``AIProgram.save_asset`` in
coreai-core 1.0.0b3's ``coreai/authoring/asset.py``) and ``metadata.json``. The check
comes before Core AI reads an asset: coreai-core 1.0.0b3 aborts the whole process
(``std::bad_cast``) on corrupt bytecode. Core AI's bytecode is not read back into MIL;
the package under ``anekit/`` (:data:`SOURCE_FOLDER`), bound to the bytecode by its
SHA-256, is how ``anekit.load("x.aimodel")`` gets a program the simulator and the
analysis take.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from anekit.errors import ProgramError

#: The asset folder's extension.
SUFFIX = ".aimodel"
#: The asset's bytecode and the SHA-256 digest of it Core AI writes beside it.
BYTECODE, DIGEST = "main.mlirb", "main.hash"
#: Where anekit keeps the program it emitted inside an asset: the package and a record
#: binding it to the bytecode.
SOURCE_FOLDER, SOURCE_PACKAGE, SOURCE_RECORD = "anekit", "source.mlpackage", "source.json"


def bytecode_digest(asset: Path) -> str:
    """The hex SHA-256 of the asset's bytecode."""
    return hashlib.sha256((asset / BYTECODE).read_bytes()).hexdigest()


def check_asset(path: str | os.PathLike[str]) -> Path:
    """``path`` if it is a Core AI asset whose bytecode matches its ``main.hash``; else a
    :class:`ProgramError` saying what is wrong (checked before Core AI reads it: corrupt
    bytecode aborts the process inside coreai-core)."""
    location = Path(path)
    if location.suffix != SUFFIX or not location.is_dir():
        what = "no such folder" if not location.exists() else f"not a {SUFFIX} folder"
        raise ProgramError(f"{location}: {what}")
    missing = [name for name in (BYTECODE, DIGEST) if not (location / name).is_file()]
    if missing:
        raise ProgramError(f"{location}: not a Core AI asset (no {', '.join(missing)})")
    digest = hashlib.sha256((location / BYTECODE).read_bytes()).digest()
    if digest != (location / DIGEST).read_bytes():
        raise ProgramError(
            f"{location}: {BYTECODE} does not match {DIGEST} (a corrupt or changed asset); "
            "write it again"
        )
    return location


def asset_source(path: str | os.PathLike[str]) -> Path:
    """The package anekit kept inside the asset ``path`` (checked: the asset's hash, and
    that the package was written with this bytecode); a :class:`ProgramError` with the
    reason when there is none to read."""
    location = check_asset(path)
    folder = location / SOURCE_FOLDER
    if not (folder / SOURCE_RECORD).is_file() or not (folder / SOURCE_PACKAGE).is_dir():
        raise ProgramError(
            f"{location}: holds no anekit source program (not written by anekit from a "
            "package); anekit reads MIL programs, not Core AI bytecode, so it can run this "
            "asset on Core AI but not simulate or analyse it"
        )
    try:
        record = json.loads((folder / SOURCE_RECORD).read_text("utf-8"))
        written_for = record["bytecode_sha256"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ProgramError(f"{folder / SOURCE_RECORD}: unreadable ({error})") from error
    if written_for != bytecode_digest(location):
        raise ProgramError(
            f"{location}: its {BYTECODE} is not the bytecode anekit wrote with the source "
            "program beside it (the asset was changed since); write it again"
        )
    return folder / SOURCE_PACKAGE


__all__ = [
    "BYTECODE",
    "DIGEST",
    "SOURCE_FOLDER",
    "SOURCE_PACKAGE",
    "SOURCE_RECORD",
    "SUFFIX",
    "asset_source",
    "bytecode_digest",
    "check_asset",
]
