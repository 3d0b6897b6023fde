"""Trace a function named on the command line: ``path/to/file.py:name`` or ``package.module:name``,
with example inputs given as shapes (``x=1,256,1,128:float16``).

Light to import (the standard library and :mod:`anekit.errors`): the command line checks a
reference and its shapes with :func:`check_reference` before it pays for NumPy, the tracer
and coremltools, which are imported where used.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anekit.errors import ProgramError

if TYPE_CHECKING:
    from anekit.program import CompiledProgram
    from anekit.specs import TensorSpec

DEFAULT_DTYPE = "float16"


def is_function_reference(text: str) -> bool:
    """True for ``module:function`` / ``file.py:function`` (and not for a package path)."""
    if ":" not in text or Path(text).exists():
        return False
    module, _, name = text.rpartition(":")
    return bool(module) and name.isidentifier()


def _is_file(module: str) -> bool:
    """True when the module part of a reference names a file, not a dotted module."""
    return module.endswith(".py") or "/" in module or "\\" in module


def _load_module(module: str) -> Any:
    from anekit.trace.source import register_user_code

    if _is_file(module):
        path = Path(module)
        if not path.is_file():
            raise ProgramError(f"{module}: no such Python file")
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise ProgramError(f"{module}: cannot be imported as a Python module")
        loaded = importlib.util.module_from_spec(spec)
        register_user_code(str(path.resolve()))
        try:
            spec.loader.exec_module(loaded)
        except Exception as error:
            raise ProgramError(f"{module}: importing it failed: {error!r}") from error
        return loaded
    if str(Path.cwd()) not in sys.path:  # as ``python -m`` would, for local modules
        sys.path.insert(0, str(Path.cwd()))
    try:
        loaded = importlib.import_module(module)
    except ImportError as error:
        raise ProgramError(f"{module}: cannot import it: {error}") from error
    if getattr(loaded, "__file__", None):
        register_user_code(str(loaded.__file__))
    return loaded


def resolve_function(reference: str) -> Callable[..., Any]:
    """The callable that ``module:function`` names."""
    module, _, name = reference.rpartition(":")
    if not module or not name:
        raise ProgramError(f"{reference!r}: expected module:function or path/to/file.py:function")
    loaded = _load_module(module)
    function = getattr(loaded, name, None)
    if function is None:
        raise ProgramError(f"{module}: has no attribute {name!r}")
    if not callable(function):
        raise ProgramError(f"{reference}: is a {type(function).__name__}, not a function")
    return function  # type: ignore[no-any-return]


def parse_shape(text: str) -> tuple[str | None, TensorSpec]:
    """``[name=]dims[:dtype]``: ``x=1,256,1,128:float16`` or ``4x32`` (dtype default float16)."""
    name: str | None = None
    body = text.strip()
    if "=" in body:
        name, _, body = body.partition("=")
        name = name.strip()
        if not name.isidentifier():
            raise ProgramError(f"--shape {text!r}: {name!r} is not an input name")
    dims_text, _, dtype_text = body.partition(":")
    try:
        dims = [int(dim) for dim in dims_text.replace("x", ",").split(",") if dim.strip()]
    except ValueError:
        raise ProgramError(
            f"--shape {text!r}: dimensions must be integers, e.g. x=1,256,1,128:float16"
        ) from None
    if not dims or any(dim <= 0 for dim in dims):
        raise ProgramError(f"--shape {text!r}: needs one or more positive dimensions")
    import numpy as np

    from anekit.specs import TensorSpec

    try:
        dtype = np.dtype(dtype_text.strip() or DEFAULT_DTYPE)
    except TypeError:
        raise ProgramError(f"--shape {text!r}: unknown dtype {dtype_text!r}") from None
    return name, TensorSpec(dims, dtype, name)


def check_reference(reference: str, shapes: Sequence[str]) -> None:
    """What can be checked of ``reference`` and its ``shapes`` before importing anything:
    a file it names exists, shapes are given and each parses; a ProgramError if not."""
    module, _, name = reference.rpartition(":")
    if not module or not name:
        raise ProgramError(f"{reference!r}: expected module:function or path/to/file.py:function")
    if _is_file(module) and not Path(module).is_file():
        raise ProgramError(f"{module}: no such Python file")
    if not shapes:
        raise ProgramError(
            f"{reference}: give the example input shapes, e.g. --shape x=1,256,1,128:float16"
        )
    for text in shapes:
        parse_shape(text)


def _ordered(function: Callable[..., Any], shapes: Sequence[str]) -> list[TensorSpec]:
    parsed = [parse_shape(text) for text in shapes]
    if all(name is None for name, _ in parsed):
        return [spec for _, spec in parsed]
    if any(name is None for name, _ in parsed):
        raise ProgramError("--shape: name every input (x=...) or none of them")
    try:
        parameters = list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        parameters = []
    by_name = {name: spec for name, spec in parsed if name is not None}
    unknown = [name for name in by_name if name not in parameters]
    if unknown:
        raise ProgramError(
            f"--shape names {', '.join(unknown)}, which the function does not take "
            f"(its parameters: {', '.join(parameters) or 'unknown'})"
        )
    return [by_name[name] for name in parameters if name in by_name]


def compile_reference(
    reference: str,
    shapes: Sequence[str],
    *,
    deployment_target: str = "macOS15",
    passes: bool = True,
) -> CompiledProgram:
    """Trace the function ``reference`` names on inputs of the given ``shapes`` (and run
    the ANE passes unless ``passes=False``)."""
    from anekit.frontends.numpy import compile_function

    check_reference(reference, shapes)
    function = resolve_function(reference)
    specs = _ordered(function, shapes)
    return compile_function(function, *specs, deployment_target=deployment_target, passes=passes)
