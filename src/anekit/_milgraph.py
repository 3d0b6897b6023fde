"""Small questions about MIL Vars and ops that several components ask.

Dtype and static shape of a Var, whether it is a constant, and MIL's defaults for an
op's optional inputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from coremltools.converters.mil.mil import types


def numpy_dtype(var: Any) -> np.dtype[Any] | None:
    """The NumPy dtype of a tensor or scalar Var, or None for strings and lists."""
    if not (types.is_tensor(var.sym_type) or types.is_scalar(var.sym_type)):
        return None
    if var.dtype is types.str:
        return None
    result: np.dtype[Any] = np.dtype(types.nptype_from_builtin(var.dtype))
    return result


def static_shape(var: Any) -> tuple[int, ...] | None:
    """The Var's shape, or None when it has symbolic dimensions."""
    try:
        return tuple(int(dim) for dim in var.shape)
    except TypeError:
        return None


def mil_defaults(op: Any) -> dict[str, Any]:
    """MIL's defaults for the optional inputs of ``op``, as coremltools' op spec defines
    them (the op class's ``default_inputs()``: layer_norm's epsilon 1e-5, gelu's mode
    ``EXACT``, ...), leaving out those whose default is "absent" (None). The one place
    anekit reads a MIL default: the interpreter, the lowerings and the passes ask here
    rather than restating one."""
    try:
        defaults = op.default_inputs()
    except Exception:  # a default that needs an input the op lacks (a malformed op)
        return {}
    return {name: value for name, value in defaults.items() if value is not None}


def mil_input(op: Any, name: str) -> Any:
    """The compile-time value of ``op``'s input ``name``: the constant it was given
    (None when that is computed at run time), else MIL's default (None when it has none)."""
    var = op.inputs.get(name)
    if var is None:
        return mil_defaults(op).get(name)
    return var.val


def is_constant(var: Any) -> bool:
    """True for the output of a ``const`` or compile-time (``constexpr_*``) op."""
    op = getattr(var, "op", None)
    return op is not None and (op.op_type == "const" or op.op_type.startswith("constexpr_"))
