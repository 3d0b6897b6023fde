"""Elementwise MIL ops: binary arithmetic and logic, unary math, casts, clips.

Each computes in float32 on float inputs; the interpreter rounds the result to
fp16 in ``ane`` mode (one rounding per op: the ANE computes transcendentals at
higher precision and stores fp16).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from anekit._milgraph import numpy_dtype
from anekit.ops import kernels
from anekit.ops.defs._util import errstate, parallel
from anekit.ops.limits import SMALL_LOG_INPUT
from anekit.ops.lowering import Lowering, NotLowerable, onnx_type
from anekit.ops.registry import Lower, OpContext, cliff, lowers, register

#: Binary ops: the NumPy function, and the ONNX op of the same semantics (None: below).
_BINARY: dict[str, tuple[Callable[[Any, Any], Any], str | None]] = {
    "add": (np.add, "Add"), "sub": (np.subtract, "Sub"), "mul": (np.multiply, "Mul"),
    "real_div": (np.true_divide, "Div"), "floor_div": (np.floor_divide, None),
    "mod": (np.mod, None), "pow": (np.power, "Pow"), "maximum": (np.maximum, "Max"),
    "minimum": (np.minimum, "Min"), "equal": (np.equal, "Equal"),
    "not_equal": (np.not_equal, None), "greater": (np.greater, "Greater"),
    "greater_equal": (np.greater_equal, "GreaterOrEqual"), "less": (np.less, "Less"),
    "less_equal": (np.less_equal, "LessOrEqual"), "logical_and": (np.logical_and, "And"),
    "logical_or": (np.logical_or, "Or"), "logical_xor": (np.logical_xor, "Xor"),
}  # fmt: skip

#: Unary ops: the NumPy function, and the ONNX op of the same semantics (None: below).
_UNARY: dict[str, tuple[Callable[[Any], Any], str | None]] = {
    "abs": (np.abs, "Abs"), "exp": (np.exp, "Exp"), "exp2": (np.exp2, None),
    "sqrt": (np.sqrt, "Sqrt"), "square": (np.square, None), "tanh": (np.tanh, "Tanh"),
    "sin": (np.sin, "Sin"), "cos": (np.cos, "Cos"), "tan": (np.tan, "Tan"),
    "asin": (np.arcsin, "Asin"), "acos": (np.arccos, "Acos"), "atan": (np.arctan, "Atan"),
    "sinh": (np.sinh, "Sinh"), "cosh": (np.cosh, "Cosh"), "atanh": (np.arctanh, "Atanh"),
    "floor": (np.floor, "Floor"), "ceil": (np.ceil, "Ceil"),
    # half to even, as MIL documents ("0.5 is rounded to 0"), as ONNX Round does
    "round": (np.round, "Round"), "sign": (np.sign, "Sign"),
    "logical_not": (np.logical_not, "Not"), "erf": (kernels.erf, "Erf"),
}  # fmt: skip


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


def _binary_lowering(onnx_op: str) -> Lower:
    def lower(low: Lowering, op: Any) -> list[str]:
        x, y = low.value(op.x), low.value(op.y)
        dtype = numpy_dtype(op.x)
        if onnx_op in ("Div", "Pow") and (dtype is None or dtype.kind != "f"):
            raise NotLowerable(f"{op.op_type} on {dtype}")
        return [low.node(onnx_op, x, y)]

    return lower


def _unary_lowering(onnx_op: str) -> Lower:
    def lower(low: Lowering, op: Any) -> list[str]:
        if onnx_op not in ("Not", "Identity", "Abs", "Sign"):
            low.float_value(op.x)
        return [low.node(onnx_op, low.value(op.x))]

    return lower


for _name, (_function, _onnx) in _BINARY.items():
    register(_name)(_binary(_function))
    if _onnx is not None:
        lowers(_name)(_binary_lowering(_onnx))
for _name, (_ufunc, _onnx) in _UNARY.items():
    register(_name)(_unary(_ufunc))
    if _onnx is not None:
        lowers(_name)(_unary_lowering(_onnx))
lowers("identity")(_unary_lowering("Identity"))


@register("log", "rsqrt", "inverse")
def with_epsilon(ctx: OpContext, x: Any, epsilon: Any) -> Any:
    """``log``, ``rsqrt`` (1 / sqrt) or ``inverse`` (1 / x) of ``x + epsilon``."""
    with errstate():
        shifted = x + epsilon
        if ctx.op.op_type == "log":
            return np.log(shifted)
        return 1.0 / (np.sqrt(shifted) if ctx.op.op_type == "rsqrt" else shifted)


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


# -- ONNX lowerings --------------------------------------------------------------


@lowers("not_equal")
def _not_equal(low: Lowering, op: Any) -> list[str]:
    return [low.node("Not", low.node("Equal", low.value(op.x), low.value(op.y)))]


@lowers("floor_div", "mod")
def _floor_div_mod(low: Lowering, op: Any) -> list[str]:
    x, y = low.float_value(op.x), low.float_value(op.y)
    floor = low.node("Floor", low.node("Div", x, y))
    if op.op_type == "floor_div":
        return [floor]
    return [low.node("Sub", x, low.node("Mul", floor, y))]


@lowers("square")
def _square(low: Lowering, op: Any) -> list[str]:
    x = low.float_value(op.x)
    return [low.node("Mul", x, x)]


@lowers("exp2")
def _exp2(low: Lowering, op: Any) -> list[str]:
    return [low.node("Pow", low.scalar(2.0), low.float_value(op.x))]


@lowers("log", "rsqrt", "inverse")
def _with_epsilon(low: Lowering, op: Any) -> list[str]:
    shifted = low.node("Add", low.float_value(op.x), low.scalar(low.param(op, "epsilon")))
    if op.op_type == "log":
        return [low.node("Log", shifted)]
    if op.op_type == "inverse":
        return [low.node("Reciprocal", shifted)]
    return [low.node("Reciprocal", low.node("Sqrt", shifted))]


@lowers("threshold", "clip")
def _threshold_clip(low: Lowering, op: Any) -> list[str]:
    low_bound = low.node("Max", low.float_value(op.x), low.scalar(low.const(op.alpha)))
    if op.op_type == "threshold":
        return [low_bound]
    return [low.node("Min", low_bound, low.scalar(low.const(op.beta)))]


@lowers("cast")
def _cast(low: Lowering, op: Any) -> list[str]:
    target = str(low.const(op.dtype))
    source = numpy_dtype(op.x)
    if target == "bool":
        zero = low.constant(np.zeros((), source), source) if source is not None else None
        if zero is None:
            raise NotLowerable("cast from a non-tensor")
        return [low.node("Not", low.node("Equal", low.value(op.x), zero))]
    if target not in _CAST_TYPES:
        raise NotLowerable(f"cast to {target}")
    return [low.node("Cast", low.value(op.x), to=onnx_type(np.dtype(_CAST_TYPES[target])))]


@lowers("select")
def _select(low: Lowering, op: Any) -> list[str]:
    return [low.node("Where", low.value(op.cond), low.value(op.a), low.value(op.b))]


# -- numeric cliffs ------------------------------------------------------------------


def _min_input_probe(low: Lowering, op: Any) -> dict[str, str]:
    """The smallest input plus epsilon, computed in the graph."""
    shifted = low.node("Add", low.value(op.x), low.scalar(low.param(op, "epsilon")))
    return {"min_input": low.node("ReduceMin", shifted, keepdims=0)}


def _min_input(op: Any, values: Mapping[str, float]) -> dict[str, Any]:
    return {"x": np.array([values["min_input"]], np.float32), "epsilon": 0.0}


@cliff("rsqrt", "log", rule="ane.small_log_input", probe=_min_input_probe, stand_in=_min_input)
def _small_log_input(op: Any, inputs: Mapping[str, Any], max_abs: float) -> list[str]:
    if "x" not in inputs:
        return []
    shifted = np.asarray(inputs["x"], np.float32) + np.float32(inputs.get("epsilon") or 0.0)
    smallest = float(np.nanmin(shifted)) if shifted.size else 0.0
    if smallest >= SMALL_LOG_INPUT:
        return []
    return [
        f"input (plus epsilon) goes down to {smallest:.3g}, below {SMALL_LOG_INPUT:g} "
        "where the ANE returns ±inf"
    ]


# -- Core AI lowerings (anekit.package.coreai) -----------------------------------------

#: MIL binary op -> Core AI builder function of the same semantics (NumPy broadcasting).
_COREAI_BINARY = {
    "add": "broadcasting_add", "sub": "broadcasting_sub", "mul": "broadcasting_mul",
    "real_div": "broadcasting_divide", "maximum": "broadcasting_maximum",
    "minimum": "broadcasting_minimum", "pow": "broadcasting_pow",
}  # fmt: skip
#: MIL unary op -> Core AI builder function of the same semantics.
_COREAI_UNARY = {
    "abs": "abs_", "exp": "exp", "sqrt": "sqrt", "tanh": "tanh", "sin": "sin", "cos": "cos",
    "sinh": "sinh", "cosh": "cosh", "erf": "erf", "identity": None,
}  # fmt: skip


def _coreai_binary(name: str) -> Lower:
    def lower(ai: Any, op: Any) -> Any:
        return getattr(ai.ai, name)(ai.value(op.x), ai.value(op.y))

    return lower


def _coreai_unary(name: str | None) -> Lower:
    def lower(ai: Any, op: Any) -> Any:
        x = ai.value(op.x)
        return x if name is None else getattr(ai.ai, name)(x)

    return lower


for _name, _coreai in _COREAI_BINARY.items():
    lowers(_name, target="coreai")(_coreai_binary(_coreai))
for _name, _coreai_name in _COREAI_UNARY.items():
    lowers(_name, target="coreai")(_coreai_unary(_coreai_name))


@lowers("log", "rsqrt", "inverse", target="coreai")
def _with_epsilon_coreai(ai: Any, op: Any) -> Any:
    shifted = ai.ai.broadcasting_add(ai.value(op.x), ai.scalar(ai.param(op, "epsilon"), op.x))
    if op.op_type == "log":
        return ai.ai.log(shifted)
    if op.op_type == "rsqrt":
        return ai.ai.rsqrt(shifted)
    return ai.ai.broadcasting_divide(ai.scalar(1.0, op.x), shifted)


@lowers("cast", target="coreai")
def _cast_coreai(ai: Any, op: Any) -> Any:
    target = numpy_dtype(op.outputs[0])  # the output's dtype as MIL infers it
    if target is None:
        raise NotLowerable(f"cast to {ai.param(op, 'dtype')}")
    return ai.ai.cast(ai.value(op.x), target.type)
