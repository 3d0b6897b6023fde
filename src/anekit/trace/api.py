"""Trace a NumPy function into a MIL program.

:func:`trace_function` runs the user's function once on :class:`Tracer` inputs
whose shapes and dtypes come from the example arguments, and returns the MIL
program it recorded. Program input names are the Python parameter names.
"""

from __future__ import annotations

import inspect
import linecache
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from coremltools.converters.mil.mil.passes.pass_registry import PASS_REGISTRY
from coremltools.converters.mil.mil.var import Var

from anekit import dtypes
from anekit._coremltools import Function, Program, ct, mb
from anekit.errors import TraceError, UnsupportedDtypeError
from anekit.specs import OutputTree, TensorSpec
from anekit.trace.context import TraceContext, is_valid_name, var_dtype, var_shape
from anekit.trace.source import SourceLocation, user_location
from anekit.trace.tracer import Tracer

#: Core ML multiarray inputs have rank 1 to 5.
MAX_RANK = 5


@dataclass
class TraceResult:
    """What one trace produced: the program and what is needed to call it."""

    program: Program
    function_name: str
    input_specs: tuple[TensorSpec, ...]
    output_specs: tuple[TensorSpec, ...]
    output_tree: OutputTree
    source: str
    locations: dict[str, SourceLocation] = field(default_factory=dict)


def _parameter_names(fn: Callable[..., Any], count: int) -> list[str]:
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return [f"arg{i}" for i in range(count)]
    names: list[str] = []
    for parameter in parameters:
        if len(names) == count:
            break
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            names.append(parameter.name)
        elif parameter.kind == parameter.VAR_POSITIONAL:
            names.extend(f"{parameter.name}_{i}" for i in range(count - len(names)))
    if len(names) < count:
        raise TraceError(
            f"{getattr(fn, '__qualname__', fn)!r} takes {len(names)} positional "
            f"argument(s) but {count} example inputs were given",
            location=user_location(),
        )
    return names


