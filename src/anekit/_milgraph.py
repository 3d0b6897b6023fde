"""Small questions about MIL Vars and ops that several components ask.

Dtype and static shape of a Var, whether it is a constant, and which matmul feeds
a softmax (the attention-score heuristic shared by the simulator's cliff rules and
the placement analysis).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from coremltools.converters.mil.mil import types

#: Ops that only carry values between a score matmul and its softmax.
_PASS_THROUGH = frozenset({"add", "sub", "mul", "real_div", "cast", "identity", "reshape"})


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


def score_producer(var: Any, depth: int = 6) -> Any:
    """The matmul or einsum whose scores reach ``var`` through elementwise ops, if any."""
    op = var.op
    for _ in range(depth):
        if op is None:
            return None
        if op.op_type in ("matmul", "einsum"):
            return op
        if op.op_type not in _PASS_THROUGH:
            return None
        upstream = [
            value
            for value in op.inputs.values()
            if hasattr(value, "op") and value.op is not None and value.rank >= 2
        ]
        if not upstream:
            return None
        op = max(upstream, key=lambda value: value.rank).op
    return None


def per_head_elements(producer: Any) -> int:
    """Score elements per head: a matmul's last two axes (..., queries, keys); for an
    einsum (the ANE layout splits heads into separate einsums), all but the batch axis."""
    shape = [int(dim) for dim in producer.outputs[0].shape]
    if producer.op_type == "einsum":
        return int(np.prod(shape[1:], dtype=np.int64))
    return shape[-1] * shape[-2] if len(shape) >= 2 else int(np.prod(shape, dtype=np.int64))
