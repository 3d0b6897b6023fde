"""Small typed emitters shared by the NumPy lowering rules, indexing and anekit.nn.

Each takes and returns :class:`~anekit.trace.tracer.Tracer` values and emits MIL
ops through the trace's one funnel (:meth:`TraceContext.emit`). Dtype and shape
decisions are made by the callers (NumPy's rules live in ``numpy_api``); these
functions only check that MIL agrees with them.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

import numpy as np
from coremltools.converters.mil.mil.var import Var

from anekit import dtypes
from anekit.errors import ShapeError, TraceError, UnsupportedDtypeError
from anekit.trace.context import TraceContext, convert_constant, current
from anekit.trace.source import user_location
from anekit.trace.tracer import Tracer

Operand = Any  # a Tracer, an ndarray, a NumPy scalar or a Python number


def any_tracer(values: Iterable[Any]) -> bool:
    return any(isinstance(value, Tracer) for value in values)


def context_of(values: Iterable[Any]) -> TraceContext:
    """The active trace, after checking every tracer in ``values`` belongs to it."""
    ctx = current()
    for value in values:
        if isinstance(value, Tracer) and value._ctx is not ctx:
            raise TraceError(
                "a traced value from another trace was used here",
                location=user_location(),
                hint="traced arrays live only inside the anekit.compile() call that made them",
            )
    return ctx


def deps_of(values: Iterable[Any]) -> frozenset[str]:
    """The program inputs the given values depend on."""
    deps = (value._deps for value in values if isinstance(value, Tracer))
    return frozenset[str]().union(*deps)


def operand_dtype(value: Operand) -> Any:
    """What to pass NumPy's type resolution for ``value``: a dtype, or a Python
    scalar type (``int``, ``float``) which NEP 50 treats as weakly typed."""
    if isinstance(value, Tracer):
        return value.dtype
    if isinstance(value, bool):
        return np.dtype(np.bool_)
    if isinstance(value, int | float) and not isinstance(value, np.generic):
        return type(value)
    if isinstance(value, complex):
        raise UnsupportedDtypeError("complex numbers are not supported", location=user_location())
    return np.asarray(value).dtype


def canonical(dtype: Any, what: str) -> np.dtype[Any]:
    """``dtype`` as the tracer computes it; refuses dtypes Core ML cannot carry."""
    result = dtypes.canonicalize(np.dtype(dtype))
    if result is None:
        raise UnsupportedDtypeError(
            f"{what} needs dtype {np.dtype(dtype)}, which Core ML programs cannot carry; "
            f"supported: {dtypes.describe_supported()}",
            location=user_location(),
        )
    return result


def check_operand(value: Any, what: str) -> None:
    """Refuse operands that are neither arrays nor numbers, naming them."""
    if isinstance(value, Tracer | np.ndarray | np.generic | numbers.Number):
        return
    if isinstance(value, list | tuple):
        if any_tracer(value):
            raise TraceError(
                f"{what}: a list or tuple containing traced arrays cannot be converted to an array",
                location=user_location(),
                hint="combine traced arrays with np.stack or np.concatenate",
            )
        return
    raise TraceError(
        f"{what}: operand of type {type(value).__name__} is not an array or a number",
        location=user_location(),
    )


def lift(ctx: TraceContext, value: Operand, dtype: np.dtype[Any]) -> Var | np.generic:
    """``value`` as a MIL operand of ``dtype``: a Var, or an inline scalar."""
    if isinstance(value, Tracer):
        return cast(value, dtype)._var if value.dtype != dtype else value._var
    array = np.asarray(value)
    if array.ndim == 0 and not isinstance(value, np.ndarray):
        return convert_constant(array, dtype)[()]
    return ctx.constant(value if isinstance(value, np.ndarray) else array, dtype)


def wrap(ctx: TraceContext, var: Var, deps: frozenset[str]) -> Tracer:
    return Tracer(var, ctx, deps)


def constant(ctx: TraceContext, value: np.ndarray, dtype: np.dtype[Any]) -> Tracer:
    """``value`` as a traced ``const`` of ``dtype``, which depends on no input."""
    return wrap(ctx, ctx.constant(value, dtype), frozenset())


def shape_of(value: Operand) -> tuple[int, ...]:
    """The shape of a tracer or of anything NumPy takes as an array."""
    return value.shape if isinstance(value, Tracer) else np.shape(value)


def emit(op_type: str, sources: Sequence[Any], **inputs: Any) -> Tracer:
    """Emit ``op_type`` with MIL ``inputs``; the result depends on ``sources``."""
    ctx = context_of(sources)
    var = ctx.emit(op_type, **inputs)
    return wrap(ctx, var, deps_of(sources))


def expect(
    result: Tracer, dtype: np.dtype[Any] | None = None, shape: Sequence[int] | None = None
) -> Tracer:
    """Check that MIL inferred what NumPy's rules say; a mismatch is a tracer bug."""
    if dtype is not None and result.dtype != dtype:
        _internal_error(result, str(result.dtype), str(dtype))
    if shape is not None and result.shape != tuple(shape):
        _internal_error(result, f"shape {result.shape}", str(tuple(shape)))
    return result


def _internal_error(result: Tracer, produced: str, needed: str) -> NoReturn:
    raise TraceError(
        f"internal error: MIL op `{result._var.op.op_type}` produced {produced}, "
        f"NumPy semantics need {needed}; please report this",
        location=user_location(),
    )


def view_of(result: Tracer, source: Tracer) -> Tracer:
    """Mark ``result`` and ``source`` as sharing memory (NumPy returns a view)."""
    result._shared = True
    source._shared = True
    return result


def copy(x: Tracer) -> Tracer:
    """A new array object with the same value (NumPy's copy; no op is needed)."""
    return wrap(x._ctx, x._var, x._deps)


