"""Reading ``.mlpackage`` / mlprogram ``.mlmodel`` files: their model spec and MIL
program, on any OS, without writing to them.

coremltools' milproto loader (``coremltools.converters.mil.frontend.milproto``)
turns the package's protobuf program and weight blob into a Python MIL
``Program``; no Core ML runtime is involved.

Packages are read, never written: coremltools' ``MLModel`` and ``load_spec`` open a
package through libmodelpackage, which rewrites its ``Manifest.json`` when it lets
go of it (new bytes when another tool wrote the manifest, a new mtime always). So
the manifest is read here as the JSON it is, and the model spec and weights are
read from the files it names.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from coremltools.converters.mil.frontend.milproto.load import load as milproto_load

from anekit._coremltools import ct
from anekit._package_path import checked_package_path
from anekit.errors import ProgramError

#: Where a package's manifest keeps the model spec and the weights (coremltools' names).
_AUTHOR = "com.apple.CoreML"
_WEIGHTS = "weights"


def _package_files(location: Path) -> tuple[Path, Path | None]:
    """The model spec file and the weights folder (if any) of the package at
    ``location``, from its ``Manifest.json``, without writing to the package."""
    try:
        manifest = json.loads((location / "Manifest.json").read_text("utf-8"))
        entries = manifest["itemInfoEntries"]
        root = entries[manifest["rootModelIdentifier"]]["path"]
    except FileNotFoundError:
        raise ProgramError(f"{location}: not an .mlpackage (no Manifest.json)") from None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ProgramError(f"{location}: unreadable Manifest.json: {error!r}") from error
    data = location / "Data"
    weights = [
        data / str(entry.get("path"))
        for entry in entries.values()
        if isinstance(entry, dict)
        and entry.get("name") == _WEIGHTS
        and entry.get("author") == _AUTHOR
    ]
    return data / str(root), (weights[0] if weights else None)


def read_spec(location: Path) -> tuple[Any, Path | None]:
    """The model spec (protobuf) and the weights folder of a package or ``.mlmodel``,
    read without writing to the package."""
    spec_file, weights = _package_files(location) if location.is_dir() else (location, None)
    spec = ct.proto.Model_pb2.Model()
    try:
        spec.ParseFromString(spec_file.read_bytes())
    except Exception as error:
        raise ProgramError(
            f"{location}: coremltools could not read the package: {error}"
        ) from error
    return spec, weights


def read_program(path: str | os.PathLike[str]) -> tuple[Any, Any]:
    """The MIL program of the package at ``path`` and its model spec; the package is
    only read (its files' bytes and modification times stay as they were)."""
    location, spec, weights = _read_ml_program(path)
    return _load(location, spec, weights), spec


def read_function(
    path: str | os.PathLike[str], function: str | None = None
) -> tuple[Any, Any, str]:
    """One function of the package at ``path`` (default: the package's default function)
    as a MIL program holding only that function, its model spec and its name.

    coremltools builds every op of every function it loads, so one bucket of a
    six-bucket package loads about six times faster than the whole program."""
    location, spec, weights = _read_ml_program(path)
    names = list(spec.mlProgram.functions)
    default = spec.description.defaultFunctionName or "main"
    name = function or (default if default in names else names[0])
    if name not in names:
        raise ProgramError(
            f"{location}: has no function {name!r}; its functions are {', '.join(sorted(names))}"
        )
    for other in [other for other in names if other != name]:
        del spec.mlProgram.functions[other]
    return _load(location, spec, weights), spec, name


def _read_ml_program(path: str | os.PathLike[str]) -> tuple[Path, Any, Path | None]:
    location = checked_package_path(path)
    if location.suffix == ".aimodel":  # its source package: anekit.package.coreai
        raise ProgramError(f"{location}: a Core AI asset, not a Core ML package")
    spec, weights = read_spec(location)
    kind = spec.WhichOneof("Type")
    if kind != "mlProgram":
        raise ProgramError(
            f"{location}: is a {kind} model; only ML programs (mlprogram) can be loaded"
        )
    return location, spec, weights


def _load(location: Path, spec: Any, weights: Path | None) -> Any:
    try:
        return milproto_load(spec, spec.specificationVersion, str(weights or ""))
    except Exception as error:
        raise ProgramError(f"{location}: could not read its MIL program: {error}") from error
