"""Op-table rows: Scatter, sliding-window, sequence-reversal, slice-update and non-zero ops.

Also gather_nd's ``batch_dims`` and conv_transpose's output sizes and cropping. References
are loops written from coremltools' MIL docs (``mil/ops/defs``: iOS15/iOS17
``scatter_gather``, iOS15/iOS18 ``tensor_transformation``, iOS15 ``tensor_operation`` and
``conv``). Scatter indices may be negative (wrapped, as in iOS15 MIL); repeated indices
apply in turn, so "update" rows avoid them. conv_transpose's result is cropped from
``pad[2i]`` (custom), half the excess (same) or 0 (valid) to the size MIL declares, with
zeros past the full result.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from oprows.table import (
    ACCUM,
    F32,
    I32,
    Gen,
    OpRecord,
    Ref,
    bools,
    divisors,
    fixed,
    int_divisors,
    ints,
    normal,
    op_record,
    small,
)

RECORDS: list[OpRecord] = []

_RNG = np.random.default_rng(31337)


def _w(*shape: int) -> np.ndarray:
    return _RNG.standard_normal(shape).astype(F32)


# --- scatter, scatter_along_axis, scatter_nd ----------------------------------

#: How each mode combines the current value with an update (an int array truncates
#: a quotient when it is stored).
_COMBINE: dict[str, Any] = {
    "update": lambda old, new: new,
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "div": operator.truediv,
    "max": np.maximum,
    "min": np.minimum,
}


def _scatter(
    data: Any, indices: Any, updates: Any, axis: int = 0, mode: str = "add", **_: Any
) -> Any:
    """output[..., indices[i], ...] (at ``axis``) <- mode(that, updates[..., i, ...])."""
    out, ax = data.copy(), axis % data.ndim
    for i, index in enumerate(indices):
        target = (slice(None),) * ax + (int(index),)
        out[target] = _COMBINE[mode](out[target], np.take(updates, i, axis=ax))
    return out


def _scatter_along_axis(
    data: Any, indices: Any, updates: Any, axis: int = 0, mode: str = "add", **_: Any
) -> Any:
    """output[p with p[axis] = indices[p]] <- mode(that, updates[p])."""
    out, ax = data.copy(), axis % data.ndim
    for p in np.ndindex(*indices.shape):
        target = (*p[:ax], int(indices[p]), *p[ax + 1 :])
        out[target] = _COMBINE[mode](out[target], updates[p])
    return out


def _scatter_nd(data: Any, indices: Any, updates: Any, mode: str = "add", **_: Any) -> Any:
    """output[indices[i..., :]] <- mode(that, updates[i...])."""
    out = data.copy()
    for p in np.ndindex(*indices.shape[:-1]):
        target = tuple(int(v) for v in indices[p])
        out[target] = _COMBINE[mode](out[target], updates[p])
    return out


def _idx(values: Any) -> Gen:
    return fixed(values, I32)


_U, _V = {"mode": "update"}, {"validate_indices": True}
Case = tuple[str, Any, Any, Any, dict[str, Any]]  # tag, data, indices, updates, attrs
# mode defaults to MIL's "add"; "update" rows never repeat an index
SCATTER_CASES: dict[Ref, list[Case]] = {
    # 1-D indices along axis; updates D[:axis] + [C] + D[axis+1:]
    _scatter: [
        ("update-negative-index", normal(4, 3), _idx([2, -1, 0]), normal(3, 3), _U),
        ("add-axis1", normal(2, 5, 3), _idx([1, 4, 1, -4]), normal(2, 4, 3), {"axis": 1}),
        ("sub-axis-1", normal(3, 4), _idx([0, -1, 0]), normal(3, 3), {"axis": -1, "mode": "sub"}),
        ("mul", normal(4, 2), _idx([3, 1, 3]), normal(3, 2), {"mode": "mul"}),
        ("div", normal(4, 2), _idx([1, -3, 2]), divisors(3, 2), {"mode": "div"}),
        (
            "max-axis-1",
            normal(2, 3, 4),
            _idx([2, 0, 2, 2]),
            normal(2, 3, 4),
            {"axis": -1, "mode": "max"},
        ),
        ("min", normal(5, 2), _idx([4, 4, 0]), normal(3, 2), {"mode": "min"}),
        ("i32-add", ints(-9, 9, 3, 4), _idx([1, 1, 3]), ints(-9, 9, 3, 3), {"axis": 1}),
        ("update-validate", normal(4, 3), _idx([3, 0]), normal(2, 3), _U | _V),
    ],
    # indices and updates of one shape, rank(data)
    _scatter_along_axis: [
        ("update", normal(3, 4), _idx([[0, 2, 1, -1], [2, 0, -1, 1]]), normal(2, 4), _U),
        ("add-axis-1", normal(2, 3, 5), ints(-5, 5, 2, 3, 6), normal(2, 3, 6), {"axis": -1}),
        ("sub", normal(4, 3), ints(-4, 4, 5, 3), normal(5, 3), {"mode": "sub"}),
        (
            "mul-axis1",
            normal(2, 4, 3),
            ints(-4, 4, 2, 3, 3),
            normal(2, 3, 3),
            {"axis": 1, "mode": "mul"},
        ),
        ("div-axis-1", normal(3, 4), ints(0, 4, 3, 2), divisors(3, 2), {"axis": -1, "mode": "div"}),
        ("max", normal(3, 4), ints(-3, 3, 4, 4), normal(4, 4), {"mode": "max"}),
        ("min-axis1", normal(3, 4), ints(-4, 4, 3, 5), normal(3, 5), {"axis": 1, "mode": "min"}),
        (
            "i32-max-validate",
            ints(-9, 9, 3, 4),
            ints(0, 3, 2, 4),
            ints(-9, 9, 2, 4),
            {"mode": "max"} | _V,
        ),
    ],
    # indices (*E, k); updates E + D[k:]
    _scatter_nd: [
        ("update-full-depth", normal(3, 4), _idx([[0, 1], [2, -1], [-3, 2]]), normal(3), _U),
        (
            "add-partial-depth",
            normal(4, 3, 2),
            _idx([[[1], [3]], [[1], [-3]]]),
            normal(2, 2, 3, 2),
            {},
        ),
        ("sub", normal(4, 4, 3), ints(-4, 4, 5, 2), normal(5, 3), {"mode": "sub"}),
        ("mul", normal(3, 3), ints(-3, 3, 2, 3, 2), normal(2, 3), {"mode": "mul"}),
        ("div", normal(4, 2), _idx([[1], [-1], [1]]), divisors(3, 2), {"mode": "div"}),
        ("max", normal(2, 3, 4), ints(-2, 2, 6, 3), normal(6), {"mode": "max"}),
        ("min", normal(3, 3), ints(-3, 3, 5, 1), normal(5, 3), {"mode": "min"}),
        (
            "i32-div-truncates",
            ints(-50, 50, 4, 3),
            _idx([[2, 1], [0, 0], [2, 1], [3, 2]]),
            int_divisors(4),
            {"mode": "div"},
        ),
        ("update-validate", normal(3, 4), _idx([[2], [0]]), normal(2, 4), _U | _V),
    ],
}
RECORDS += [
    op_record(ref.__name__[1:], ref, data, indices, updates, tag=tag, **attrs)
    for ref, cases in SCATTER_CASES.items()
    for tag, data, indices, updates, attrs in cases
]


# --- gather_nd with batch_dims -----------------------------------------------


def _gather_nd(x: Any, indices: Any, batch_dims: int = 0) -> Any:
    """output[i...] = x[i[:batch_dims] + indices[i..., :]], V = K[:-1] + D[batch_dims + K[-1]:]."""
    depth = indices.shape[-1]
    lead = indices.shape[:-1]
    out = np.empty(lead + x.shape[batch_dims + depth :], x.dtype)
    for p in np.ndindex(*lead):
        out[p] = x[p[:batch_dims] + tuple(int(v) for v in indices[p])]
    return out


RECORDS += [
    op_record(
        "gather_nd",
        _gather_nd,
        normal(2, 3, 4),
        fixed([[[0], [2]], [[1], [-1]]], I32),
        tag="batch_dims1",
        batch_dims=1,
    ),
    op_record(
        "gather_nd",
        _gather_nd,
        normal(2, 3, 4, 5),
        ints(-3, 3, 2, 4, 2),
        tag="batch_dims1-depth2",
        batch_dims=1,
    ),
    op_record(
        "gather_nd",
        _gather_nd,
        normal(2, 3, 4, 5),
        fixed(np.arange(-6, 18).reshape(2, 3, 2, 2) % 5 - 1, I32),
        tag="batch_dims2-full",
        batch_dims=2,
    ),
    op_record(
        "gather_nd",
        _gather_nd,
        ints(0, 99, 2, 3, 4),
        ints(-4, 4, 2, 3, 5, 1),
        tag="i32-batch_dims2",
        batch_dims=2,
    ),
]


# --- non_zero, sliding_windows, reverse_sequence, slice_update ---------------


def _non_zero(x: Any) -> Any:
    """Row-major (N, rank) indices of the non-zero elements."""
    found = [p for p in np.ndindex(*x.shape) if x[p] != 0]
    return np.array(found, I32).reshape(len(found), x.ndim)


def _sliding_windows(x: Any, axis: int, size: int, stride: int = 1) -> Any:
    """Window i holds x[i * stride : i * stride + size] along axis, stacked before it."""
    ax = axis % x.ndim
    count = (x.shape[ax] - size) // stride + 1
    windows = [np.take(x, range(i * stride, i * stride + size), axis=ax) for i in range(count)]
    return np.stack(windows, axis=ax)


def _reverse_sequence(x: Any, lengths: Any, seq_axis: int = 0, batch_axis: int = 0) -> Any:
    """For each b along batch_axis, the first lengths[b] steps along seq_axis reversed."""
    moved = np.moveaxis(x, (batch_axis, seq_axis), (0, 1))
    out = moved.copy()
    for b, length in enumerate(lengths):
        out[b, :length] = moved[b, :length][::-1]
    return np.moveaxis(out, (0, 1), (batch_axis, seq_axis))


def _slice_update(
    x: Any,
    update: Any,
    begin: Any,
    end: Any,
    stride: Any = None,
    begin_mask: Any = None,
    end_mask: Any = None,
    squeeze_mask: Any = None,
) -> Any:
    """x with x[begin:end:stride] (slice_by_index's masks) set to update."""
    index: list[Any] = []
    for axis in range(x.ndim):
        if squeeze_mask is not None and squeeze_mask[axis]:
            index.append(int(begin[axis]))
            continue
        start = None if begin_mask is not None and begin_mask[axis] else int(begin[axis])
        stop = None if end_mask is not None and end_mask[axis] else int(end[axis])
        index.append(slice(start, stop, 1 if stride is None else int(stride[axis])))
    out = x.copy()
    out[tuple(index)] = update
    return out


RECORDS += [
    op_record("non_zero", _non_zero, small(3, 4), tag="f32"),
    op_record("non_zero", _non_zero, ints(-1, 2, 2, 3, 2), tag="i32-rank3"),
    op_record("non_zero", _non_zero, bools(7), tag="bool-rank1"),
    op_record("non_zero", _non_zero, fixed(np.zeros((2, 3))), tag="none"),
    op_record("sliding_windows", _sliding_windows, normal(2, 7), tag="axis1", axis=1, size=3),
    op_record(
        "sliding_windows",
        _sliding_windows,
        normal(2, 8),
        tag="stride2-negative-axis",
        axis=-1,
        size=3,
        stride=2,
    ),
    op_record(
        "sliding_windows",
        _sliding_windows,
        normal(10, 2, 3),
        tag="axis0-stride3",
        axis=0,
        size=4,
        stride=3,
    ),
    op_record(
        "sliding_windows",
        _sliding_windows,
        ints(-9, 9, 3, 5, 2),
        tag="i32-axis-2-stride2",
        axis=-2,
        size=2,
        stride=2,
    ),
    op_record(
        "reverse_sequence",
        _reverse_sequence,
        normal(3, 5),
        fixed([2, 5, 0], I32),
        tag="seq1-batch0",
        seq_axis=1,
        batch_axis=0,
    ),
    op_record(
        "reverse_sequence",
        _reverse_sequence,
        normal(4, 2, 3),
        fixed([3, 1], I32),
        tag="seq0-batch1",
        seq_axis=0,
        batch_axis=1,
    ),
    op_record(
        "reverse_sequence",
        _reverse_sequence,
        normal(2, 5, 3, 4),
        fixed([4, 0, 2, 5], I32),
        tag="seq1-batch-1",
        seq_axis=1,
        batch_axis=-1,
    ),
    op_record(
        "reverse_sequence",
        _reverse_sequence,
        ints(-9, 9, 3, 6, 2),
        fixed([6, 3, 1], I32),
        tag="i32-seq-2-batch0",
        seq_axis=-2,
        batch_axis=0,
    ),
    op_record(
        "slice_update",
        _slice_update,
        normal(3, 4, 5),
        normal(2, 2, 2),
        tag="strides",
        begin=[1, 0, 1],
        end=[3, 4, 5],
        stride=[1, 2, 2],
    ),
    op_record(
        "slice_update",
        _slice_update,
        normal(3, 4, 5),
        normal(3, 4, 2),
        tag="negative-stride-end_mask",
        begin=[0, -1, 4],
        end=[3, 0, 0],
        stride=[1, -1, -2],
        end_mask=[False, True, False],
    ),
    op_record(
        "slice_update",
        _slice_update,
        normal(3, 4, 5),
        normal(3, 2, 5),
        tag="begin_mask-end_mask",
        begin=[2, 1, 3],
        end=[0, 3, 0],
        begin_mask=[True, False, True],
        end_mask=[True, False, True],
    ),
    op_record(
        "slice_update",
        _slice_update,
        normal(3, 4, 5),
        normal(4),
        tag="squeeze_mask",
        begin=[1, 0, -2],
        end=[2, 4, -1],
        squeeze_mask=[True, False, True],
    ),
    op_record(
        "slice_update",
        _slice_update,
        ints(-9, 9, 6, 3),
        ints(100, 200, 2, 1),
        tag="i32-stride3-negative-begin",
        begin=[-6, -1],
        end=[6, 3],
        stride=[3, 1],
    ),
]


# --- conv_transpose: output sizes and cropping ----------------------------------


def _conv_transpose(
    x: Any,
    weight: Any,
    bias: Any = None,
    pad: Any = None,
    output_shape: Any = None,
    pad_type: str = "valid",
    strides: Any = None,
    dilations: Any = None,
    groups: int = 1,
) -> Any:
    """out[n, o, q] = sum of x[n, c, i] * w[c, o, k] over q + begin = i * stride + k * dilation.

    The size is MIL's: output_shape, else D*stride (same), the full extent less the pads
    (custom) or the full extent (valid); begin is pad[2i], half the excess, or 0.
    """
    rank, n, kernel = x.ndim - 2, np.array(x.shape[2:]), weight.shape[2:]
    s = np.ones(rank, int) if strides is None else np.array(strides)
    d = np.ones(rank, int) if dilations is None else np.array(dilations)
    full = (n - 1) * s + (np.array(kernel) - 1) * d + 1
    pads = np.reshape([0] * 2 * rank if pad is None else pad, (rank, 2))
    if output_shape is not None:
        size = np.array(output_shape[2:])
    elif pad_type == "same":
        size = n * s
    else:
        size = full - pads.sum(axis=1) if pad_type == "custom" else full
    if pad_type == "custom":
        begin = pads[:, 0]
    else:
        begin = np.maximum(full - size, 0) // 2 if pad_type == "same" else np.zeros(rank, int)
    c_in, c_out = x.shape[1] // groups, weight.shape[1]
    out = np.zeros((x.shape[0], c_out * groups, *size))
    for q in np.ndindex(*size):
        for k in np.ndindex(*kernel):
            where = np.add(q, begin) - np.multiply(k, d)
            if np.any(where % s) or np.any(where < 0) or np.any(where // s >= n):
                continue
            i = tuple(where // s)
            for g in range(groups):
                xs = x[(slice(None), slice(g * c_in, (g + 1) * c_in), *i)]
                ws = weight[(slice(g * c_in, (g + 1) * c_in), slice(None), *k)]
                out[(slice(None), slice(g * c_out, (g + 1) * c_out), *q)] += xs @ ws
    if bias is not None:
        out += np.reshape(bias, (1, -1) + (1,) * rank)
    return out


CONV_TRANSPOSE_CASES: list[tuple[str, tuple[int, ...], dict[str, Any]]] = [
    (
        "1d-valid-stride2-dilation2",
        (2, 3, 5),
        {"weight": _w(3, 2, 3), "strides": [2], "dilations": [2]},
    ),
    # same: D * stride; a kernel shorter than the stride leaves zeros at the end
    (
        "1d-same-stride3-short-kernel",
        (1, 2, 4),
        {"weight": _w(2, 3, 2), "pad_type": "same", "strides": [3]},
    ),
    (
        "1d-same-stride2-odd-excess",
        (1, 2, 4),
        {"weight": _w(2, 2, 5), "pad_type": "same", "strides": [2]},
    ),
    (
        "1d-custom-stride3-groups2-bias",
        (2, 4, 3),
        {
            "weight": _w(4, 1, 4),
            "pad_type": "custom",
            "pad": [2, 1],
            "strides": [3],
            "groups": 2,
            "bias": _w(2),
        },
    ),
    (
        "1d-custom-negative-pad",
        (1, 2, 3),
        {"weight": _w(2, 2, 3), "pad_type": "custom", "pad": [-1, 2]},
    ),
    # output_shape: TF's VALID backprop sizes (zeros past the full extent) and a crop
    (
        "1d-valid-output_shape-larger",
        (1, 2, 3),
        {"weight": _w(2, 3, 2), "strides": [2], "output_shape": [1, 3, 7]},
    ),
    (
        "1d-valid-output_shape-smaller",
        (1, 2, 3),
        {"weight": _w(2, 3, 2), "strides": [2], "output_shape": [1, 3, 5]},
    ),
    (
        "2d-same-output_shape-stride3-dilations",
        (1, 2, 3, 3),
        {
            "weight": _w(2, 2, 3, 3),
            "pad_type": "same",
            "strides": [3, 2],
            "dilations": [1, 2],
            "output_shape": [1, 2, 8, 7],
        },
    ),
    (
        "2d-same-output_shape-larger",
        (1, 2, 3, 3),
        {
            "weight": _w(2, 3, 1, 1),
            "pad_type": "same",
            "strides": [2, 2],
            "output_shape": [1, 3, 6, 5],
        },
    ),
    # PyTorch's output_padding: custom pads with an output_shape past the full extent
    (
        "2d-custom-output_shape-output-padding",
        (1, 2, 3, 3),
        {
            "weight": _w(2, 3, 3, 3),
            "pad_type": "custom",
            "pad": [0, 1, 1, 0],
            "strides": [2, 2],
            "output_shape": [1, 3, 8, 7],
            "bias": _w(3),
        },
    ),
    (
        "2d-custom-stride3-groups3-bias",
        (2, 6, 2, 3),
        {
            "weight": _w(6, 1, 3, 2),
            "pad_type": "custom",
            "pad": [1, 0, 0, 2],
            "strides": [3, 3],
            "groups": 3,
            "bias": _w(3),
        },
    ),
    (
        "2d-same-groups2-dilations",
        (1, 4, 4, 4),
        {"weight": _w(4, 2, 2, 3), "pad_type": "same", "groups": 2, "dilations": [2, 1]},
    ),
    ("3d-valid-strides", (1, 2, 2, 3, 2), {"weight": _w(2, 2, 2, 2, 2), "strides": [2, 1, 2]}),
]
for _tag, _sx, _attrs in CONV_TRANSPOSE_CASES:
    RECORDS.append(
        op_record("conv_transpose", _conv_transpose, normal(*_sx), tag=_tag, **ACCUM, **_attrs)
    )
