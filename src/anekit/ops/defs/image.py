"""Image resizing and cropping ops: upsampling, resizing, crops and affine warps.

The bilinear ops sample the input on the grid of a MIL ``sampling_mode`` (see
:func:`grid`) and interpolate between the four pixels around each grid point; the
nearest-neighbour ops pick one pixel. Definitions: coremltools'
``mil/ops/defs/iOS15|16|17/image_resizing.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from anekit.errors import ProgramError, UnsupportedOpError
from anekit.ops.defs._util import out_shape
from anekit.ops.registry import OpContext, register


def grid(length: Any, count: int, mode: str) -> Any:
    """``count`` sample points on [0, length] for MIL's ``sampling_mode`` (iOS15
    ``resize_bilinear``, whose input grid [0, X-1] has length X-1), on a new last axis.

    ``length`` may be an array of box extents (``crop_resize``); a negative one (an
    inverted box) mirrors the grid, as coremltools' inverted-box crop_resize test expects.
    """
    extent = np.abs(np.asarray(length, np.float64))[..., None]
    size, i = extent + 1, np.arange(count, dtype=np.float64)
    if mode in ("STRICT_ALIGN_CORNERS", "ALIGN_CORNERS"):
        points = i * extent / max(count - 1, 1)
        if mode == "ALIGN_CORNERS" and count == 1:
            points = extent / 2
    elif mode == "DEFAULT":
        points = i * size / count  # spacing (X - X/N) / (N - 1) = X/N
    elif mode == "OFFSET_CORNERS":
        points = (i + 0.5) * np.maximum(extent, 1) / count
    elif mode == "UNALIGN_CORNERS":
        points = (i + 0.5) * size / count - 0.5
    else:
        raise ValueError(f"unknown sampling_mode {mode!r}")
    return np.sign(np.asarray(length, np.float64))[..., None] * np.clip(points, 0, extent)


def _bilinear(x: np.ndarray, lead: tuple[Any, ...], rows: Any, cols: Any) -> Any:
    """``x[*lead, r, c]`` interpolated bilinearly at the points ``rows`` x ``cols``
    (clamped to the image), broadcasting ``lead`` with ``rows[..., :, None]`` and
    ``cols[..., None, :]``."""
    height, width = x.shape[-2:]
    r = np.clip(rows, 0, height - 1)[..., :, None]
    c = np.clip(cols, 0, width - 1)[..., None, :]
    r0, c0 = np.floor(r).astype(np.intp), np.floor(c).astype(np.intp)
    r1, c1 = np.minimum(r0 + 1, height - 1), np.minimum(c0 + 1, width - 1)
    fr, fc = (r - r0).astype(np.float32), (c - c0).astype(np.float32)
    top = x[(*lead, r0, c0)] * (1 - fc) + x[(*lead, r0, c1)] * fc
    bottom = x[(*lead, r1, c0)] * (1 - fc) + x[(*lead, r1, c1)] * fc
    return top * (1 - fr) + bottom * fr


def _resample(
    x: Any, height: int, width: int, mode: str, linear: bool = True, axes: int = 2
) -> Any:
    """The last two axes of ``x`` resized to ``(height, width)`` on ``mode``'s grid (only
    the last ``axes`` of them); nearest neighbour takes the pixel nearest each point."""
    x = np.asarray(x)
    rows, cols = (
        grid(n - 1, m, mode) if axes > k else np.arange(n, dtype=np.float64)
        for k, n, m in ((1, x.shape[-2], height), (0, x.shape[-1], width))
    )
    if linear:
        return _bilinear(x, (Ellipsis,), rows, cols)
    nearest = [np.floor(p + 0.5).astype(np.intp) for p in (rows, cols)]
    return x[..., nearest[0][:, None], nearest[1][None, :]]


def _scaled_size(ctx: OpContext, x: Any, scale_h: Any, scale_w: Any) -> tuple[int, int]:
    """The output (H, W) of an upsample: floor(size * scale), as MIL's type inference."""
    declared = out_shape(ctx)
    if declared is not None:
        return declared[-2], declared[-1]
    h, w = np.shape(x)[-2:]
    return int(np.floor(scale_h * h)), int(np.floor(scale_w * w))


