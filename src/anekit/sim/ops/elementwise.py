"""Elementwise MIL ops: binary arithmetic and logic, unary math, casts, clips.

Each computes in float32 on float inputs; the interpreter rounds the result to
fp16 in ``ane`` mode (one rounding per op: the ANE computes transcendentals at
higher precision and stores fp16).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from anekit.sim import kernels
from anekit.sim.ops._util import errstate, parallel
from anekit.sim.registry import OpContext, register

_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "real_div": np.true_divide,
    "floor_div": np.floor_divide,
    "mod": np.mod,
    "pow": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "equal": np.equal,
    "not_equal": np.not_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
}

_UNARY: dict[str, Callable[[Any], Any]] = {
    "abs": np.abs,
    "exp": np.exp,
    "exp2": np.exp2,
    "sqrt": np.sqrt,
    "square": np.square,
    "tanh": np.tanh,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "atanh": np.arctanh,
    "floor": np.floor,
    "ceil": np.ceil,
    "round": np.round,  # half to even, as MIL documents ("0.5 is rounded to 0")
    "sign": np.sign,
    "logical_not": np.logical_not,
    "erf": kernels.erf,
}


def _binary(function: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    def impl(ctx: OpContext, x: Any, y: Any) -> Any:
        with errstate():
            return function(x, y)

    return impl


def _unary(function: Callable[[Any], Any]) -> Callable[..., Any]:
    def impl(ctx: OpContext, x: Any) -> Any:
        if isinstance(x, np.ndarray) and x.dtype == np.float32:
            return parallel(function, x)
        with errstate():
            return function(x)

    return impl


for _binary_name, _binary_function in _BINARY.items():
    register(_binary_name)(_binary(_binary_function))
for _unary_name, _unary_function in _UNARY.items():
    register(_unary_name)(_unary(_unary_function))


@register("log")
def log(ctx: OpContext, x: Any, epsilon: Any) -> Any:
    with errstate():
        return np.log(x + epsilon)


@register("rsqrt")
def rsqrt(ctx: OpContext, x: Any, epsilon: Any) -> Any:
    with errstate():
        return 1.0 / np.sqrt(x + epsilon)


@register("inverse")
def inverse(ctx: OpContext, x: Any, epsilon: Any) -> Any:
    with errstate():
        return 1.0 / (x + epsilon)


@register("threshold")
def threshold(ctx: OpContext, x: Any, alpha: Any) -> Any:
    return np.maximum(x, alpha)


@register("clip")
def clip(ctx: OpContext, x: Any, alpha: Any, beta: Any) -> Any:
    return np.minimum(np.maximum(x, alpha), beta)


_CAST_TYPES = {
    "fp16": np.float32,  # float values stay in compute form; storage rounds them
    "fp32": np.float32,
    "int32": np.int32,
    "int16": np.int16,
    "uint16": np.uint16,
    "int8": np.int8,
    "uint8": np.uint8,
    "bool": np.bool_,
}


@register("cast")
def cast(ctx: OpContext, x: Any, dtype: Any) -> Any:
    target = _CAST_TYPES[str(dtype)]
    array = np.asarray(x)
    if target is np.bool_:
        return array != 0
    with errstate():
        return array.astype(target)


@register("identity")
def identity(ctx: OpContext, x: Any) -> Any:
    return x


@register("select")
def select(ctx: OpContext, cond: Any, a: Any, b: Any) -> Any:
    return np.where(cond, a, b)
