"""Load ``.mlpackage`` / mlprogram ``.mlmodel`` files as :class:`CompiledProgram`s
(:mod:`anekit._mlpackage` reads them)."""

from __future__ import annotations

import os
from pathlib import Path

from anekit._mlpackage import read_function, read_program, read_spec
from anekit.errors import ProgramError
from anekit.package.saving import read_io_widths
from anekit.program import CompiledProgram


def load_package(path: str | os.PathLike[str], *, function: str | None = None) -> CompiledProgram:
    """``anekit.load``: read an ``.mlpackage`` (or mlprogram ``.mlmodel``) back into a MIL
    program.

    Works on any OS (coremltools' milproto loader); ``function`` picks a function
    of a multifunction package (default: the package's default function). The
    result runs in the simulator off macOS and on Core ML on a Mac. A Core AI
    ``.aimodel`` anekit wrote is read through the package it keeps inside
    (:func:`anekit._aimodel.asset_source`); any other asset is refused with why.
    """
    package = path
    if Path(path).suffix == ".aimodel":
        from anekit._aimodel import asset_source

        package = asset_source(path)
    program, spec, name = read_function(package, function)  # only the function it runs
    chosen = program.functions[name]
    outputs = list(chosen.outputs)
    metadata = dict(spec.description.metadata.userDefined)
    try:
        io_widths = read_io_widths(metadata, name)
    except (ValueError, TypeError, AttributeError) as error:
        raise ProgramError(f"{path}: unreadable io widths metadata: {error}") from error
    return CompiledProgram(
        program,
        function_name=name,
        output_tree="single" if len(outputs) == 1 else "dict",
        source=str(path),
        deployment_target=chosen.opset_version,
        converted=True,
        io_widths=io_widths,
        package_path=Path(package),
    )


__all__ = ["load_package", "read_program", "read_spec"]
