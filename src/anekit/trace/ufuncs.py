"""Ufuncs on tracers (NEP 13): NumPy's loop dtypes, then one MIL op or a short expansion.

:data:`BINARY_OPS` and :data:`UNARY_OPS` map ufuncs to single MIL ops; the few
that need more (negation, reciprocal, log2, isnan, ...) are rules in
``SPECIAL_UNARY``. The loop comes from ``ufunc.resolve_dtypes`` (NEP 50 weak Python
scalars included), canonicalized to the dtypes MIL has.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from anekit import dtypes
from anekit.errors import UnsupportedDtypeError
from anekit.trace import primitives as P
from anekit.trace import reductions
from anekit.trace.lowering import as_tracer, unsupported
from anekit.trace.source import user_location
from anekit.trace.tracer import Tracer

#: ufuncs that are one MIL elementwise binary op.
BINARY_OPS: dict[np.ufunc, str] = {
    np.add: "add",
    np.subtract: "sub",
    np.multiply: "mul",
    np.true_divide: "real_div",
    np.floor_divide: "floor_div",
    np.remainder: "mod",
    np.power: "pow",
    np.maximum: "maximum",
    np.minimum: "minimum",
    np.greater: "greater",
    np.greater_equal: "greater_equal",
    np.less: "less",
    np.less_equal: "less_equal",
    np.equal: "equal",
    np.not_equal: "not_equal",
    np.logical_and: "logical_and",
    np.logical_or: "logical_or",
    np.logical_xor: "logical_xor",
}

#: On bool operands NumPy's arithmetic is logic.
BOOL_OPS: dict[np.ufunc, str] = {
    np.add: "logical_or",
    np.multiply: "logical_and",
    np.maximum: "logical_or",
    np.minimum: "logical_and",
    np.bitwise_and: "logical_and",
    np.bitwise_or: "logical_or",
    np.bitwise_xor: "logical_xor",
    np.not_equal: "logical_xor",
}

#: ufuncs that are one MIL elementwise unary op.
UNARY_OPS: dict[np.ufunc, str] = {
    np.absolute: "abs",
    np.exp: "exp",
    np.exp2: "exp2",
    np.sqrt: "sqrt",
    np.tanh: "tanh",
    np.sin: "sin",
    np.cos: "cos",
    np.tan: "tan",
    np.arcsin: "asin",
    np.arccos: "acos",
    np.arctan: "atan",
    np.sinh: "sinh",
    np.cosh: "cosh",
    np.arctanh: "atanh",
    np.floor: "floor",
    np.ceil: "ceil",
    np.rint: "round",
    np.sign: "sign",
    np.logical_not: "logical_not",
}


def _loop_dtypes(ufunc: np.ufunc, inputs: Sequence[Any], dtype: Any) -> tuple[np.dtype[Any], ...]:
    """NumPy's loop for ``ufunc`` on these operands, canonicalized."""
    for value in inputs:
        P.check_operand(value, f"np.{ufunc.__name__}")
    given = tuple(P.operand_dtype(value) for value in inputs)
    try:
        if dtype is not None:
            loop = ufunc.resolve_dtypes(
                given + (None,) * ufunc.nout, signature=(None,) * len(given) + (np.dtype(dtype),)
            )
        else:
            loop = ufunc.resolve_dtypes(given + (None,) * ufunc.nout)
    except (TypeError, ValueError) as error:
        names = ", ".join(d.__name__ if isinstance(d, type) else str(np.dtype(d)) for d in given)
        raise UnsupportedDtypeError(
            f"np.{ufunc.__name__} does not support operands of dtypes {names}: {error}",
            location=user_location(),
        ) from error
    return tuple(P.canonical(item, f"np.{ufunc.__name__}") for item in loop)


def call_ufunc(ufunc: np.ufunc, inputs: tuple[Any, ...], dtype: Any) -> Tracer:
    loop = _loop_dtypes(ufunc, inputs, dtype)
    in_dtype, out_dtype = loop[0], loop[-1]
    if ufunc.nin == 2:
        a, b = inputs
        if ufunc is np.matmul:
            ctx = P.context_of(inputs)
            return P.matmul(as_tracer(ctx, a, in_dtype), as_tracer(ctx, b, in_dtype))
        if in_dtype == dtypes.BOOL and ufunc in BOOL_OPS:
            return P.binary(BOOL_OPS[ufunc], a, b, in_dtype, out_dtype)
        if ufunc is np.power and isinstance(b, int | float) and not isinstance(b, bool) and b == 2:
            return P.binary("mul", a, a, in_dtype, out_dtype)
        if ufunc in BINARY_OPS:
            return P.binary(BINARY_OPS[ufunc], a, b, in_dtype, out_dtype)
        raise unsupported(f"np.{ufunc.__name__}")
    (x,) = inputs
    ctx = P.context_of(inputs)
    t = as_tracer(ctx, x, in_dtype)
    if ufunc in UNARY_OPS:
        if in_dtype == dtypes.BOOL and ufunc is not np.logical_not:
            raise UnsupportedDtypeError(f"np.{ufunc.__name__} on bool", location=user_location())
        return P.expect(P.unary(UNARY_OPS[ufunc], t), out_dtype)
    return SPECIAL_UNARY.get(ufunc, _no_rule(ufunc))(t, out_dtype)