@register("upsample_nearest_neighbor")
def upsample_nearest_neighbor(
    ctx: OpContext, x: Any, scale_factor_height: Any, scale_factor_width: Any
) -> Any:
    """Output pixel (i, j) is input pixel (floor(i / scale_h), floor(j / scale_w))."""
    height, width = _scaled_size(ctx, x, scale_factor_height, scale_factor_width)
    rows = (np.arange(height) / float(scale_factor_height)).astype(np.int64)
    cols = (np.arange(width) / float(scale_factor_width)).astype(np.int64)
    return np.asarray(x)[..., rows[:, None], cols[None, :]]


@register("upsample_bilinear")
def upsample_bilinear(
    ctx: OpContext,
    x: Any,
    scale_factor_height: Any,
    scale_factor_width: Any,
    align_corners: Any,
    half_pixel_centers: Any = None,  # iOS15's upsample_bilinear lacks it; iOS16's: absent
) -> Any:
    """Bilinear upsampling; the spacing is recomputed from the output size (MIL iOS15/16).

    align_corners is STRICT_ALIGN_CORNERS, otherwise half_pixel_centers (iOS16, default
    ``not align_corners``) is UNALIGN_CORNERS and its absence DEFAULT (TensorFlow's
    ResizeBilinear, as the docs say). Both set, which TensorFlow refuses and MIL does not
    define: align_corners wins.
    """
    half = not align_corners if half_pixel_centers is None else bool(half_pixel_centers)
    mode = "STRICT_ALIGN_CORNERS" if align_corners else "UNALIGN_CORNERS" if half else "DEFAULT"
    return _resample(x, *_scaled_size(ctx, x, scale_factor_height, scale_factor_width), mode)


@register("resize_bilinear")
def resize_bilinear(
    ctx: OpContext,
    x: Any,
    target_size_height: Any,
    target_size_width: Any,
    sampling_mode: Any,
) -> Any:
    return _resample(x, int(target_size_height), int(target_size_width), str(sampling_mode))


@register("resize_nearest_neighbor")
def resize_nearest_neighbor(
    ctx: OpContext, x: Any, target_size_height: Any, target_size_width: Any
) -> Any:
    """Input pixel floor((i + 0.5) * in / out): TensorFlow's ResizeNearestNeighbor with
    half_pixel_centers, which coremltools converts to this op (its docs give no formula)."""
    return _resample(
        x, int(target_size_height), int(target_size_width), "UNALIGN_CORNERS", linear=False
    )


@register("resize")
def resize(
    ctx: OpContext,
    x: Any,
    shape: Any,
    resized_dims: Any,
    interpolation_mode: Any,
    sampling_mode: Any,
) -> Any:
    """iOS17 ``resize``: the last ``resized_dims`` axes take their sizes from the end of
    ``shape`` (0 keeps x's size). NEAREST_NEIGHBOR with DEFAULT sampling is
    ``resize_nearest_neighbor`` (coremltools' TensorFlow converter uses the two
    interchangeably); with another mode, the pixel nearest each grid point."""
    count = int(resized_dims)
    if count > 2:
        raise UnsupportedOpError(
            f"op {ctx.op.name!r} (resize) resizes the last {count} axes; the simulator "
            "resizes at most the last two (resized_dims <= 2)"
        )
    sizes = list(np.shape(x))
    tail = [int(s) for s in np.asarray(shape).reshape(-1)][np.size(shape) - count :]
    for axis, size in zip(range(len(sizes) - count, len(sizes)), tail, strict=True):
        sizes[axis] = size or sizes[axis]
    mode, linear = str(sampling_mode), str(interpolation_mode) == "LINEAR"
    if not linear and mode == "DEFAULT":
        mode = "UNALIGN_CORNERS"
    return _resample(x, sizes[-2], sizes[-1], mode, linear, count)


@register("crop")
def crop(ctx: OpContext, x: Any, crop_height: Any, crop_width: Any) -> Any:
    top, bottom = (int(v) for v in np.asarray(crop_height).reshape(-1))
    left, right = (int(v) for v in np.asarray(crop_width).reshape(-1))
    height, width = np.shape(x)[-2:]
    return np.asarray(x)[..., top : height - bottom, left : width - right]


