"""Evaluate a MIL program with coremltools' own per-op NumPy ``value_inference``.

A test-only reference: it checks that traced programs compute what the NumPy
function computes, independently of anekit's code (the simulator will be checked
against it too). Every op runs in the dtypes the program declares.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from coremltools.converters.mil.mil import types
from coremltools.converters.mil.mil.var import Var


def _builtin_value(var: Var, value: np.ndarray) -> Any:
    holder = var.sym_type()
    if types.is_tensor(var.sym_type):
        holder.val = np.asarray(value, dtype=types.nptype_from_builtin(var.dtype))
    else:
        holder.val = types.nptype_from_builtin(var.sym_type)(np.asarray(value).item())
    return holder


def _conv(op: Any, value: Any) -> Any:
    x, weight = value(op.x), value(op.weight)
    if weight.shape[2:] != (1, 1) or op.groups.val != 1:
        raise NotImplementedError("test evaluator: only 1x1 convolutions without groups")
    result = np.einsum("oc,bchw->bohw", weight[:, :, 0, 0], x)
    if op.bias is not None:
        result = result + value(op.bias).reshape(1, -1, 1, 1)
    return result.astype(x.dtype)


def _silu(op: Any, value: Any) -> Any:
    x = value(op.x)
    return (x / (1 + np.exp(-x))).astype(x.dtype)


#: Reference implementations of ops that coremltools gives no value_inference.
FALLBACKS = {"conv": _conv, "silu": _silu}


def evaluate(
    program: Any, feeds: Mapping[str, np.ndarray], function: str = "main"
) -> list[np.ndarray]:
    """Run ``program`` on ``feeds`` op by op; returns the outputs in order."""
    func = program.functions[function]
    env: dict[int, np.ndarray] = {}
    for name, var in func.inputs.items():
        env[id(var)] = np.asarray(feeds[name])
    for op in func.operations:
        if op.op_type == "const":
            env[id(op.outputs[0])] = np.asarray(op.outputs[0].val)
            continue
        saved: dict[int, tuple[Var, Any]] = {}
        for var in op.get_flattened_inputs():
            is_const = var.op is not None and var.op.op_type == "const"
            if not is_const and id(var) in env and id(var) not in saved:
                saved[id(var)] = (var, var._sym_val)
                var._sym_val = _builtin_value(var, env[id(var)])
        result: Any
        try:
            if op.op_type in FALLBACKS:
                result = FALLBACKS[op.op_type](op, lambda var: env[id(var)])
            else:
                result = op.value_inference()
        finally:
            for var, sym_val in saved.values():
                var._sym_val = sym_val
        results = result if isinstance(result, tuple | list) else (result,)
        for var, value in zip(op.outputs, results, strict=True):
            # Some value_inference rules return NumPy's default dtypes (argmax gives
            # int64); a backend returns the declared MIL type.
            env[id(var)] = np.asarray(value).astype(
                types.nptype_from_builtin(var.dtype), copy=False
            )
    return [env[id(var)] for var in func.outputs]
