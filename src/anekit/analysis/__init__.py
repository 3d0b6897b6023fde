"""Placement analysis: which ops of a program Core ML can place on the ANE, and why not.

``analyze(target)`` works on any OS, from the op table (package data) and the
constraint rules, for a ``CompiledProgram``, a package path or a MIL program. It
returns a :class:`PlacementReport`: per op its verdict and expected device per ANE
family, the rules that fired, a reason and a fix. It is a prediction; on a Mac,
``anekit doctor`` also shows where Core ML's compute plan actually puts each op.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from anekit.analysis.analyzer import PackageFacts
    from anekit.analysis.optable import OpTable
    from anekit.analysis.optable import load as load_op_table
    from anekit.analysis.report import Finding, FunctionReport, OpPlacement, PlacementReport
    from anekit.analysis.rules import RULES

__all__ = [
    "RULES",
    "Finding",
    "FunctionReport",
    "OpPlacement",
    "OpTable",
    "PlacementReport",
    "analyze",
    "load_op_table",
    "package_facts",
]


# Imported on first use: the analyzer and the rules import coremltools (seconds), which a
# command that only checks its arguments, or reads the op table, should not pay for.
_LAZY = {
    "RULES": ("anekit.analysis.rules", "RULES"),
    "Finding": ("anekit.analysis.report", "Finding"),
    "FunctionReport": ("anekit.analysis.report", "FunctionReport"),
    "OpPlacement": ("anekit.analysis.report", "OpPlacement"),
    "PlacementReport": ("anekit.analysis.report", "PlacementReport"),
    "OpTable": ("anekit.analysis.optable", "OpTable"),
    "load_op_table": ("anekit.analysis.optable", "load"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'anekit.analysis' has no attribute {name!r}")
    module, attribute = _LAZY[name]
    return getattr(importlib.import_module(module), attribute)


def package_facts(path: Path, spec: Any) -> PackageFacts:
    """Size on disk and enumerated-shape inputs of a package."""
    from anekit.analysis.analyzer import PackageFacts

    size = (
        sum(item.stat().st_size for item in path.rglob("*") if item.is_file())
        if path.is_dir()
        else path.stat().st_size
    )
    enumerated = tuple(
        item.name
        for item in spec.description.input
        if item.type.WhichOneof("Type") == "multiArrayType"
        and item.type.multiArrayType.WhichOneof("ShapeFlexibility") == "enumeratedShapes"
    )
    return PackageFacts(size_bytes=size, enumerated_inputs=enumerated)


def analyze(
    target: Any,
    *,
    families: Sequence[str] | None = None,
    function: str | None = None,
    platform: str = "macos",
) -> PlacementReport:
    """Predict the placement of ``target``: a ``CompiledProgram``, a path to an
    ``.mlpackage``/mlprogram ``.mlmodel``, or a coremltools MIL ``Program``.

    Traced programs are analysed as they would be saved (coremltools' pass pipeline
    at fp16 compute precision). ``families`` picks ANE families (default: all in the
    op table); ``function`` one function of a multifunction package.
    """
    from anekit.analysis.analyzer import analyze_program

    functions = [function] if function else None
    package = None
    if callable(getattr(target, "lowered", None)):  # a CompiledProgram
        program, source = target.lowered(), target.source
        functions = functions or ["main" if not target.converted else target.function_name]
    elif isinstance(target, str | os.PathLike):
        from anekit._mlpackage import read_program

        path = Path(target)
        if path.suffix == ".aimodel":  # the package anekit kept inside the asset
            from anekit._aimodel import asset_source

            program, spec = read_program(asset_source(path))
        else:
            program, spec = read_program(path)
        source, package = str(path), package_facts(path, spec)
    elif hasattr(target, "functions"):
        program, source = target, "<program>"
    else:
        raise TypeError(
            f"cannot analyse a {type(target).__name__}; pass a CompiledProgram, a path or a Program"
        )
    return analyze_program(
        program,
        source=source,
        families=families,
        functions=functions,
        package=package,
        platform=platform,
    )