def _no_rule(ufunc: np.ufunc) -> Callable[[Tracer, np.dtype[Any]], Tracer]:
    def fail(t: Tracer, out_dtype: np.dtype[Any]) -> Tracer:
        raise unsupported(f"np.{ufunc.__name__}")

    return fail


def _log_base(scale: float) -> Callable[[Tracer, np.dtype[Any]], Tracer]:
    def rule(t: Tracer, out_dtype: np.dtype[Any]) -> Tracer:
        natural = P.unary("log", t, epsilon=t.dtype.type(0))
        return P.binary("mul", natural, scale, out_dtype, out_dtype)

    return rule


def _negative(t: Tracer, out_dtype: np.dtype[Any]) -> Tracer:
    # MIL has no negation op; x * -1 flips the sign exactly (also of zeros).
    return P.binary("mul", t, -1, out_dtype, out_dtype)


def _reciprocal(t: Tracer, out_dtype: np.dtype[Any]) -> Tracer:
    # Not MIL's `inverse`: it computes 1 / (x + epsilon).
    if not dtypes.is_float(t.dtype):
        raise UnsupportedDtypeError(f"np.reciprocal on {t.dtype} arrays", location=user_location())
    return P.binary("real_div", 1, t, out_dtype, out_dtype)


def _isnan(t: Tracer, out_dtype: np.dtype[Any]) -> Tracer:
    # NaN is the only value unequal to itself.
    return P.binary("not_equal", t, t, t.dtype, out_dtype)


def _isinf(t: Tracer, out_dtype: np.dtype[Any]) -> Tracer:
    return P.binary("equal", P.unary("abs", t), math.inf, t.dtype, out_dtype)


def _isfinite(t: Tracer, out_dtype: np.dtype[Any]) -> Tracer:
    # NaN < inf is false, so NaN is not finite.
    return P.binary("less", P.unary("abs", t), math.inf, t.dtype, out_dtype)


SPECIAL_UNARY: dict[np.ufunc, Callable[[Tracer, np.dtype[Any]], Tracer]] = {
    np.negative: _negative,
    np.positive: lambda t, out_dtype: P.copy(t),
    np.square: lambda t, out_dtype: P.binary("mul", t, t, out_dtype, out_dtype),
    np.reciprocal: _reciprocal,
    np.log: lambda t, out_dtype: P.unary("log", t, epsilon=t.dtype.type(0)),
    np.log2: _log_base(1.0 / math.log(2.0)),
    np.log10: _log_base(1.0 / math.log(10.0)),
    np.invert: lambda t, out_dtype: (
        P.unary("logical_not", t) if t.dtype == dtypes.BOOL else _no_rule(np.invert)(t, out_dtype)
    ),
    np.isnan: _isnan,
    np.isinf: _isinf,
    np.isfinite: _isfinite,
}

#: ufuncs whose ``.reduce`` is a reduction function.
_REDUCE_UFUNCS: dict[np.ufunc, Callable[..., Any]] = {
    np.add: reductions.sum_,
    np.multiply: reductions.prod,
    np.maximum: reductions.max_,
    np.minimum: reductions.min_,
    np.logical_or: reductions.any_,
    np.logical_and: reductions.all_,
}


def reduce_ufunc(
    ufunc: np.ufunc,
    x: Any,
    *,
    dtype: Any = None,
    axis: Any = 0,
    keepdims: bool = False,
    **rest: Any,
) -> Any:
    if rest:
        raise unsupported(f"np.{ufunc.__name__}.reduce with {', '.join(rest)}=")
    rule = _REDUCE_UFUNCS.get(ufunc)
    if rule is None:
        raise unsupported(f"np.{ufunc.__name__}.reduce")
    kwargs: dict[str, Any] = {"axis": axis, "keepdims": keepdims}
    if dtype is not None:
        kwargs["dtype"] = dtype
    return rule(x, **kwargs)
