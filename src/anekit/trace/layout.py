"""Layout functions on tracers: dtype casts, reshape, transpose, concatenate, split, ...

Results that NumPy returns as views are marked shared, which blocks later
in-place updates of their base (see ``lowering.store_out``).
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from anekit.errors import ShapeError, UnsupportedDtypeError
from anekit.trace import primitives as P
from anekit.trace.lowering import (
    as_tracer,
    finish,
    result_dtype,
    static_axis,
    static_int,
    tracer_arg,
    unsupported,
)
from anekit.trace.source import user_location
from anekit.trace.tracer import Tracer


def astype(
    x: Any, dtype: Any, /, *, copy: bool = True, casting: str = "unsafe", device: Any = None
) -> Tracer:
    t = tracer_arg(x, "astype")
    target = P.canonical(np.dtype(dtype), "astype")
    if not np.can_cast(t.dtype, np.dtype(dtype), casting=casting):  # type: ignore[arg-type]
        raise UnsupportedDtypeError(
            f"astype: cannot cast {t.dtype} to {np.dtype(dtype)} with casting={casting!r}",
            location=user_location(),
        )
    return P.cast(t, target)


def copy(x: Any, order: str = "K", subok: bool = False) -> Tracer:
    return P.copy(tracer_arg(x, "np.copy"))


def reshape(
    x: Any, shape: Any = None, order: str = "C", *, newshape: Any = None, copy: Any = None
) -> Tracer:
    t = tracer_arg(x, "reshape")
    if order != "C":
        raise unsupported(f"reshape(order={order!r})")
    shape = newshape if shape is None else shape
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    dims = [static_int(dim, "reshape: a dimension") for dim in shape]
    unknown = [i for i, dim in enumerate(dims) if dim == -1]
    if len(unknown) > 1 or any(dim < -1 for dim in dims):
        raise ShapeError(f"reshape: invalid shape {tuple(dims)}", location=user_location())
    known = math.prod(dim for dim in dims if dim != -1)
    if unknown and known and t.size % known == 0:
        dims[unknown[0]] = t.size // known
    if -1 in dims or math.prod(dims) != t.size:
        raise ShapeError(
            f"cannot reshape array of size {t.size} into shape {tuple(dims)}",
            location=user_location(),
        )
    return P.view_of(P.reshape(t, dims), t)


def ravel(x: Any, order: str = "C") -> Tracer:
    return reshape(x, (-1,), order=order)


def transpose(x: Any, axes: Any = None) -> Tracer:
    t = tracer_arg(x, "transpose")
    if axes is None:
        perm = tuple(reversed(range(t.ndim)))
    else:
        perm = tuple(P.normalize_axis(axis, t.ndim, "transpose") for axis in axes)
        if sorted(perm) != list(range(t.ndim)):
            raise ShapeError(
                f"transpose: axes {tuple(axes)} don't match array", location=user_location()
            )
    return P.view_of(P.transpose(t, perm), t)


def swapaxes(x: Any, axis1: int, axis2: int) -> Tracer:
    t = tracer_arg(x, "swapaxes")
    a, b = (P.normalize_axis(axis, t.ndim, "swapaxes") for axis in (axis1, axis2))
    perm = list(range(t.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return P.view_of(P.transpose(t, perm), t)


def moveaxis(x: Any, source: Any, destination: Any) -> Tracer:
    t = tracer_arg(x, "moveaxis")
    src = [source] if isinstance(source, numbers.Integral) else list(source)
    dst = [destination] if isinstance(destination, numbers.Integral) else list(destination)
    if len(src) != len(dst):
        raise ShapeError(
            "moveaxis: `source` and `destination` must have the same number of elements",
            location=user_location(),
        )
    sources = [P.normalize_axis(axis, t.ndim, "moveaxis") for axis in src]
    targets = [P.normalize_axis(axis, t.ndim, "moveaxis") for axis in dst]
    order = [axis for axis in range(t.ndim) if axis not in sources]
    for d, s in sorted(zip(targets, sources, strict=True)):
        order.insert(d, s)
    return P.view_of(P.transpose(t, order), t)


def expand_dims(x: Any, axis: Any) -> Tracer:
    t = tracer_arg(x, "expand_dims")
    axis = static_axis(axis, "expand_dims")
    count = len(axis) if isinstance(axis, list | tuple) else 1
    axes = P.normalize_axes(axis, t.ndim + count, "expand_dims")
    return P.view_of(P.expand_dims(t, axes), t)


def squeeze(x: Any, axis: Any = None) -> Tracer:
    t = tracer_arg(x, "squeeze")
    if axis is None:
        axes: tuple[int, ...] = tuple(i for i, dim in enumerate(t.shape) if dim == 1)
    else:
        axes = P.normalize_axes(axis, t.ndim, "squeeze")
        for axis_index in axes:
            if t.shape[axis_index] != 1:
                raise ShapeError(
                    "cannot select an axis to squeeze out which has size not equal to one "
                    f"(axis {axis_index} of shape {t.shape})",
                    location=user_location(),
                )
    return P.view_of(P.reshape(t, [dim for i, dim in enumerate(t.shape) if i not in axes]), t)


def broadcast_to(x: Any, shape: Any, subok: bool = False) -> Tracer:
    t = tracer_arg(x, "broadcast_to")
    shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
    dims = tuple(static_int(dim, "broadcast_to: a dimension") for dim in shape)
    if len(dims) < t.ndim or P.broadcast_shapes(t.shape, dims, what="broadcast_to") != dims:
        raise ShapeError(
            f"broadcast_to: cannot broadcast array of shape {t.shape} to shape {dims}",
            location=user_location(),
        )
    return P.view_of(P.broadcast_to(t, dims), t)


def _joined_parts(arrays: Sequence[Any], dtype: Any, what: str) -> list[Tracer]:
    """The arrays to join, as tracers of their common dtype (NumPy's, or ``dtype``)."""
    items = list(arrays)
    if not items:
        raise ShapeError(f"need at least one array to {what}", location=user_location())
    target = P.canonical(np.dtype(dtype), what) if dtype is not None else result_dtype(items, what)
    ctx = P.context_of(items)
    return [as_tracer(ctx, item, target) for item in items]


def concatenate(
    arrays: Sequence[Any],
    axis: Any = 0,
    out: Any = None,
    *,
    dtype: Any = None,
    casting: str = "same_kind",
) -> Tracer:
    parts = _joined_parts(arrays, dtype, "concatenate")
    if axis is None:
        parts = [P.reshape(part, (part.size,)) for part in parts]
        axis = 0
    if parts[0].ndim == 0:
        raise ShapeError("zero-dimensional arrays cannot be concatenated", location=user_location())
    axis = P.normalize_axis(axis, parts[0].ndim, "concatenate")
    # The shapes must match except along the axis.
    if len({(part.ndim, part.shape[:axis] + part.shape[axis + 1 :]) for part in parts}) > 1:
        raise ShapeError(
            "concatenate: all the input array dimensions except for the concatenation "
            f"axis must match exactly; got shapes {[p.shape for p in parts]}",
            location=user_location(),
        )
    if len(parts) == 1:
        return finish(P.copy(parts[0]), out)
    values = [part._var for part in parts]
    return finish(P.emit("concat", parts, values=values, axis=axis, interleave=False), out)


def stack(
    arrays: Sequence[Any],
    axis: int = 0,
    out: Any = None,
    *,
    dtype: Any = None,
    casting: str = "same_kind",
) -> Tracer:
    parts = _joined_parts(arrays, dtype, "stack")
    if any(part.shape != parts[0].shape for part in parts):
        raise ShapeError(
            f"all input arrays must have the same shape; got {[p.shape for p in parts]}",
            location=user_location(),
        )
    axis = P.normalize_axis(axis, parts[0].ndim + 1, "stack")
    if len(parts) == 1:
        return finish(P.expand_dims(parts[0], [axis]), out)
    result = P.emit("stack", parts, values=[part._var for part in parts], axis=axis)
    return finish(result, out)


def hstack(tup: Sequence[Any], *, dtype: Any = None, casting: str = "same_kind") -> Tracer:
    arrays = [atleast_1d(item) for item in tup]
    return concatenate(arrays, axis=0 if arrays[0].ndim == 1 else 1, dtype=dtype)


def vstack(tup: Sequence[Any], *, dtype: Any = None, casting: str = "same_kind") -> Tracer:
    return concatenate([atleast_2d(item) for item in tup], axis=0, dtype=dtype)


def atleast_1d(x: Any) -> Tracer:
    t = tracer_arg(x, "atleast_1d")
    return P.view_of(P.reshape(t, (1,)), t) if t.ndim == 0 else t


def atleast_2d(x: Any) -> Tracer:
    t = tracer_arg(x, "atleast_2d")
    if t.ndim >= 2:
        return t
    return P.view_of(P.reshape(t, (1, max(t.size, 1)) if t.ndim else (1, 1)), t)


def _split_sizes(length: int, indices_or_sections: Any, even: bool, what: str) -> list[int]:
    if isinstance(indices_or_sections, numbers.Integral):
        sections = int(indices_or_sections)
        if sections <= 0:
            raise ShapeError(
                f"{what}: number sections must be larger than 0", location=user_location()
            )
        if even and length % sections:
            raise ShapeError(
                f"{what}: array split does not result in an equal division",
                location=user_location(),
            )
        base, extra = divmod(length, sections)
        return [base + 1] * extra + [base] * (sections - extra)
    bounds = [0]
    for index in indices_or_sections:
        index = static_int(index, f"{what}: a split index")
        bounds.append(min(max(index if index >= 0 else index + length, 0), length))
    bounds.append(length)
    return [max(end - start, 0) for start, end in itertools.pairwise(bounds)]


def _split(
    ary: Any, indices_or_sections: Any, axis: int = 0, *, even: bool, what: str
) -> list[Tracer]:
    t = tracer_arg(ary, what)
    axis = P.normalize_axis(axis, t.ndim, what)
    sizes = _split_sizes(t.shape[axis], indices_or_sections, even, what)
    if any(size == 0 for size in sizes):
        raise ShapeError(
            f"{what}: a part would be empty (sizes {sizes} along axis {axis}); "
            "zero-size arrays cannot be traced",
            location=user_location(),
        )
    if len(sizes) == 1:
        return [P.view_of(P.copy(t), t)]
    ctx = P.context_of([t])
    outputs = ctx.emit("split", x=t._var, split_sizes=np.array(sizes, np.int32), axis=axis)
    return [P.view_of(P.wrap(ctx, var, t._deps), t) for var in outputs]


split: partial[list[Tracer]] = partial(_split, even=True, what="split")
array_split: partial[list[Tracer]] = partial(_split, even=False, what="array_split")


def flip(m: Any, axis: Any = None) -> Tracer:
    t = tracer_arg(m, "flip")
    axes = P.normalize_axes(static_axis(axis, "flip"), t.ndim, "flip")
    if not axes:
        return P.view_of(P.copy(t), t)
    return P.view_of(P.emit("reverse", [t], x=t._var, axes=list(axes)), t)


def tile(a: Any, reps: Any) -> Tracer:
    t = tracer_arg(a, "tile")
    reps = (reps,) if isinstance(reps, numbers.Integral) else tuple(reps)
    reps = tuple(static_int(rep, "tile: a repetition count") for rep in reps)
    if any(rep <= 0 for rep in reps):
        raise ShapeError(
            f"tile: repetitions must be positive, got {reps}", location=user_location()
        )
    rank = max(t.ndim, len(reps))
    t = P.reshape(t, (1,) * (rank - t.ndim) + t.shape) if t.ndim < rank else t
    reps = (1,) * (rank - len(reps)) + reps
    if all(rep == 1 for rep in reps):
        return P.copy(t)
    return P.emit("tile", [t], x=t._var, reps=np.array(reps, np.int32))


def pad(array: Any, pad_width: Any, mode: str = "constant", **kwargs: Any) -> Tracer:
    t = tracer_arg(array, "pad")
    modes = {"constant": "constant", "reflect": "reflect", "edge": "replicate"}
    if mode not in modes:
        raise unsupported(f"np.pad(mode={mode!r})")
    value = kwargs.pop("constant_values", 0)
    if kwargs:
        raise unsupported(f"np.pad with {', '.join(kwargs)}=")
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (t.ndim, 2))
    if (widths < 0).any():
        raise ShapeError("pad: negative pad widths", location=user_location())
    if not isinstance(value, numbers.Number):
        raise unsupported("np.pad with per-axis constant_values")
    if not widths.any():
        return P.copy(t)
    return P.emit(
        "pad",
        [t],
        x=t._var,
        pad=widths.reshape(-1).astype(np.int32),
        mode=modes[mode],
        constant_val=t.dtype.type(value),
    )