@register("crop_resize")
def crop_resize(
    ctx: OpContext,
    x: Any,
    roi: Any = None,  # iOS15/16 only
    boxes: Any = None,  # iOS17 only, with box_indices
    box_indices: Any = None,
    pad_value: Any = 0.0,  # iOS15's crop_resize has no pad_value
    *,
    target_height: Any,
    target_width: Any,
    normalized_coordinates: Any,
    spatial_scale: Any,
    box_coordinate_mode: Any,
    sampling_mode: Any,
) -> Any:
    """Each box resampled bilinearly to the target size; grid points outside the image
    take ``pad_value`` (TensorFlow's crop_and_resize ``extrapolation_value``).

    The box [start, end] along an axis plays the input grid [0, X-1] of
    ``resize_bilinear``'s sampling modes; a CENTER_SIZE box spans center -+ size / 2.
    iOS15/16 ``roi`` is [N, 1, 4 or 5, 1, 1] (5: an image index first; 4: every box on
    every image, output [N, B, ...]); iOS17 ``boxes`` [N, 4] with ``box_indices``.
    """
    x = np.asarray(x)
    batch, channels, height, width = x.shape
    if boxes is None:
        coords = np.asarray(roi, np.float64).reshape(np.shape(roi)[0], -1)
        if coords.shape[1] == 5:
            images, coords = coords[:, :1].astype(np.intp), coords[:, 1:]
        else:
            images = np.broadcast_to(np.arange(batch), (len(coords), batch))
    else:
        coords = np.asarray(boxes, np.float64)
        images = np.asarray(box_indices).astype(np.intp).reshape(len(coords), 1)
    a, b, c, d = coords.T
    mode = str(box_coordinate_mode)
    if mode.endswith("WIDTH_FIRST"):
        a, b, c, d = b, a, d, c
    if mode.startswith("CENTER_SIZE"):
        a, b, c, d = a - c / 2, b - d / 2, a + c / 2, b + d / 2
    scale = float(spatial_scale)
    scale_h, scale_w = (scale * (n - 1 if normalized_coordinates else 1) for n in (height, width))
    rows = a[:, None] * scale_h + grid((c - a) * scale_h, int(target_height), str(sampling_mode))
    cols = b[:, None] * scale_w + grid((d - b) * scale_w, int(target_width), str(sampling_mode))
    rows, cols = rows[:, None, None, :], cols[:, None, None, :]
    lead = (images[:, :, None, None, None], np.arange(channels)[:, None, None])
    inside = ((rows >= 0) & (rows <= height - 1))[..., :, None] & (
        (cols >= 0) & (cols <= width - 1)
    )[..., None, :]
    result = np.where(inside, _bilinear(x, lead, rows, cols), np.float32(pad_value))
    if boxes is not None:
        return result[:, 0]
    # MIL's iOS15/16 type inference declares [N, B, ...] for 5 coordinates too (its docs
    # [N, 1, ...]): each box's crop is repeated to fit.
    declared = out_shape(ctx)
    return result if declared is None else np.broadcast_to(result, declared)


def _affine_axis(count: int, align_corners: bool) -> Any:
    """The normalized coordinates in [-1, 1] of ``count`` output pixels along an axis:
    the corner pixels' centers (align_corners) or their outer edges at -1 and 1; a single
    pixel sits at 0, as PyTorch's ``affine_grid`` (whose pair with ``grid_sample``
    coremltools converts to ``affine``) places it."""
    i = np.arange(count, dtype=np.float64)
    if count <= 1:
        return np.zeros(count)
    return -1 + 2 * i / (count - 1) if align_corners else (2 * i + 1) / count - 1


def _affine_source(coords: Any, size: int, align_corners: bool) -> Any:
    """Normalized coordinates [-1, 1] as pixel positions along an axis of ``size``:
    -1 and 1 are the centers (align_corners) or the outer edges of the corner pixels.
    Non-finite positions move outside the image, clamping keeps the floor in range."""
    points = (coords + 1) / 2 * (size - 1) if align_corners else ((coords + 1) * size - 1) / 2
    return np.clip(np.nan_to_num(points, nan=-2.0), -2.0, size + 1.0)


