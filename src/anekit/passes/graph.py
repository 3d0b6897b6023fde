"""Small graph helpers the passes share: consumers, constants, replacing a var."""

from __future__ import annotations

from typing import Any

import numpy as np
from coremltools.converters.mil.mil import Builder as mb

from anekit._milgraph import numpy_dtype
from anekit.ops.groups import BINARY_ELEMENTWISE


def consumers(var: Any) -> list[Any]:
    """The ops that read ``var`` (each once)."""
    return list(dict.fromkeys(var.child_ops))


def ops_of_type(function: Any, *op_types: str) -> list[Any]:
    """The ops of these types, in order, as a new list (safe to rewrite while iterating)."""
    return [op for op in function.operations if op.op_type in op_types]


def is_output(var: Any, function: Any) -> bool:
    return any(var is output for output in function.outputs)


def const_value(var: Any) -> np.ndarray | None:
    """The compile-time value of ``var`` (a const or a folded value), else None."""
    value = getattr(var, "val", None)
    return None if value is None else np.asarray(value)


def scalar_value(var: Any) -> float | None:
    """The value of ``var`` when it is a compile-time constant of one element, else None."""
    value = var.val
    if value is None or np.size(value) != 1:
        return None
    return float(np.asarray(value).reshape(()))


def float_dtype(var: Any) -> np.dtype[Any]:
    """``var``'s NumPy float dtype (float16 for fp16 vars, float32 otherwise)."""
    dtype = numpy_dtype(var)
    return dtype if dtype is not None and dtype.kind == "f" else np.dtype(np.float32)


def replace_var(function: Any, anchor: Any, old: Any, new: Any, *, same_type: bool = True) -> None:
    """Make every reader of ``old`` after ``anchor`` read ``new`` instead. A function
    output keeps its name (coremltools renames ``new``). ``same_type=False`` allows a
    ``new`` of another shape (a broadcast operand, a tensor of lower rank), for readers
    whose output does not change."""
    function.replace_uses_of_var_after_op(
        anchor_op=anchor, old_var=old, new_var=new, no_check_var_types=not same_type
    )


def remove_dead_code(prog: Any) -> None:
    """Drop ops whose outputs nobody reads (what a rewrite left behind)."""
    from coremltools.converters.mil.mil.passes.pass_registry import PASS_REGISTRY

    PASS_REGISTRY["common::dead_code_elimination"].apply(prog)


__all__ = [
    "BINARY_ELEMENTWISE",
    "const_value",
    "consumers",
    "float_dtype",
    "is_output",
    "mb",
    "ops_of_type",
    "remove_dead_code",
    "replace_var",
    "scalar_value",
]
