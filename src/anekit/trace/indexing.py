"""``x[key]`` on tracers: NumPy's basic indexing, and one integer-array index.

Basic indexing (ints, slices with any step, ``None``, ``...``) becomes one MIL
``slice_by_index`` plus an ``expand_dims`` for ``None``. One integer array (a
constant, a list, or a traced int32 array) on one axis, with slices elsewhere,
becomes ``gather``. A boolean mask from a traced array would make the shape
depend on the data and is refused; a constant 1-D boolean mask is a gather.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from anekit import dtypes
from anekit.errors import DynamicShapeError, ShapeError, TraceError, UnsupportedFunctionError
from anekit.trace import primitives as P
from anekit.trace.source import user_location
from anekit.trace.tracer import Tracer


def _expand(key: Any, ndim: int) -> list[Any]:
    items = list(key) if isinstance(key, tuple) else [key]
    ellipses = [i for i, item in enumerate(items) if item is Ellipsis]
    if len(ellipses) > 1:
        raise ShapeError(
            "an index can only have a single ellipsis ('...')", location=user_location()
        )
    consumed = sum(
        max(item.ndim, 1) if isinstance(item, np.ndarray) and item.dtype == np.bool_ else 1
        for item in items
        if item is not None and item is not Ellipsis
    )
    if consumed > ndim:
        raise ShapeError(
            f"too many indices for array: array is {ndim}-dimensional, but {consumed} were indexed",
            location=user_location(),
        )
    # The axes left unindexed take whole slices: at the ellipsis, or else at the end.
    position = ellipses[0] if ellipses else len(items)
    items[position : position + 1] = [slice(None)] * (ndim - consumed)
    return items


def getitem(x: Tracer, key: Any) -> Tracer:
    P.context_of([x])
    items = _expand(key, x.ndim)
    arrays = [i for i, item in enumerate(items) if isinstance(item, Tracer | np.ndarray | list)]
    if not arrays:
        return P.view_of(_basic(x, items), x)
    if len(arrays) > 1:
        raise UnsupportedFunctionError(
            "indexing with more than one index array is not supported by anekit's tracer",
            location=user_location(),
            hint="index one axis at a time: x[idx0][:, idx1]",
        )
    position = arrays[0]
    if any(item is None or isinstance(item, numbers.Integral) for item in items):
        raise UnsupportedFunctionError(
            "mixing an index array with integer or None indices is not supported by "
            "anekit's tracer (NumPy's placement rules for that case are subtle)",
            location=user_location(),
            hint="index in two steps, e.g. x[0][idx] or x[:, idx][None]",
        )
    index = items[position]
    items[position] = slice(None)
    return gather(_basic(x, items), index, position)


def gather(x: Tracer, index: Any, axis: int) -> Tracer:
    """``np.take(x, index, axis)``: constant or traced integer indices."""
    size = x.shape[axis]
    if isinstance(index, Tracer):
        if index.dtype == dtypes.BOOL:
            raise DynamicShapeError(
                "boolean-mask indexing with a traced mask has a shape that depends on its values",
                location=user_location(),
                hint="keep every element and use np.where(mask, x, fill)",
            )
        if index.dtype != dtypes.INT32:
            raise TraceError(
                f"index arrays must be integers, got {index.dtype}", location=user_location()
            )
        indices: Any = index._var
    else:
        array = np.asarray(index)
        if array.dtype == np.bool_:
            if array.ndim != 1 or array.shape[0] != size:
                raise UnsupportedFunctionError(
                    "boolean masks other than one 1-D mask over one axis are not supported",
                    location=user_location(),
                )
            array = np.flatnonzero(array)
        if array.dtype.kind not in "iu":
            raise TraceError(
                f"index arrays must be integers or booleans, got {array.dtype}",
                location=user_location(),
            )
        if array.size == 0:
            raise ShapeError("indexing would produce an empty array", location=user_location())
        if (array < -size).any() or (array >= size).any():
            bad = array[(array < -size) | (array >= size)][0]
            raise ShapeError(
                f"index {bad} is out of bounds for axis {axis} with size {size}",
                location=user_location(),
            )
        normalized = np.where(array < 0, array + size, array).astype(np.int32)
        indices = (
            P.context_of([x]).constant(normalized, dtypes.INT32)
            if normalized.ndim
            else normalized[()]
        )
    return P.emit("gather", [x, index], x=x._var, indices=indices, axis=axis)


def _basic(x: Tracer, items: list[Any]) -> Tracer:
    # slice_by_index's (begin, end, stride, end_mask, squeeze_mask) for each axis of x
    axes: list[tuple[int, int, int, bool, bool]] = []
    new_axes: list[int] = []
    out_dim = 0
    for item in items:
        if item is None:
            new_axes.append(out_dim)
            out_dim += 1
            continue
        dim = len(axes)
        size = x.shape[dim]
        if isinstance(item, slice):
            start, stop, step = item.indices(size)
            length = len(range(start, stop, step))
            if length == 0:
                raise ShapeError(
                    f"slice {_format_slice(item)} of axis {dim} (size {size}) is empty; "
                    "zero-size arrays cannot be traced",
                    location=user_location(),
                )
            axes.append((start, max(stop, 0), step, stop < 0, False))
            out_dim += 1
        elif P.is_int(item):
            index = int(item)
            if not -size <= index < size:
                raise ShapeError(
                    f"index {index} is out of bounds for axis {dim} with size {size}",
                    location=user_location(),
                )
            index %= size
            axes.append((index, index + 1, 1, False, True))
        elif isinstance(item, Tracer):
            raise TraceError(
                "a traced scalar used as an index",
                location=user_location(),
                hint="use np.take(x, idx, axis) with an int32 array",
            )
        else:
            raise UnsupportedFunctionError(
                f"indexing with {type(item).__name__} is not supported by anekit's tracer",
                location=user_location(),
            )
    result = P.copy(x)
    if axes != [(0, size, 1, False, False) for size in x.shape]:
        begin, end, stride, end_mask, squeeze = map(list, zip(*axes, strict=True))
        result = P.emit(
            "slice_by_index",
            [x],
            x=x._var,
            begin=np.array(begin, np.int32),
            end=np.array(end, np.int32),
            stride=np.array(stride, np.int32),
            end_mask=end_mask,
            squeeze_mask=squeeze,
        )
    return P.expand_dims(result, new_axes)


def _format_slice(item: slice) -> str:
    parts = ["" if value is None else str(value) for value in (item.start, item.stop, item.step)]
    return ":".join(parts[:2] if item.step is None else parts)