def _pixels(x: np.ndarray, rows: Any, cols: Any, pad: Any) -> Any:
    """``x`` [B, C, H, W] read at whole-pixel ``rows``/``cols`` [B, H2, W2]: ``pad`` where
    a position falls outside the image."""
    batch, channels, height, width = x.shape
    lead = (np.arange(batch)[:, None, None, None], np.arange(channels)[None, :, None, None])
    inside = (rows >= 0) & (rows <= height - 1) & (cols >= 0) & (cols <= width - 1)
    ri = np.clip(rows, 0, height - 1).astype(np.intp)[:, None]
    ci = np.clip(cols, 0, width - 1).astype(np.intp)[:, None]
    return np.where(inside[:, None], x[(*lead, ri, ci)], np.float32(pad))


def _sample_padded(x: np.ndarray, rows: Any, cols: Any, pad: Any) -> Any:
    """``x`` [B, C, H, W] sampled bilinearly at ``rows``/``cols`` [B, H2, W2] (pixel
    positions) with the image padded by ``pad`` all around: each of the four pixels
    around a point that falls outside the image reads ``pad``."""
    r0, c0 = np.floor(rows), np.floor(cols)
    fr, fc = (rows - r0).astype(np.float32), (cols - c0).astype(np.float32)

    def tap(r: Any, c: Any) -> Any:
        return _pixels(x, r, c, pad)

    fr, fc = fr[:, None], fc[:, None]
    top = tap(r0, c0) * (1 - fc) + tap(r0, c0 + 1) * fc
    bottom = tap(r0 + 1, c0) * (1 - fc) + tap(r0 + 1, c0 + 1) * fc
    return top * (1 - fr) + bottom * fr


@register("affine")
def affine(
    ctx: OpContext,
    x: Any,
    transform_matrix: Any,
    output_height: Any,
    output_width: Any,
    sampling_mode: Any,
    padding_mode: Any,
    padding_value: Any,
    coordinates_mode: Any,
    align_corners: Any,
) -> Any:
    """Output pixel (x, y) (w, h) samples the input at (x', y') = (a0 x + a1 y + a2,
    b0 x + b1 y + b2), rows of ``transform_matrix`` [D, 6] per image (D == 1: shared).

    Both (x, y) and (x', y') are in ``normalized_minus_one_to_one`` coordinates: the
    output pixel grid is PyTorch's ``affine_grid`` and the sampling its ``grid_sample``
    (coremltools converts that pair to this op; its TensorFlow converter's rescaling of
    ImageProjectiveTransform matrices says the same for align_corners). Bilinear with
    ``constant`` padding, the only modes coremltools builds (case-insensitive); it also
    refuses a non-zero padding_value, which the simulator pads with. MIL gives these
    inputs no defaults.
    """
    modes = {
        "sampling_mode": (str(sampling_mode), "bilinear"),
        "padding_mode": (str(padding_mode), "constant"),
        "coordinates_mode": (str(coordinates_mode), "normalized_minus_one_to_one"),
    }
    for name, (given, wanted) in modes.items():
        if given.lower() != wanted:
            raise UnsupportedOpError(
                f"op {ctx.op.name!r} (affine) has {name}={given!r}; the simulator (like "
                f"coremltools, which defines no other) runs only {name}={wanted!r}"
            )
    image = np.asarray(x)
    batch, _, height, width = image.shape
    matrix = np.asarray(transform_matrix, np.float64).reshape(-1, 6)
    if len(matrix) not in (1, batch):
        raise ProgramError(
            f"op {ctx.op.name!r} (affine): transform_matrix has {len(matrix)} rows for a "
            f"batch of {batch}; MIL wants 1 or {batch}"
        )
    matrix = np.broadcast_to(matrix, (batch, 6))[:, :, None, None]
    corners = bool(align_corners)
    ys = _affine_axis(int(output_height), corners)[:, None]
    xs = _affine_axis(int(output_width), corners)[None, :]
    a0, a1, a2, b0, b1, b2 = (matrix[:, k] for k in range(6))
    with np.errstate(all="ignore"):
        cols = _affine_source(a0 * xs + a1 * ys + a2, width, corners)
        rows = _affine_source(b0 * xs + b1 * ys + b2, height, corners)
        return _sample_padded(image, rows, cols, padding_value).astype(image.dtype)


