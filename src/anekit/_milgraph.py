"""Small questions about MIL Vars and ops that several components ask.

Dtype and static shape of a Var, and whether it is a constant.
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


def is_constant(var: Any) -> bool:
    """True for the output of a ``const`` or compile-time (``constexpr_*``) op."""
    op = getattr(var, "op", None)
    return op is not None and (op.op_type == "const" or op.op_type.startswith("constexpr_"))
