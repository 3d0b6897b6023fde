"""A readable text dump of MIL programs, each op annotated with its user line.

coremltools' own ``str(program)`` hides constants; this dump lists every op,
summarizes constants by shape instead of printing their values, and ends each line
with the ``file:line`` that produced it when the op carries anekit's source scope.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from coremltools.converters.mil.mil import types
from coremltools.converters.mil.mil.scope import ScopeSource
from coremltools.converters.mil.mil.var import Var

from anekit._coremltools import Program

#: The MIL scope source that carries the user's ``file:line`` on every traced op.
#: coremltools defines it for Python source traces; graph passes copy it onto
#: the ops they create, and it is not serialized into packages.
SOURCE_SCOPE = ScopeSource.EXIR_STACK_TRACE

#: Integer and bool constants (axes, shapes, flags) with at most this many
#: elements are shown by value; float constants only when they are scalars.
INLINE_LIMIT = 8


def _is_inline(value: Any) -> bool:
    array = np.asarray(value)
    if array.dtype.kind in "iub":
        return array.size <= INLINE_LIMIT
    return array.ndim == 0


def type_text(var: Var, symbols: dict[str, str] | None = None) -> str:
    """``fp16[256, 512]`` for a tensor Var, ``fp32`` for a scalar.

    coremltools names symbolic dimensions from a process-wide counter (``is235``);
    pass a ``symbols`` dict to rename them ``s0``, ``s1``... in order of first use,
    so the text is the same for the same program in every process.
    """
    dtype = str(types.builtin_to_string(var.dtype))
    if not types.is_tensor(var.sym_type):
        return dtype
    dims = []
    for dim in var.shape:
        text = str(dim)
        if symbols is not None and not isinstance(dim, int | np.integer):
            text = symbols.setdefault(text, f"s{len(symbols)}")
        dims.append(text)
    return f"{dtype}[{', '.join(dims)}]"


def op_location(op: Any) -> str | None:
    """The ``file:line`` anekit recorded on ``op``, if any."""
    scopes = getattr(op, "scopes", None) or {}
    data = scopes.get(SOURCE_SCOPE)
    if not data or data[0] == "<anekit>":
        return None
    return str(data[0])


def _value_text(value: Any) -> str:
    array = np.asarray(value)
    if array.ndim == 0:
        item = array.item()
        return repr(item)
    return repr(array.tolist())


def _input_text(var: Var) -> str:
    is_const = var.op is not None and var.op.op_type == "const" and var.val is not None
    if is_const and _is_inline(var.val):
        return _value_text(var.val)
    return f"%{var.name}"


def _inputs_text(op: Any) -> str:
    parts = []
    for key, value in op.inputs.items():
        if isinstance(value, list | tuple):
            parts.append(f"{key}=({', '.join(_input_text(item) for item in value)})")
        else:
            parts.append(f"{key}={_input_text(value)}")
    return ", ".join(parts)


def _op_lines(operations: Iterable[Any], indent: str) -> list[str]:
    lines = []
    for op in operations:
        outputs = ", ".join(f"%{var.name}: {type_text(var)}" for var in op.outputs)
        if op.op_type == "const":
            value = op.outputs[0].val
            if value is not None and _is_inline(value):
                continue  # small constants are printed inline where they are used
            body = f"const(<{np.size(value)} values>)"
        else:
            body = f"{op.op_type}({_inputs_text(op)})"
        line = f"{indent}{outputs} = {body}"
        location = op_location(op)
        if location:
            line = f"{line:<72}  # {location}"
        lines.append(line)
        for block in op.blocks:
            lines.extend(_op_lines(block.operations, indent + "  "))
    return lines


def format_program(program: Program) -> str:
    """The whole program as text, one function after another."""
    chunks = []
    for name, function in program.functions.items():
        inputs = ", ".join(f"%{var.name}: {type_text(var)}" for var in function.inputs.values())
        outputs = ", ".join(f"%{var.name}" for var in function.outputs)
        opset = getattr(function, "opset_version", None)
        header = f"func {name}({inputs})"
        if opset is not None:
            header += f"  [opset {opset.name}]"
        lines = [header + " {", *_op_lines(function.operations, "  "), f"}} -> ({outputs})"]
        chunks.append("\n".join(lines))
    return "\n\n".join(chunks) + "\n"