def _check_enough_inputs(fn: Callable[..., Any], count: int) -> None:
    """A TraceError naming ``fn`` and its definition when some required parameter gets no
    example input (rather than the TypeError calling it would raise inside anekit)."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    missing = [p.name for p in positional[count:] if p.default is p.empty]
    keyword_only = [p.name for p in parameters if p.kind == p.KEYWORD_ONLY and p.default is p.empty]
    if not missing and not keyword_only:
        return
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    signature = f"{name}({', '.join(p.name for p in parameters)})"
    if missing:
        message = (
            f"{signature} was given {count} example input(s) and none for "
            f"{', '.join(missing)}: every parameter without a default needs one"
        )
    else:
        message = (
            f"{signature} has keyword-only parameter(s) without a default "
            f"({', '.join(keyword_only)}), which example inputs cannot fill"
        )
    code = getattr(fn, "__code__", None)
    location = None
    if code is not None:
        line = linecache.getline(code.co_filename, code.co_firstlineno).strip()
        location = SourceLocation(code.co_filename, code.co_firstlineno, name, line)
    raise TraceError(
        message,
        location=location,
        hint="give one example array or anekit.TensorSpec per parameter (on the command "
        "line, one --shape each), or bind the others first with functools.partial",
    )


def _input_spec(value: Any, name: str, position: int) -> TensorSpec:
    where = f"input {position} ({name!r})"
    if isinstance(value, TensorSpec | np.ndarray):
        shape, dtype = value.shape, value.dtype
    elif hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, Tracer):
        shape, dtype = tuple(value.shape), np.dtype(value.dtype)
    else:
        advice = (
            "bind static values with functools.partial(fn, value) and pass only arrays"
            if isinstance(value, int | float | bool | str)
            else "pass a NumPy array or anekit.TensorSpec(shape, dtype)"
        )
        raise TraceError(
            f"{where} is a {type(value).__name__}; example inputs must be NumPy arrays",
            location=user_location(),
            hint=advice,
        )
    dtype = np.dtype(dtype)
    if dtype not in dtypes.INPUT_DTYPES:
        hint: str | None = (
            f"pass {name}.astype(np.float32) (or np.float16 for the ANE)"
            if dtype.kind == "f"
            else f"pass {name}.astype(np.int32)"
            if dtype.kind in "iub"
            else None
        )
        raise UnsupportedDtypeError(
            f"{where} has dtype {dtype}; Core ML program inputs must be float16, float32 or int32",
            location=user_location(),
            hint=hint,
        )
    if not shape:
        raise TraceError(
            f"{where} is 0-dimensional; Core ML program inputs need at least one dimension",
            location=user_location(),
            hint=f"pass {name}.reshape(1) and index it with [0] inside the function",
        )
    if len(shape) > MAX_RANK or any(dim <= 0 for dim in shape):
        raise TraceError(
            f"{where} has shape {tuple(shape)}; Core ML inputs have rank 1 to {MAX_RANK} "
            "and no empty dimensions",
            location=user_location(),
        )
    return TensorSpec(shape, dtype, name)


def _flatten_outputs(
    result: Any, output_names: Sequence[str] | None
) -> tuple[OutputTree, list[tuple[str, Any]]]:
    if isinstance(result, dict):
        tree: OutputTree = "dict"
        items = [(str(key), value) for key, value in result.items()]
    elif isinstance(result, tuple | list):
        tree = "tuple" if isinstance(result, tuple) else "list"
        items = [(f"output_{i}", value) for i, value in enumerate(result)]
    else:
        tree = "single"
        items = [("output", result)]
    if not items:
        raise TraceError("the traced function returned no outputs", location=None)
    if output_names is not None:
        if len(output_names) != len(items):
            raise TraceError(f"output_names has {len(output_names)} names for {len(items)} outputs")
        items = [(name, value) for name, (_, value) in zip(output_names, items, strict=True)]
    return tree, items


def _finish_output(ctx: TraceContext, name: str, value: Any, used: set[int], index: int) -> Var:
    if not isinstance(value, Tracer):
        raise TraceError(
            f"output {index} ({name!r}) is a {type(value).__name__}, not a traced array: "
            "it does not depend on any input",
            hint="return only values computed from the inputs; constants can be added "
            "outside the program",
        )
    if value._ctx is not ctx:
        raise TraceError(f"output {index} ({name!r}) comes from another trace")
    var = value._var
    if var.op is None or id(var) in used:
        # An input returned as is, or one value returned twice: Core ML needs an op
        # per output, so copy it.
        var = ctx.emit("identity", x=var)
    if not var.shape:
        # Core ML outputs have at least one dimension.
        var = ctx.emit("reshape", x=var, shape=np.array([1], np.int32))
    used.add(id(var))
    if not is_valid_name(name):
        raise TraceError(f"output name {name!r} is not a valid identifier")
    if name in ctx.function.inputs:
        raise TraceError(f"output name {name!r} is already the name of an input")
    var.set_name(ctx.reserve(name) if var.name != name else name)
    return var


def trace_function(
    fn: Callable[..., Any],
    example_args: Sequence[Any],
    *,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    target: Any = None,
) -> TraceResult:
    """Run ``fn`` on tracers shaped like ``example_args`` and return its MIL program."""
    if not callable(fn):
        raise TraceError(f"anekit.compile needs a function, got {type(fn).__name__}")
    target = ct.target.macOS15 if target is None else target
    _check_enough_inputs(fn, len(example_args))
    names = (
        list(input_names) if input_names is not None else _parameter_names(fn, len(example_args))
    )
    names = [
        arg.name if isinstance(arg, TensorSpec) and arg.name and input_names is None else name
        for arg, name in zip(example_args, names, strict=False)
    ]
    if len(names) != len(example_args):
        raise TraceError(f"input_names has {len(names)} names for {len(example_args)} inputs")
    for name in names:
        if not is_valid_name(name):
            raise TraceError(f"input name {name!r} is not a valid identifier")
    if len(set(names)) != len(names):
        raise TraceError(f"input names must be unique, got {names}")
    specs = tuple(
        _input_spec(arg, name, i)
        for i, (arg, name) in enumerate(zip(example_args, names, strict=True))
    )

    placeholders = {
        spec.name: mb.placeholder(shape=spec.shape, dtype=dtypes.to_mil(spec.dtype), name=spec.name)
        for spec in specs
    }
    function = Function(placeholders, opset_version=target)
    fn_name = getattr(fn, "__name__", "function")
    ctx = TraceContext(function)
    with ctx.active():
        tracers = [
            Tracer(function.inputs[spec.name], ctx, frozenset({str(spec.name)})) for spec in specs
        ]
        result = fn(*tracers)
        tree, items = _flatten_outputs(result, output_names)
        used: set[int] = set()
        outputs = [
            _finish_output(ctx, name, value, used, i) for i, (name, value) in enumerate(items)
        ]
        function.set_outputs(outputs)

    program = Program()
    program.add_function("main", function)
    PASS_REGISTRY["common::dead_code_elimination"](program)
    program.validate()
    output_specs = tuple(TensorSpec(var_shape(var), var_dtype(var), var.name) for var in outputs)
    module = getattr(fn, "__module__", None) or "<unknown>"
    return TraceResult(
        program=program,
        function_name="main",
        input_specs=specs,
        output_specs=output_specs,
        output_tree=tree,
        source=f"{module}.{getattr(fn, '__qualname__', fn_name)}",
        locations=dict(ctx.locations),
    )
