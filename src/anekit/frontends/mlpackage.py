"""Read ``.mlpackage`` / mlprogram ``.mlmodel`` files back into MIL programs, on any OS.

coremltools' milproto loader (``coremltools.converters.mil.frontend.milproto``)
turns the package's protobuf program and weight blob into a Python MIL
``Program``; no Core ML runtime is involved.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from coremltools.converters.mil.frontend.milproto.load import load as milproto_load

from anekit._coremltools import ct
from anekit.errors import ProgramError
from anekit.program import CompiledProgram


def read_program(path: str | os.PathLike[str]) -> tuple[Any, Any]:
    """The MIL program of the package at ``path`` and its model spec."""
    location = Path(path)
    if not location.exists():
        raise ProgramError(f"{location}: no such file or directory")
    if location.suffix not in (".mlpackage", ".mlmodel"):
        raise ProgramError(f"{location}: expected an .mlpackage directory or an .mlmodel file")
    try:
        model = ct.models.MLModel(str(location), skip_model_load=True)
    except Exception as error:
        raise ProgramError(
            f"{location}: coremltools could not read the package: {error}"
        ) from error
    spec = model.get_spec()
    kind = spec.WhichOneof("Type")
    if kind != "mlProgram":
        raise ProgramError(
            f"{location}: is a {kind} model; only ML programs (mlprogram) can be loaded"
        )
    try:
        program = milproto_load(spec, spec.specificationVersion, model.weights_dir or "")
    except Exception as error:
        raise ProgramError(f"{location}: could not read its MIL program: {error}") from error
    return program, spec


def load_package(path: str | os.PathLike[str], *, function: str | None = None) -> CompiledProgram:
    """The package at ``path`` as a :class:`CompiledProgram` for one of its functions."""
    program, spec = read_program(path)
    default = spec.description.defaultFunctionName or "main"
    name = function or (default if default in program.functions else next(iter(program.functions)))
    if name not in program.functions:
        raise ProgramError(
            f"{path}: has no function {name!r}; "
            f"its functions are {', '.join(sorted(program.functions))}"
        )
    chosen = program.functions[name]
    outputs = list(chosen.outputs)
    metadata = dict(spec.description.metadata.userDefined)
    try:
        io_widths = {
            str(k): int(v) for k, v in json.loads(metadata.get("anekit.io_widths", "{}")).items()
        }
    except (ValueError, AttributeError) as error:
        raise ProgramError(f"{path}: unreadable anekit.io_widths metadata: {error}") from error
    return CompiledProgram(
        program,
        function_name=name,
        output_tree="single" if len(outputs) == 1 else "dict",
        source=str(path),
        deployment_target=chosen.opset_version,
        converted=True,
        io_widths=io_widths,
        package_path=Path(path),
    )
