"""Layout, indexing and creation ops. Values pass through unchanged (no rounding
happens that storage would not do anyway); shapes follow MIL's definitions, and
the interpreter checks every result against the shape MIL declared."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from anekit.errors import ProgramError
from anekit.ops.defs._util import axes_of, axis_of, errstate, index_slices, out_shape, wrap_indices
from anekit.ops.limits import WIDTH_SLICE_LIMIT
from anekit.ops.lowering import Lowering, NotLowerable, onnx_type, shape_of
from anekit.ops.registry import OpContext, cliff, lowers, register


@register("reshape")
def reshape(ctx: OpContext, x: Any, shape: Any) -> Any:
    declared = out_shape(ctx)
    if declared is not None:
        return np.reshape(x, declared)
    dims = [int(d) for d in np.asarray(shape).reshape(-1)]
    dims = [np.shape(x)[i] if d == 0 else d for i, d in enumerate(dims)]
    return np.reshape(x, dims)


@register("reshape_like")
def reshape_like(
    ctx: OpContext, x: Any, ref_tensors: Any, begins: Any, ends: Any, end_masks: Any
) -> Any:
    declared = out_shape(ctx)
    assert declared is not None
    return np.reshape(x, declared)


@register("transpose")
def transpose(ctx: OpContext, x: Any, perm: Any) -> Any:
    return np.transpose(x, [int(p) for p in np.asarray(perm).reshape(-1)])


@register("expand_dims")
def expand_dims(ctx: OpContext, x: Any, axes: Any) -> Any:
    rank = np.ndim(x) + np.size(axes)
    positions = sorted(int(a) % rank for a in np.asarray(axes).reshape(-1))
    return np.expand_dims(x, tuple(positions))


@register("squeeze")
def squeeze(ctx: OpContext, x: Any, axes: Any = None) -> Any:
    if axes is None:
        return np.squeeze(x)
    # MIL (like PyTorch) ignores listed axes whose size is not 1.
    chosen = tuple(axis for axis in axes_of(axes, np.ndim(x)) if np.shape(x)[axis] == 1)
    return np.squeeze(x, axis=chosen) if chosen else np.asarray(x)


@register("flatten2d")
def flatten2d(ctx: OpContext, x: Any, axis: Any) -> Any:
    # MIL: (prod(shape[:axis]), prod(shape[axis:])), with Python's slicing of axis.
    shape = np.shape(x)
    return np.reshape(x, (int(np.prod(shape[: int(axis)], dtype=np.int64)), -1))


@register("concat")
def concat(ctx: OpContext, values: Any, axis: Any, interleave: Any) -> Any:
    index = axis_of(axis, np.ndim(values[0]))
    if not interleave:
        return np.concatenate(values, axis=index)
    stacked = np.stack(values, axis=index + 1)
    shape = list(np.shape(values[0]))
    shape[index] *= len(values)
    return stacked.reshape(shape)


@register("stack")
def stack(ctx: OpContext, values: Any, axis: Any) -> Any:
    return np.stack(values, axis=int(axis) % (np.ndim(values[0]) + 1))


@register("split")
def split(
    ctx: OpContext, x: Any, axis: Any, num_splits: Any = None, split_sizes: Any = None
) -> Any:
    index = axis_of(axis, np.ndim(x))
    if split_sizes is not None:
        bounds = np.cumsum(np.asarray(split_sizes).reshape(-1))[:-1]
        return tuple(np.split(x, bounds, axis=index))
    return tuple(np.split(x, int(num_splits), axis=index))


@register("slice_by_index")
def slice_by_index(
    ctx: OpContext,
    x: Any,
    begin: Any,
    end: Any,
    stride: Any = None,
    begin_mask: Any = None,
    end_mask: Any = None,
    squeeze_mask: Any = None,
) -> Any:
    slices = index_slices(np.shape(x), begin, end, stride, begin_mask, end_mask, squeeze_mask)
    result = np.asarray(x)[slices]
    squeezed = () if squeeze_mask is None else tuple(np.flatnonzero(squeeze_mask).tolist())
    return np.squeeze(result, axis=squeezed) if squeezed else result


@register("slice_by_size")
def slice_by_size(ctx: OpContext, x: Any, begin: Any, size: Any) -> Any:
    index = []
    for b, s, dim in zip(
        np.asarray(begin).reshape(-1), np.asarray(size).reshape(-1), np.shape(x), strict=True
    ):
        start = int(b) % dim if dim else 0
        index.append(slice(start, dim if int(s) == -1 else start + int(s)))
    return np.asarray(x)[tuple(index)]


@register("tile")
def tile(ctx: OpContext, x: Any, reps: Any) -> Any:
    return np.tile(x, [int(r) for r in np.asarray(reps).reshape(-1)])


@register("reverse")
def reverse(ctx: OpContext, x: Any, axes: Any = None) -> Any:
    return np.flip(x, axis=axes_of(axes, np.ndim(x)))


_PAD_MODES = {
    "constant": "constant",
    "reflect": "reflect",
    "replicate": "edge",
    "symmetric": "symmetric",
}


@register("pad")
def pad(ctx: OpContext, x: Any, pad: Any, mode: Any, constant_val: Any) -> Any:
    pairs = [(int(begin), int(end)) for begin, end in np.reshape(pad, (-1, 2))]
    widths = [(0, 0)] * (np.ndim(x) - len(pairs)) + pairs
    numpy_mode = _PAD_MODES[str(mode)]
    if numpy_mode == "constant":
        return np.pad(x, widths, mode="constant", constant_values=constant_val)
    return np.pad(x, widths, mode=numpy_mode)  # type: ignore[call-overload]


@register("gather")
def gather(
    ctx: OpContext,
    x: Any,
    indices: Any,
    batch_dims: Any = 0,  # iOS15's gather lacks it
    validate_indices: Any = False,  # iOS15 and iOS16's gather lack it
    *,
    axis: Any,
) -> Any:
    index = axis_of(axis, np.ndim(x))
    batch = int(batch_dims)
    picked = wrap_indices(indices, np.shape(x)[index])
    if batch == 0:
        return np.take(x, picked, axis=index)
    batch_shape = np.shape(x)[:batch]
    flat_x = np.reshape(x, (-1, *np.shape(x)[batch:]))
    flat_i = np.reshape(picked, (-1, *np.shape(picked)[batch:]))
    parts = [np.take(flat_x[b], flat_i[b], axis=index - batch) for b in range(flat_x.shape[0])]
    return np.reshape(np.stack(parts), (*batch_shape, *parts[0].shape))


@register("gather_along_axis")
def gather_along_axis(
    ctx: OpContext,
    x: Any,
    indices: Any,
    axis: Any,
    validate_indices: Any = False,  # iOS15 and iOS16's gather_along_axis lack it
) -> Any:
    index = axis_of(axis, np.ndim(x))
    picked = wrap_indices(indices, np.shape(x)[index])
    return np.take_along_axis(np.asarray(x), picked, axis=index)


@register("gather_nd")
def gather_nd(
    ctx: OpContext,
    x: Any,
    indices: Any,
    batch_dims: Any = 0,  # iOS15's gather_nd lacks it
    validate_indices: Any = False,  # iOS15 and iOS16's gather_nd lack it
) -> Any:
    """MIL gather_nd (iOS16+): ``out[b..., i...] = x[b..., *indices[b..., i..., :]]`` with
    ``b`` the first ``batch_dims`` axes of both ``x`` and ``indices``."""
    picked = np.asarray(indices).astype(np.int64)
    batch, dims = int(batch_dims), np.shape(x)
    batches = list(np.indices(picked.shape[:-1], sparse=True)[:batch])
    wrapped = [wrap_indices(picked[..., i], dims[batch + i]) for i in range(picked.shape[-1])]
    return np.asarray(x)[tuple(batches + wrapped)]


@register("fill")
def fill(ctx: OpContext, shape: Any, value: Any) -> Any:
    return np.full([int(d) for d in np.asarray(shape).reshape(-1)], value)


@register("fill_like")
def fill_like(ctx: OpContext, ref_tensor: Any, value: Any) -> Any:
    return np.full(np.shape(ref_tensor), value)


@register("range_1d")
def range_1d(ctx: OpContext, start: Any, end: Any, step: Any) -> Any:
    return np.arange(start, end, step)


@register("shape")
def shape(ctx: OpContext, x: Any) -> Any:
    return np.asarray(np.shape(x), np.int32)


@register("one_hot")
def one_hot(
    ctx: OpContext,
    indices: Any,
    one_hot_vector_size: Any,
    axis: Any,
    on_value: Any,
    off_value: Any,
) -> Any:
    size = int(one_hot_vector_size)
    encoded = np.arange(size) == np.expand_dims(np.asarray(indices), -1)
    result = np.where(encoded, on_value, off_value)
    return np.moveaxis(result, -1, int(axis) % result.ndim)


@register("band_part")
def band_part(ctx: OpContext, x: Any, lower: Any, upper: Any) -> Any:
    rows, cols = np.shape(x)[-2:]
    m = np.arange(rows)[:, None]
    n = np.arange(cols)[None, :]
    keep = ((int(lower) < 0) | (m - n <= int(lower))) & ((int(upper) < 0) | (n - m <= int(upper)))
    return np.where(keep, x, 0).astype(np.asarray(x).dtype)


@register("depth_to_space", "pixel_shuffle")
def depth_to_space(
    ctx: OpContext,
    x: Any,
    block_size: Any = None,  # depth_to_space's; pixel_shuffle has upscale_factor
    upscale_factor: Any = None,
) -> Any:
    b = int(block_size if block_size is not None else upscale_factor)
    n, c, h, w = np.shape(x)
    if ctx.op.op_type == "pixel_shuffle":
        y = np.reshape(x, (n, c // (b * b), b, b, h, w)).transpose(0, 1, 4, 2, 5, 3)
    else:
        y = np.reshape(x, (n, b, b, c // (b * b), h, w)).transpose(0, 3, 4, 1, 5, 2)
    return y.reshape(n, c // (b * b), h * b, w * b)


@register("space_to_depth", "pixel_unshuffle")
def space_to_depth(
    ctx: OpContext,
    x: Any,
    block_size: Any = None,  # space_to_depth's; pixel_unshuffle has downscale_factor
    downscale_factor: Any = None,
) -> Any:
    b = int(block_size if block_size is not None else downscale_factor)
    n, c, h, w = np.shape(x)
    y = np.reshape(x, (n, c, h // b, b, w // b, b))
    if ctx.op.op_type == "pixel_unshuffle":
        y = y.transpose(0, 1, 3, 5, 2, 4)
    else:
        y = y.transpose(0, 3, 5, 1, 2, 4)
    return y.reshape(n, c * b * b, h // b, w // b)


def _blocks(ctx: OpContext, x: Any, block_shape: Any, margins: Any, kind: str) -> list[int]:
    """``block_shape`` as ints, checked against ``x`` [N, C, *spatial] and ``margins``
    (paddings or crops, one non-negative [before, after] pair per block axis).

    coremltools 9 builds only rank-4 ``x`` with two block axes; the simulator does any
    number (TensorFlow's SpaceToBatchND/BatchToSpaceND on the axes after N and C)."""
    blocks = [int(b) for b in np.asarray(block_shape).reshape(-1)]
    pairs = np.asarray(margins).reshape(-1, 2)
    name = f"op {ctx.op.name!r} ({ctx.op.op_type})"
    if np.ndim(x) != len(blocks) + 2 or len(pairs) != len(blocks):
        raise ProgramError(
            f"{name}: x of shape {np.shape(x)} with block_shape {blocks} and {kind} of shape "
            f"{np.shape(margins)}; MIL wants x [N, C, *spatial] and one {kind} pair per block"
        )
    if min(blocks, default=1) < 1 or np.any(pairs < 0):
        raise ProgramError(
            f"{name}: block_shape {blocks} must be positive and {kind} "
            f"{pairs.tolist()} non-negative"
        )
    return blocks


@register("space_to_batch")
def space_to_batch(ctx: OpContext, x: Any, block_shape: Any, paddings: Any) -> Any:
    """TensorFlow's SpaceToBatchND in NCHW: zero-pad the spatial axes, split each into
    (size / b, b), and move the offsets in the blocks in front of the batch:
    ``out[(i * b_w + j) * N + n, c, h, w] = padded[n, c, h * b_h + i, w * b_w + j]`` (the
    layout of coremltools' own space_to_batch test)."""
    blocks = _blocks(ctx, x, block_shape, paddings, "paddings")
    widths = [(0, 0), (0, 0)] + [(int(a), int(b)) for a, b in np.reshape(paddings, (-1, 2))]
    padded = np.pad(np.asarray(x), widths)
    n, c, *spatial = padded.shape
    if any(size % b for size, b in zip(spatial, blocks, strict=True)):
        # coremltools declares size / b truncated to an int; TensorFlow refuses.
        raise ProgramError(
            f"op {ctx.op.name!r} (space_to_batch): padded spatial sizes {spatial} are not "
            f"multiples of block_shape {blocks}"
        )
    split = [n, c] + [d for size, b in zip(spatial, blocks, strict=True) for d in (size // b, b)]
    m = len(blocks)
    perm = [3 + 2 * k for k in range(m)] + [0, 1] + [2 + 2 * k for k in range(m)]
    out = padded.reshape(split).transpose(perm)
    return out.reshape(
        [n * int(np.prod(blocks)), c] + [s // b for s, b in zip(spatial, blocks, strict=True)]
    )


@register("batch_to_space")
def batch_to_space(ctx: OpContext, x: Any, block_shape: Any, crops: Any) -> Any:
    """TensorFlow's BatchToSpaceND in NCHW, the inverse of ``space_to_batch``:
    ``full[n, c, h * b_h + i, w * b_w + j] = x[(i * b_w + j) * N + n, c, h, w]`` with
    N = batch / prod(block_shape), then ``crops`` [before, after] cut from each axis."""
    blocks = _blocks(ctx, x, block_shape, crops, "crops")
    batch, c, *spatial = np.shape(x)
    count = int(np.prod(blocks))
    m = len(blocks)
    n = batch // count
    full = [size * b for size, b in zip(spatial, blocks, strict=True)]
    pairs = [(int(a), int(b)) for a, b in np.reshape(crops, (-1, 2))]
    if batch % count or any(a + b > size for (a, b), size in zip(pairs, full, strict=True)):
        raise ProgramError(
            f"op {ctx.op.name!r} (batch_to_space): batch {batch} must be a multiple of "
            f"prod(block_shape {blocks}) and crops {pairs} fit in spatial sizes {full}"
        )
    y = np.reshape(x, [*blocks, n, c, *spatial])
    perm = [m, m + 1] + [k for axis in range(m) for k in (m + 2 + axis, axis)]
    y = y.transpose(perm).reshape([n, c, *full])
    window = [slice(a, size - b) for (a, b), size in zip(pairs, full, strict=True)]
    return y[(slice(None), slice(None), *window)]


def _sorted_indices(x: Any, axis: int, ascending: bool) -> Any:
    keys = np.asarray(x) if ascending else -np.asarray(x)
    return np.argsort(keys, axis=axis, kind="stable")


@register("argsort")
def argsort(ctx: OpContext, x: Any, axis: Any, ascending: Any) -> Any:
    return _sorted_indices(x, axis_of(axis, np.ndim(x)), bool(ascending)).astype(np.int32)


@register("topk")
def topk(
    ctx: OpContext,
    x: Any,
    k: Any,
    axis: Any,
    ascending: Any,
    sort: Any = True,  # iOS15's topk lacks it
    return_indices: Any = True,  # iOS15's topk lacks it
    output_indices_dtype: Any = "int32",  # iOS15 and iOS16's topk lack it
) -> Any:
    index = axis_of(axis, np.ndim(x))
    order = np.take(_sorted_indices(x, index, bool(ascending)), range(int(k)), axis=index)
    values = np.take_along_axis(np.asarray(x), order, axis=index)
    if not return_indices:
        return values
    return values, order.astype(np.dtype(str(output_indices_dtype)))


@register("quantize")
def quantize(
    ctx: OpContext,
    input: Any,
    scale: Any,
    output_dtype: Any,
    zero_point: Any = None,
    axis: Any = None,
) -> Any:
    dtype = np.int8 if str(output_dtype) == "int8" else np.uint8
    scale_b, zero_b = _broadcast_quant(input, scale, zero_point, axis)
    info = np.iinfo(dtype)
    with errstate():
        values = np.round(np.asarray(input, np.float32) / scale_b) + zero_b
    return np.clip(values, info.min, info.max).astype(dtype)


@register("dequantize")
def dequantize(
    ctx: OpContext, input: Any, scale: Any, zero_point: Any = None, axis: Any = None
) -> Any:
    scale_b, zero_b = _broadcast_quant(input, scale, zero_point, axis)
    return (np.asarray(input, np.float32) - zero_b) * scale_b


def _broadcast_quant(data: Any, scale: Any, zero_point: Any, axis: Any) -> tuple[Any, Any]:
    def shaped(param: Any) -> Any:
        array = np.asarray(param, np.float32)
        if array.ndim == 0 or axis is None:
            return array
        shape = [1] * np.ndim(data)
        shape[int(axis) % np.ndim(data)] = array.size
        return array.reshape(shape)

    return shaped(scale), (np.float32(0) if zero_point is None else shaped(zero_point))


# -- ONNX lowerings --------------------------------------------------------------


@lowers("reshape", "expand_dims", "squeeze")
def _reshape(low: Lowering, op: Any) -> list[str]:
    return [low.node("Reshape", low.value(op.x), low.constant(list(shape_of(op.outputs[0]))))]


@lowers("transpose")
def _transpose(low: Lowering, op: Any) -> list[str]:
    rank = len(shape_of(op.x))
    perm = [int(p) % rank for p in np.atleast_1d(low.const(op.perm))]
    return [low.node("Transpose", low.value(op.x), perm=perm)]


@lowers("concat")
def _concat(low: Lowering, op: Any) -> list[str]:
    if bool(low.param(op, "interleave")):
        raise NotLowerable("interleaved concat")
    rank = len(shape_of(op.values[0]))
    axis = int(low.const(op.axis)) % rank
    return [low.node("Concat", *[low.value(value) for value in op.values], axis=axis)]


@lowers("tile")
def _tile(low: Lowering, op: Any) -> list[str]:
    reps = [int(r) for r in np.atleast_1d(low.const(op.reps))]
    return [low.node("Tile", low.value(op.x), low.constant(reps))]


@lowers("slice_by_index")
def _slice_by_index(low: Lowering, op: Any) -> list[str]:
    """ONNX Slice over the axes the slice cuts, then Squeeze for ``squeeze_mask``: an
    axis taken whole is left out and a slice to the end of an axis ends at "the end",
    so the model keeps working when a traced axis is made symbolic (batch, sequence)."""
    shape = shape_of(op.x)
    names = ("begin", "end", "stride", "begin_mask", "end_mask", "squeeze_mask")
    values = [low.const(getattr(op, name)) for name in names]
    slices = index_slices(shape, *values)
    axes, starts, ends, steps = [], [], [], []
    for axis, (item, size) in enumerate(zip(slices, shape, strict=True)):
        start, stop, step = item.indices(size)
        if (start, stop, step) == (0, size, 1):
            continue  # the whole axis
        axes.append(axis)
        starts.append(start)
        # 2**62: "to the end" (clamped by ONNX); -(2**62): past the start, for negative steps
        ends.append(2**62 if step > 0 and stop >= size else stop if stop >= 0 else -(2**62))
        steps.append(step)
    source = result = low.value(op.x)
    if axes:
        result = low.node(
            "Slice", result, low.constant(starts), low.constant(ends), low.constant(axes),
            low.constant(steps),
        )  # fmt: skip
    squeezed = [] if values[5] is None else np.flatnonzero(np.ravel(values[5])).tolist()
    if squeezed:
        result = low.node("Squeeze", result, low.constant(squeezed))
    return [low.node("Identity", result) if result == source else result]


@lowers("gather")
def _gather(low: Lowering, op: Any) -> list[str]:
    batch_dims = low.param(op, "batch_dims")  # None: iOS15's gather, which lacks it
    if batch_dims is not None and int(batch_dims) != 0:
        raise NotLowerable("gather with batch_dims")
    rank = len(shape_of(op.x))
    axis = int(low.param(op, "axis")) % rank
    indices = low.node("Cast", low.value(op.indices), to=onnx_type(np.dtype(np.int64)))
    return [low.node("Gather", low.value(op.x), indices, axis=axis)]


# -- numeric cliffs ------------------------------------------------------------------


def _input_peak_probe(low: Lowering, op: Any) -> dict[str, str]:
    """The largest |input|, computed in the graph."""
    magnitude = low.node("Abs", low.value(op.x))
    return {"input_peak": low.node("ReduceMax", magnitude, keepdims=0)}


def _input_peak(op: Any, values: Mapping[str, float]) -> dict[str, Any]:
    return {"x": np.array([values["input_peak"]], np.float32), "begin": np.asarray(op.begin.val)}


@cliff(
    "slice_by_index",
    "slice_by_size",
    rule="ane.width_slice_saturation",
    probe=_input_peak_probe,
    stand_in=_input_peak,
)
def _width_slice(op: Any, inputs: Mapping[str, Any], max_abs: float) -> list[str]:
    if "begin" not in inputs or "x" not in inputs:
        return []
    begin = np.asarray(inputs["begin"]).reshape(-1)
    if not begin.size or int(begin[-1]) == 0 or not np.size(inputs["x"]):
        return []
    peak = float(np.nanmax(np.abs(np.asarray(inputs["x"], np.float32))))
    if peak <= WIDTH_SLICE_LIMIT:
        return []
    return [
        f"slices the last axis at offset {int(begin[-1])} of values up to {peak:.6g}; "
        f"pre-A16 ANEs saturate above {WIDTH_SLICE_LIMIT:g}"
    ]


# -- Core AI lowerings (anekit.package.coreai) -----------------------------------------


@lowers("reshape", "expand_dims", "squeeze", target="coreai")
def _reshape_coreai(ai: Any, op: Any) -> Any:
    shape = np.asarray(shape_of(op.outputs[0]), np.int32)  # static: the output's own
    return ai.ai.reshape(ai.value(op.x), shape)


@lowers("transpose", target="coreai")
def _transpose_coreai(ai: Any, op: Any) -> Any:
    rank = len(shape_of(op.x))
    perm = [int(p) % rank for p in np.atleast_1d(ai.param(op, "perm"))]
    return ai.ai.transpose(ai.value(op.x), np.asarray(perm, np.uint32))


def _static(values: Any, dtype: Any = np.int32) -> Any:
    """Compile-time indices, sizes or a shape as a Core AI constant's array."""
    return np.asarray([int(value) for value in values], dtype)


@lowers("concat", target="coreai")
def _concat_coreai(ai: Any, op: Any) -> Any:
    if bool(ai.param(op, "interleave")):
        raise NotLowerable("interleaved concat")
    axis = int(ai.param(op, "axis")) % len(shape_of(op.values[0]))
    return ai.ai.concat(np.int32(axis), [ai.value(value) for value in op.values])


def _sliced(ai: Any, op: Any, slices: list[slice]) -> Any:
    """``op.x`` cut by ``slices`` (one per axis, positive steps), reshaped to the op's
    output shape (MIL's squeezed axes)."""
    shape = shape_of(op.x)
    bounds = [item.indices(size) for item, size in zip(slices, shape, strict=True)]
    if any(step <= 0 for _, _, step in bounds):
        raise NotLowerable("a slice with a negative stride")
    starts = [start for start, _, _ in bounds]
    ends = [max(stop, start) for start, stop, _ in bounds]
    steps = [step for _, _, step in bounds]
    result = ai.ai.slice_(ai.value(op.x), _static(starts), _static(ends), _static(steps))
    sliced = tuple(len(range(*item)) for item in bounds)
    output = shape_of(op.outputs[0])
    return result if sliced == output else ai.ai.reshape(result, _static(output))


@lowers("slice_by_index", target="coreai")
def _slice_by_index_coreai(ai: Any, op: Any) -> Any:
    names = ("begin", "end", "stride", "begin_mask", "end_mask", "squeeze_mask")
    values = [ai.param(op, name) for name in names]
    return _sliced(ai, op, list(index_slices(shape_of(op.x), *values)))


@lowers("slice_by_size", target="coreai")
def _slice_by_size_coreai(ai: Any, op: Any) -> Any:
    begin = np.ravel(ai.param(op, "begin"))
    size = np.ravel(ai.param(op, "size"))
    slices = []
    for b, s, dim in zip(begin, size, shape_of(op.x), strict=True):
        start = int(b) % dim if dim else 0
        slices.append(slice(start, dim if int(s) == -1 else start + int(s)))
    return _sliced(ai, op, slices)


@lowers("split", target="coreai")
def _split_coreai(ai: Any, op: Any) -> Any:
    axis = int(ai.param(op, "axis")) % len(shape_of(op.x))
    sections = [shape_of(var)[axis] for var in op.outputs]
    return tuple(ai.ai.split(ai.value(op.x), _static(sections, np.uint32), np.int32(axis)))


@lowers("tile", target="coreai")
def _tile_coreai(ai: Any, op: Any) -> Any:
    return ai.ai.tile(ai.value(op.x), _static(np.ravel(ai.param(op, "reps")), np.uint32))


@lowers("pad", target="coreai")
def _pad_coreai(ai: Any, op: Any) -> Any:
    """Constant padding (Core AI's ``pad``: begin/end pairs over every axis)."""
    mode = str(ai.param(op, "mode"))
    if mode != "constant":
        raise NotLowerable(f"pad mode {mode}")
    pairs = np.reshape(np.asarray(ai.param(op, "pad")), (-1, 2)).tolist()
    widths = [[0, 0]] * (len(shape_of(op.x)) - len(pairs)) + pairs
    padding = _static([size for pair in widths for size in pair], np.uint32)
    return ai.ai.pad(ai.value(op.x), padding, ai.scalar(ai.param(op, "constant_val"), op.x))