def _resample_source(coords: Any, size: int, mode: str, align_corners: bool) -> Any:
    """``resample``'s coordinates along an axis of ``size`` as pixel positions (0 is the
    first pixel's center): ``unnormalized`` as given; ``normalized_minus_one_to_one`` and
    ``normalized_zero_to_one`` map their ends to the corner pixels' centers
    (align_corners) or their outer edges."""
    c = np.asarray(coords, np.float64)
    if mode == "unnormalized":
        return c
    if mode == "normalized_minus_one_to_one":
        return (c + 1) / 2 * (size - 1) if align_corners else ((c + 1) * size - 1) / 2
    if mode == "normalized_zero_to_one":
        return c * (size - 1) if align_corners else c * size - 0.5
    raise ProgramError(f"resample: unknown coordinates_mode {mode!r}")


def _fold(points: Any, size: int, padding_mode: str) -> Any:
    """Positions outside [0, size - 1] brought inside as MIL's padding modes read the
    image there: ``border`` clamps, ``reflection`` mirrors about the edge pixels' centers
    (``|1 2 3|`` -> ``2 3 2 1 2 3 2 1``), ``symmetric`` about their outer edges, the edge
    pixels repeated (``3 2 1 1 2 3 3 2 1``); ``constant`` leaves them (they read the pad)."""
    p = np.nan_to_num(np.asarray(points, np.float64), nan=-2.0, posinf=size + 1.0, neginf=-2.0)
    if padding_mode == "border":
        return np.clip(p, 0, size - 1)
    if padding_mode == "reflection":
        if size == 1:
            return np.zeros_like(p)
        period = 2 * (size - 1)
        t = np.mod(np.abs(p), period)
        return np.where(t > size - 1, period - t, t)
    if padding_mode == "symmetric":
        t = np.mod(p + 0.5, 2 * size)
        return np.where(t > size, 2 * size - t, t) - 0.5
    if padding_mode == "constant":
        return np.clip(p, -2.0, size + 1.0)  # beyond one pixel out, all taps read the pad
    raise ProgramError(f"resample: unknown padding_mode {padding_mode!r}")


@register("resample")
def resample(
    ctx: OpContext,
    x: Any,
    coordinates: Any,
    sampling_mode: Any,
    padding_mode: Any,
    padding_value: Any,
    coordinates_mode: Any,
    align_corners: Any,
) -> Any:
    """Output ``[b, c, h, w]`` samples ``x[b, c]`` at ``coordinates[b, h, w]`` = (x, y),
    as PyTorch's ``grid_sample`` does for the modes it shares (coremltools converts it to
    this op) and MIL's documentation defines for the others; its worked examples are
    coremltools' test of this op. ``nearest`` rounds half to even (``grid_sample``'s
    nearbyint), then reads the nearest pixel (constant padding: the pad outside)."""
    image = np.asarray(x)
    height, width = image.shape[2:]
    coords = np.asarray(coordinates)
    pad, corners, where = str(padding_mode), bool(align_corners), str(coordinates_mode)
    cols = _fold(_resample_source(coords[..., 0], width, where, corners), width, pad)
    rows = _fold(_resample_source(coords[..., 1], height, where, corners), height, pad)
    fill = float(np.asarray(padding_value)) if pad == "constant" else 0.0
    if str(sampling_mode) == "bilinear":
        if pad != "constant":  # every position is inside: no tap reads the pad
            rows, cols = np.clip(rows, 0, height - 1), np.clip(cols, 0, width - 1)
        result = _sample_padded(image, rows, cols, fill)
    elif str(sampling_mode) == "nearest":
        r, c = np.rint(rows), np.rint(cols)
        if pad != "constant":  # a position rounded half a pixel out reads the edge
            r, c = np.clip(r, 0, height - 1), np.clip(c, 0, width - 1)
        result = _pixels(image, r, c, fill)
    else:
        raise ProgramError(f"resample: unknown sampling_mode {sampling_mode!r}")
    return np.asarray(result, np.float32)