def cast(x: Tracer, dtype: np.dtype[Any]) -> Tracer:
    if x.dtype == dtype:
        return copy(x)
    if dtype == dtypes.BOOL:
        # cast to bool is "x != 0", which MIL also expresses directly.
        return expect(emit("not_equal", [x], x=x._var, y=x.dtype.type(0)), dtype)
    return expect(emit("cast", [x], x=x._var, dtype=dtypes.cast_name(dtype)), dtype, x.shape)


def is_int(value: Any) -> bool:
    """True for Python and NumPy integers (not bools)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_)


def normalize_axis(axis: Any, ndim: int, what: str) -> int:
    if not is_int(axis):
        raise TraceError(
            f"{what}: axis must be a Python int, got {type(axis).__name__}",
            location=user_location(),
            hint="axes are static; take them from x.ndim or write them literally",
        )
    index = int(axis)
    if not -ndim <= index < ndim:
        raise ShapeError(
            f"{what}: axis {index} is out of bounds for array of dimension {ndim}",
            location=user_location(),
        )
    return index % ndim


def normalize_axes(axis: Any, ndim: int, what: str) -> tuple[int, ...]:
    """``None`` → all axes; an int or a tuple of ints → sorted, checked, no repeats."""
    if axis is None:
        return tuple(range(ndim))
    items = tuple(axis) if isinstance(axis, list | tuple) else (axis,)
    axes = tuple(normalize_axis(item, ndim, what) for item in items)
    if len(set(axes)) != len(axes):
        raise ShapeError(f"{what}: repeated axis in {axis}", location=user_location())
    return tuple(sorted(axes))


def broadcast_shapes(*shapes: Sequence[int], what: str) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*(tuple(shape) for shape in shapes)))
    except ValueError as error:
        raise ShapeError(
            f"{what}: operands could not be broadcast together with shapes "
            + " ".join(str(tuple(shape)) for shape in shapes),
            location=user_location(),
        ) from error


# -- layout -------------------------------------------------------------------------


def reshape(x: Tracer, shape: Sequence[int]) -> Tracer:
    shape = tuple(int(dim) for dim in shape)
    if shape == x.shape:
        return copy(x)
    return expect(emit("reshape", [x], x=x._var, shape=np.array(shape, np.int32)), shape=shape)


def transpose(x: Tracer, perm: Sequence[int]) -> Tracer:
    perm = tuple(perm)
    if perm == tuple(range(x.ndim)):
        return copy(x)
    return emit("transpose", [x], x=x._var, perm=list(perm))


def expand_dims(x: Tracer, axes: Sequence[int]) -> Tracer:
    if not axes:
        return copy(x)
    return emit("expand_dims", [x], x=x._var, axes=list(axes))


def broadcast_to(x: Tracer, shape: Sequence[int]) -> Tracer:
    """``x`` broadcast to ``shape`` (validated by the caller) with reshape and tile."""
    shape = tuple(shape)
    if x.shape == shape:
        return copy(x)
    x = reshape(x, (1,) * (len(shape) - x.ndim) + x.shape)
    reps = [
        target if size == 1 and target != 1 else 1
        for size, target in zip(x.shape, shape, strict=True)
    ]
    if any(rep != 1 for rep in reps):
        x = emit("tile", [x], x=x._var, reps=np.array(reps, np.int32))
    return expect(x, shape=shape)


# -- arithmetic ---------------------------------------------------------------------


def binary(
    op_type: str, a: Operand, b: Operand, dtype: np.dtype[Any], out_dtype: np.dtype[Any]
) -> Tracer:
    """Elementwise ``op_type`` of ``a`` and ``b`` computed in ``dtype``."""
    ctx = context_of((a, b))
    broadcast_shapes(shape_of(a), shape_of(b), what=op_type)
    x = lift(ctx, a, dtype)
    y = lift(ctx, b, dtype)
    var = ctx.emit(op_type, x=x, y=y)
    return expect(wrap(ctx, var, deps_of((a, b))), out_dtype)


def unary(op_type: str, x: Tracer, **attrs: Any) -> Tracer:
    return expect(emit(op_type, [x], x=x._var, **attrs), x.dtype)


def reduce(op_type: str, x: Tracer, axes: Sequence[int], keepdims: bool) -> Tracer:
    """MIL ``reduce_*`` over ``axes`` (normalized; empty means no reduction)."""
    if not axes:
        return copy(x)
    return emit(op_type, [x], x=x._var, axes=list(axes), keep_dims=bool(keepdims))


def matmul(a: Tracer, b: Tracer) -> Tracer:
    """NumPy ``matmul`` of two traced arrays of one dtype (1-D operands included)."""
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(
            "matmul: input operand does not have enough dimensions (use * for scalars)",
            location=user_location(),
        )
    a2 = reshape(a, (1, *a.shape)) if a.ndim == 1 else a
    b2 = reshape(b, (*b.shape, 1)) if b.ndim == 1 else b
    if a2.shape[-1] != b2.shape[-2]:
        raise ShapeError(
            f"matmul: mismatch in its core dimension: shapes {a.shape} and {b.shape} "
            f"({a2.shape[-1]} is different from {b2.shape[-2]})",
            location=user_location(),
        )
    batch = broadcast_shapes(a2.shape[:-2], b2.shape[:-2], what="matmul")
    out = emit("matmul", [a, b], x=a2._var, y=b2._var)
    shape = (*batch, a2.shape[-2], b2.shape[-1])
    expect(out, shape=shape)
    if a.ndim == 1 and b.ndim == 1:
        return reshape(out, ())
    if a.ndim == 1:
        return reshape(out, (*shape[:-2], shape[-1]))
    if b.ndim == 1:
        return reshape(out, shape[:-1])
    return out
