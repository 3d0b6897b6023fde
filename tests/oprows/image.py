"""Op-table rows: Image resizing and cropping ops: upsampling, resizing, crops and l2 pooling.

References are loops over output pixels written from coremltools' MIL docs
(``mil/ops/defs/iOS15|16|17/image_resizing.py``, ``iOS15/pool.py``): the grid points of
each ``sampling_mode`` as ``resize_bilinear`` lists them, and the usual four-pixel
bilinear weights. Where the docs leave a case open the rows pin the simulator's choice:
a single STRICT_ALIGN_CORNERS point is 0 (TensorFlow's align_corners with one output);
``resize_nearest_neighbor`` (and ``resize`` NEAREST_NEIGHBOR with DEFAULT sampling) is
TensorFlow's half-pixel nearest neighbour, floor((i + 0.5) * in / out), which
coremltools' TensorFlow converter maps to them; other modes take the pixel nearest the
grid point; ``upsample_bilinear`` with both align_corners and half_pixel_centers aligns
corners; a ``crop_resize`` box [start, end] is the grid's [0, X-1] (X - 1 = end - start,
mirrored for an inverted box), a CENTER_SIZE box spans center -+ size / 2.

``crop_resize`` runs at the iOS17 opset here (``boxes``/``box_indices``): ``run_op``
builds iOS18 programs, so iOS15/16's ``roi`` input has no row.

``affine`` (iOS15, unchanged since) maps each output pixel's (x, y) to (x', y') with the
matrix rows, both in ``normalized_minus_one_to_one`` coordinates: -1 and 1 are the corner
pixels' centers with align_corners, their outer edges without (resample's docs); the
docs leave the output grid implicit, the rows pin PyTorch's ``affine_grid`` (coremltools
converts affine_grid + grid_sample to this op), a single output pixel at 0. One row is
checked against PyTorch itself, three against values worked out by hand. coremltools
builds only bilinear sampling with constant zero padding (the tests below pin that).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from oprows.table import ACCUM, F32, I32, OpRecord, fixed, normal, op_record, uniform
from oprows.windows import pool

RECORDS: list[OpRecord] = []

_RNG = np.random.default_rng(4242)

MODES = ["STRICT_ALIGN_CORNERS", "ALIGN_CORNERS", "DEFAULT", "OFFSET_CORNERS", "UNALIGN_CORNERS"]


def _doc_grid(size: float, count: int, mode: str) -> list[float]:
    """The grid points on [0, size - 1] for ``count`` outputs, from resize_bilinear's notes."""

    def clamp(value: float) -> float:
        return min(size - 1, max(0.0, value))

    if mode in ("STRICT_ALIGN_CORNERS", "ALIGN_CORNERS"):
        if count == 1:
            return [(size - 1) / 2 if mode == "ALIGN_CORNERS" else 0.0]
        spacing = (size - 1) / (count - 1)
        return [clamp(i * spacing) for i in range(count)]
    if mode == "DEFAULT":
        spacing = (size - size / count) / (count - 1) if count > 1 else 0.0
        return [clamp(i * spacing) for i in range(count)]
    if mode == "OFFSET_CORNERS":
        delta = max(1, size - 1) / count
        return [clamp(0.5 * delta + i * delta) for i in range(count)]
    assert mode == "UNALIGN_CORNERS"
    spacing = size / count
    return [clamp(i * spacing + 0.5 * spacing - 0.5) for i in range(count)]


def _sample(image: Any, y: float, x: float) -> Any:
    """image[..., y, x] weighted over the four pixels around (y, x)."""
    height, width = image.shape[-2:]
    y0, x0 = math.floor(y), math.floor(x)
    y1, x1 = min(y0 + 1, height - 1), min(x0 + 1, width - 1)
    dy, dx = y - y0, x - x0
    return (
        (1 - dy) * (1 - dx) * image[..., y0, x0]
        + (1 - dy) * dx * image[..., y0, x1]
        + dy * (1 - dx) * image[..., y1, x0]
        + dy * dx * image[..., y1, x1]
    )


def _on_grid(x: Any, rows: Sequence[float], cols: Sequence[float]) -> Any:
    out = np.empty((*x.shape[:-2], len(rows), len(cols)))
    for i, y in enumerate(rows):
        for j, c in enumerate(cols):
            out[..., i, j] = _sample(x, y, c)
    return out


def _pick(x: Any, rows: list[int], cols: list[int]) -> Any:
    return x[..., rows, :][..., cols]


def _half_pixel_nearest(size: int, count: int) -> list[int]:
    """TensorFlow's ResizeNearestNeighbor(half_pixel_centers=True) source indices."""
    return [min(math.floor((i + 0.5) * size / count), size - 1) for i in range(count)]


# --- upsample_bilinear, resize_bilinear ---------------------------------------


def _upsample_bilinear(
    x: Any,
    scale_factor_height: float = 1,
    scale_factor_width: float = 1,
    align_corners: bool = True,
    half_pixel_centers: bool | None = None,
) -> Any:
    """align_corners: STRICT_ALIGN_CORNERS; half_pixel_centers (default: not
    align_corners): UNALIGN_CORNERS; neither: DEFAULT (the docs' TensorFlow notes)."""
    height, width = x.shape[-2:]
    out_h = math.floor(height * scale_factor_height)
    out_w = math.floor(width * scale_factor_width)
    half = not align_corners if half_pixel_centers is None else half_pixel_centers
    mode = "STRICT_ALIGN_CORNERS" if align_corners else "UNALIGN_CORNERS" if half else "DEFAULT"
    return _on_grid(x, _doc_grid(height, out_h, mode), _doc_grid(width, out_w, mode))


def _resize_bilinear(
    x: Any, target_size_height: int = 1, target_size_width: int = 1, sampling_mode: str = "DEFAULT"
) -> Any:
    height, width = x.shape[-2:]
    return _on_grid(
        x,
        _doc_grid(height, target_size_height, sampling_mode),
        _doc_grid(width, target_size_width, sampling_mode),
    )


RECORDS += [
    op_record(
        "upsample_bilinear",
        _upsample_bilinear,
        normal(1, 2, 3, 4),
        tag="align_corners",
        ane=False,
        scale_factor_height=2,
        scale_factor_width=3,
        **ACCUM,
    ),
    op_record(
        "upsample_bilinear",
        _upsample_bilinear,
        normal(2, 3, 4),
        tag="half_pixel-fractional",
        ane=False,
        scale_factor_height=F32(2.5),
        scale_factor_width=F32(1.75),
        align_corners=False,
        **ACCUM,
    ),
    op_record(
        "upsample_bilinear",
        _upsample_bilinear,
        normal(1, 1, 3, 5),
        tag="asymmetric",
        ane=False,
        scale_factor_height=F32(2.0),
        scale_factor_width=F32(1.5),
        align_corners=False,
        half_pixel_centers=False,
        **ACCUM,
    ),
    op_record(
        "upsample_bilinear",
        _upsample_bilinear,
        normal(1, 2, 6, 4),
        tag="half_pixel-downscale",
        ane=False,
        scale_factor_height=F32(0.5),
        scale_factor_width=F32(0.75),
        align_corners=False,
        half_pixel_centers=True,
        **ACCUM,
    ),
    op_record(
        "upsample_bilinear",
        _upsample_bilinear,
        normal(1, 2, 3, 4),
        tag="align_corners-and-half_pixel",
        ane=False,
        scale_factor_height=2,
        scale_factor_width=2,
        align_corners=True,
        half_pixel_centers=True,
        **ACCUM,
    ),
    op_record(
        "upsample_bilinear",
        _upsample_bilinear,
        normal(1, 1, 2, 3),
        tag="align_corners-one-row",
        ane=False,
        scale_factor_height=F32(0.5),
        scale_factor_width=F32(2.0),
        **ACCUM,
    ),
    op_record("upsample_bilinear", _upsample_bilinear, normal(2, 3, 4), tag="rank3-default"),
]
for _mode in MODES:
    RECORDS.append(
        op_record(
            "resize_bilinear",
            _resize_bilinear,
            normal(1, 2, 4, 5),
            tag=_mode,
            ane=False,
            target_size_height=7,
            target_size_width=3,
            sampling_mode=_mode,
            **ACCUM,
        )
    )
RECORDS += [
    op_record(
        "resize_bilinear",
        _resize_bilinear,
        normal(2, 3, 4),
        tag=f"{_mode}-one-point",
        ane=False,
        target_size_height=1,
        target_size_width=5,
        sampling_mode=_mode,
        **ACCUM,
    )
    for _mode in ("STRICT_ALIGN_CORNERS", "ALIGN_CORNERS")
]
RECORDS.append(
    op_record("resize_bilinear", _resize_bilinear, normal(1, 3, 3), tag="default", **ACCUM)
)


# --- resize_nearest_neighbor, resize ------------------------------------------


def _resize_nearest_neighbor(x: Any, target_size_height: int, target_size_width: int) -> Any:
    height, width = x.shape[-2:]
    return _pick(
        x,
        _half_pixel_nearest(height, target_size_height),
        _half_pixel_nearest(width, target_size_width),
    )


def _resize(
    x: Any,
    shape: Any,
    resized_dims: Any,
    interpolation_mode: str = "LINEAR",
    sampling_mode: str = "DEFAULT",
) -> Any:
    """The last ``resized_dims`` axes take sizes from the end of ``shape`` (0: keep)."""
    count = int(resized_dims)
    sizes = list(x.shape)
    wanted = list(np.asarray(shape).reshape(-1))
    for k in range(1, count + 1):
        sizes[-k] = int(wanted[-k]) or sizes[-k]
    height, width = x.shape[-2:]
    out_h, out_w = sizes[-2:]
    if interpolation_mode == "LINEAR":
        rows = _doc_grid(height, out_h, sampling_mode) if count == 2 else list(range(height))
        return _on_grid(x, rows, _doc_grid(width, out_w, sampling_mode))
    if sampling_mode == "DEFAULT":
        rows = _half_pixel_nearest(height, out_h) if count == 2 else list(range(height))
        return _pick(x, rows, _half_pixel_nearest(width, out_w))
    nearest = [
        [math.floor(p + 0.5) for p in _doc_grid(n, m, sampling_mode)]
        for n, m in ((height, out_h), (width, out_w))
    ]
    return _pick(x, nearest[0] if count == 2 else list(range(height)), nearest[1])


RECORDS += [
    op_record(
        "resize_nearest_neighbor",
        _resize_nearest_neighbor,
        normal(1, 2, 2, 3),
        tag="integer-up",
        target_size_height=4,
        target_size_width=9,
    ),
    op_record(
        "resize_nearest_neighbor",
        _resize_nearest_neighbor,
        normal(2, 3, 4),
        tag="fractional-up",
        target_size_height=5,
        target_size_width=7,
    ),
    op_record(
        "resize_nearest_neighbor",
        _resize_nearest_neighbor,
        normal(1, 1, 2, 4, 6),
        tag="down",
        target_size_height=2,
        target_size_width=4,
    ),
    op_record(
        "resize",
        _resize,
        normal(1, 2, 3, 4),
        tag="linear-default",
        ane=False,
        shape=np.array([1, 2, 5, 7], I32),
        resized_dims=np.uint32(2),
        **ACCUM,
    ),
    op_record(
        "resize",
        _resize,
        normal(2, 3, 4),
        fixed([0, 6], I32),
        tag="linear-shape-input-keeps-height",
        ane=False,
        resized_dims=np.uint32(2),
        sampling_mode="ALIGN_CORNERS",
        **ACCUM,
    ),
    op_record(
        "resize",
        _resize,
        normal(1, 3, 4, 5),
        tag="linear-width-only",
        ane=False,
        shape=np.array([9, 3], I32),
        resized_dims=np.uint32(1),
        sampling_mode="UNALIGN_CORNERS",
        **ACCUM,
    ),
    op_record(
        "resize",
        _resize,
        normal(1, 2, 4, 5),
        tag="linear-offset_corners",
        ane=False,
        shape=np.array([3, 8], I32),
        resized_dims=np.uint32(2),
        sampling_mode="OFFSET_CORNERS",
        **ACCUM,
    ),
    op_record(
        "resize",
        _resize,
        normal(1, 2, 4, 6),
        tag="nearest-default",
        shape=np.array([1, 2, 7, 3], I32),
        resized_dims=np.uint32(2),
        interpolation_mode="NEAREST_NEIGHBOR",
    ),
    op_record(
        "resize",
        _resize,
        normal(2, 3, 4),
        tag="nearest-strict_align_corners",
        shape=np.array([6, 7], I32),
        resized_dims=np.uint32(2),
        interpolation_mode="NEAREST_NEIGHBOR",
        sampling_mode="STRICT_ALIGN_CORNERS",
    ),
    op_record(
        "resize",
        _resize,
        normal(1, 1, 5, 4),
        tag="nearest-offset_corners-width-only",
        shape=np.array([6], I32),
        resized_dims=np.uint32(1),
        interpolation_mode="NEAREST_NEIGHBOR",
        sampling_mode="OFFSET_CORNERS",
    ),
]


# --- crop, crop_resize ----------------------------------------------------------


def _crop(x: Any, crop_height: Any, crop_width: Any) -> Any:
    height, width = x.shape[-2:]
    return x[..., crop_height[0] : height - crop_height[1], crop_width[0] : width - crop_width[1]]


def _box_points(start: float, end: float, count: int, mode: str) -> list[float]:
    """The grid over the box [start, end], whose extent plays [0, X-1]."""
    step = 1.0 if end >= start else -1.0
    return [start + step * g for g in _doc_grid(abs(end - start) + 1, count, mode)]


def _crop_resize(
    x: Any,
    boxes: Any,
    box_indices: Any = None,
    target_height: int = 1,
    target_width: int = 1,
    normalized_coordinates: bool = False,
    spatial_scale: float = 1.0,
    box_coordinate_mode: str = "CORNERS_HEIGHT_FIRST",
    sampling_mode: str = "DEFAULT",
    pad_value: float = 0.0,
) -> Any:
    _, channels, height, width = x.shape
    indices = range(len(boxes)) if box_indices is None else box_indices
    out = np.empty((len(boxes), channels, target_height, target_width))
    for n, (box, image) in enumerate(zip(boxes, indices, strict=True)):
        if box_coordinate_mode == "CORNERS_HEIGHT_FIRST":
            h0, w0, h1, w1 = box
        elif box_coordinate_mode == "CORNERS_WIDTH_FIRST":
            w0, h0, w1, h1 = box
        else:
            if box_coordinate_mode == "CENTER_SIZE_HEIGHT_FIRST":
                hc, wc, hs, ws = box
            else:
                wc, hc, ws, hs = box
            h0, h1, w0, w1 = hc - hs / 2, hc + hs / 2, wc - ws / 2, wc + ws / 2
        sh = spatial_scale * ((height - 1) if normalized_coordinates else 1)
        sw = spatial_scale * ((width - 1) if normalized_coordinates else 1)
        rows = _box_points(h0 * sh, h1 * sh, target_height, sampling_mode)
        cols = _box_points(w0 * sw, w1 * sw, target_width, sampling_mode)
        for i, y in enumerate(rows):
            for j, c in enumerate(cols):
                inside = 0 <= y <= height - 1 and 0 <= c <= width - 1
                out[n, :, i, j] = _sample(x[image], y, c) if inside else pad_value
    return out


RECORDS += [
    op_record(
        "crop",
        _crop,
        normal(1, 2, 5, 6),
        tag="rank4",
        crop_height=np.array([1, 2], I32),
        crop_width=np.array([0, 3], I32),
    ),
    op_record(
        "crop",
        _crop,
        normal(3, 4, 4),
        tag="rank3",
        crop_height=np.array([0, 0], I32),
        crop_width=np.array([2, 1], I32),
    ),
    op_record(
        "crop",
        _crop,
        normal(2, 1, 2, 3, 5),
        tag="rank5",
        crop_height=np.array([1, 1], I32),
        crop_width=np.array([1, 1], I32),
    ),
]


def _crop_row(tag: str, x: Any, *inputs: Any, **attrs: Any) -> OpRecord:
    return op_record("crop_resize", _crop_resize, x, *inputs, tag=tag, ane=False, **attrs, **ACCUM)


RECORDS += [
    _crop_row(
        "corners_height_first-align_corners",
        normal(2, 3, 5, 6),
        fixed([[0.5, 1.0, 3.5, 4.0], [1.0, 0.25, 2.0, 5.0]]),
        target_height=3,
        target_width=4,
        sampling_mode="ALIGN_CORNERS",
    ),
    _crop_row(
        "corners_width_first-box_indices",
        normal(2, 2, 5, 6),
        fixed([[0.5, 1.0, 3.5, 4.0], [1.0, 0.25, 5.0, 2.0], [0.0, 0.0, 5.0, 4.0]]),
        fixed([1, 0, 1], I32),
        target_height=2,
        target_width=3,
        box_coordinate_mode="CORNERS_WIDTH_FIRST",
        sampling_mode="STRICT_ALIGN_CORNERS",
    ),
    _crop_row(
        "center_size_height_first-default",
        normal(1, 2, 6, 6),
        fixed([[2.5, 2.0, 3.0, 2.5], [3.0, 3.0, 4.5, 5.0]]),
        fixed([0, 0], I32),
        target_height=4,
        target_width=3,
        box_coordinate_mode="CENTER_SIZE_HEIGHT_FIRST",
        sampling_mode="DEFAULT",
    ),
    _crop_row(
        "center_size_width_first-offset_corners-spatial_scale",
        normal(2, 2, 6, 7),
        fixed([[6.0, 5.0, 8.0, 4.0], [4.0, 7.0, 10.0, 9.0]]),
        target_height=3,
        target_width=2,
        spatial_scale=F32(0.5),
        box_coordinate_mode="CENTER_SIZE_WIDTH_FIRST",
        sampling_mode="OFFSET_CORNERS",
    ),
    _crop_row(
        "normalized-strict_align_corners",
        normal(1, 2, 5, 5),
        fixed([[0.125, 0.25, 0.625, 0.875], [0.5, 0.0, 0.75, 0.5]]),
        fixed([0, 0], I32),
        target_height=3,
        target_width=3,
        normalized_coordinates=True,
        sampling_mode="STRICT_ALIGN_CORNERS",
    ),
    _crop_row(
        "unalign_corners",
        normal(2, 1, 5, 6),
        fixed([[0.5, 1.0, 3.5, 4.5], [1.0, 0.0, 4.0, 3.0]]),
        target_height=4,
        target_width=3,
        sampling_mode="UNALIGN_CORNERS",
    ),
    _crop_row(
        "pad_value-outside",
        normal(1, 2, 4, 4),
        fixed([[-1.5, 0.5, 2.5, 2.0], [1.0, 2.5, 2.0, 5.5], [4.25, 1.0, 5.0, 2.0]]),
        fixed([0, 0, 0], I32),
        target_height=3,
        target_width=3,
        sampling_mode="ALIGN_CORNERS",
        pad_value=F32(-1.5),
    ),
    _crop_row(
        "inverted-box",
        normal(1, 2, 4, 5),
        fixed([[3.0, 3.5, 0.5, 1.0]]),
        target_height=3,
        target_width=2,
        sampling_mode="ALIGN_CORNERS",
    ),
    _crop_row(
        "one-point-align_corners",
        normal(1, 2, 4, 5),
        fixed([[0.5, 1.0, 2.5, 4.0]]),
        target_height=1,
        target_width=1,
        sampling_mode="ALIGN_CORNERS",
    ),
    _crop_row(
        "const-boxes-default",
        normal(2, 3, 6, 5),
        box_indices=np.array([1, 0, 0, 1], I32),
        boxes=_RNG.uniform(-1, 6, (4, 4)).astype(F32),
        target_height=3,
        target_width=4,
        pad_value=F32(2.0),
    ),
]


# --- l2_pool -------------------------------------------------------------------


def _l2_pool(x: Any, **attrs: Any) -> Any:
    """sqrt(sum of squares) over each window; padded positions count as zeros."""
    return pool(x, kind="l2", **attrs)


RECORDS += [
    op_record(
        "l2_pool",
        _l2_pool,
        normal(1, 2, 6, 6),
        tag="2x2-stride2",
        ane=False,
        kernel_sizes=[2, 2],
        strides=[2, 2],
        pad_type="valid",
        **ACCUM,
    ),
    op_record(
        "l2_pool",
        _l2_pool,
        normal(2, 2, 5, 5),
        tag="3x3-same",
        ane=False,
        kernel_sizes=[3, 3],
        strides=[2, 2],
        pad_type="same",
        **ACCUM,
    ),
    op_record(
        "l2_pool",
        _l2_pool,
        normal(1, 2, 6, 5),
        tag="custom-stride",
        ane=False,
        kernel_sizes=[3, 2],
        strides=[2, 1],
        pad_type="custom",
        pad=[1, 1, 0, 1],
        **ACCUM,
    ),
    op_record(
        "l2_pool",
        _l2_pool,
        normal(1, 2, 5, 5),
        tag="ceil_mode",
        ane=False,
        kernel_sizes=[2, 2],
        strides=[2, 2],
        pad_type="valid",
        ceil_mode=True,
        **ACCUM,
    ),
    op_record(
        "l2_pool",
        _l2_pool,
        normal(2, 3, 7),
        tag="1d",
        ane=False,
        kernel_sizes=[3],
        strides=[2],
        pad_type="valid",
        **ACCUM,
    ),
]


# --- affine -----------------------------------------------------------------------


def _normalized(index: int, count: int, align_corners: bool) -> float:
    """Output pixel ``index`` of ``count`` in [-1, 1]: corner pixel centers at -1 and 1
    (align_corners) or corner pixel edges there (each pixel's center then)."""
    if count == 1:
        return 0.0
    if align_corners:
        return -1 + 2 * index / (count - 1)
    return -1 + 2 * (index + 0.5) / count


def _pixel(coord: float, size: int, align_corners: bool) -> float:
    """A normalized coordinate as a pixel position (pixel k's center at k)."""
    if align_corners:
        return (coord + 1) / 2 * (size - 1)
    return (coord + 1) / 2 * size - 0.5


def _padded_sample(image: Any, y: float, x: float, pad: float) -> Any:
    """image[:, y, x] weighted over the four pixels around (y, x), those outside the
    image reading ``pad`` (the image "padded with the padding_value")."""
    height, width = image.shape[-2:]
    y0, x0 = math.floor(y), math.floor(x)
    total = np.zeros(image.shape[0])
    for r, wr in ((y0, 1 - (y - y0)), (y0 + 1, y - y0)):
        for c, wc in ((x0, 1 - (x - x0)), (x0 + 1, x - x0)):
            inside = 0 <= r < height and 0 <= c < width
            total = total + wr * wc * (image[:, r, c] if inside else pad)
    return total


def _affine(
    x: Any,
    transform_matrix: Any,
    output_height: int,
    output_width: int,
    sampling_mode: str,
    padding_mode: str,
    padding_value: float,
    coordinates_mode: str,
    align_corners: bool,
) -> Any:
    """x' = a0 x + a1 y + a2, y' = b0 x + b1 y + b2 per output pixel, sampled bilinearly."""
    assert sampling_mode.lower() == "bilinear" and padding_mode.lower() == "constant"
    assert coordinates_mode == "normalized_minus_one_to_one"
    batch, channels, height, width = x.shape
    out = np.empty((batch, channels, output_height, output_width))
    for b in range(batch):
        a0, a1, a2, b0, b1, b2 = transform_matrix[b if len(transform_matrix) > 1 else 0]
        for i in range(output_height):
            yn = _normalized(i, output_height, align_corners)
            for j in range(output_width):
                xn = _normalized(j, output_width, align_corners)
                px = _pixel(a0 * xn + a1 * yn + a2, width, align_corners)
                py = _pixel(b0 * xn + b1 * yn + b2, height, align_corners)
                out[b, :, i, j] = _padded_sample(x[b], py, px, padding_value)
    return out


def _affine_torch(
    x: Any,
    transform_matrix: Any,
    output_height: int,
    output_width: int,
    align_corners: bool,
    **_: Any,
) -> Any:
    """PyTorch's affine_grid + grid_sample (bilinear, zeros), in float64."""
    torch = pytest.importorskip("torch")
    batch, channels = x.shape[:2]
    theta = np.broadcast_to(np.reshape(transform_matrix, (-1, 6)), (batch, 6)).reshape(-1, 2, 3)
    size = [batch, channels, output_height, output_width]
    grid = torch.nn.functional.affine_grid(
        torch.tensor(theta, dtype=torch.float64), size, align_corners=align_corners
    )
    return torch.nn.functional.grid_sample(
        torch.tensor(x, dtype=torch.float64),
        grid,
        mode="bilinear",
        padding_mode="zeros",
        align_corners=align_corners,
    ).numpy()


_AFFINE_MODES = {
    "sampling_mode": "bilinear",
    "padding_mode": "constant",
    "padding_value": F32(0.0),
    "coordinates_mode": "normalized_minus_one_to_one",
}


def _affine_row(tag: str, ref: Any, *inputs: Any, **attrs: Any) -> OpRecord:
    return op_record(
        "affine", ref, *inputs, tag=tag, ane=False, **{**_AFFINE_MODES, **attrs}, **ACCUM
    )


def _given(values: Any) -> Any:
    """A reference that is a hand-computed result."""
    return lambda *inputs, **attrs: np.asarray(values, np.float64)


_RAMP = [[[[1.0, 2.0], [3.0, 4.0]]]]  # f(r, c) = 1 + c + 2 r: bilinear sampling is exact

RECORDS += [
    _affine_row(
        "align_corners-shared-matrix",
        _affine,
        normal(2, 3, 4, 5),
        fixed([[0.8, -0.3, 0.1, 0.25, 0.9, -0.2]]),
        output_height=4,
        output_width=5,
        align_corners=True,
    ),
    _affine_row(
        "half_pixel-matrix-per-image-padding",
        _affine,
        normal(3, 2, 5, 4),
        uniform(-1.5, 1.5, 3, 6),
        output_height=6,
        output_width=3,
        align_corners=False,
    ),
    _affine_row(
        "upper-case-modes-one-row",
        _affine,
        normal(1, 2, 3, 4),
        fixed([[1.2, 0.0, 0.3, 0.0, 0.7, -0.1]]),
        output_height=1,
        output_width=6,
        sampling_mode="BILINEAR",
        padding_mode="CONSTANT",
        align_corners=False,
    ),
    _affine_row(
        "one-pixel-align_corners",
        _affine,
        normal(2, 1, 4, 4),
        fixed([[0.5, 0.0, 0.2, 0.0, 0.5, -0.4], [1.0, 0.0, 1.5, 0.0, 1.0, 0.0]]),
        output_height=1,
        output_width=1,
        align_corners=True,
    ),
    _affine_row(
        "torch-affine_grid-grid_sample",
        _affine_torch,
        normal(2, 3, 6, 5),
        uniform(-1.3, 1.3, 2, 6),
        output_height=7,
        output_width=4,
        align_corners=False,
    ),
    _affine_row(
        "torch-affine_grid-grid_sample-align_corners",
        _affine_torch,
        normal(2, 2, 5, 6),
        uniform(-1.3, 1.3, 1, 6),
        output_height=3,
        output_width=8,
        align_corners=True,
    ),
    # Identity on a 3x3 grid: corners at pixel centers, midpoints between them.
    _affine_row(
        "hand-identity-upsample",
        _given([[[[1.0, 1.5, 2.0], [2.0, 2.5, 3.0], [3.0, 3.5, 4.0]]]]),
        fixed(_RAMP),
        fixed([[1.0, 0.0, 0.0, 0.0, 1.0, 0.0]]),
        output_height=3,
        output_width=3,
        align_corners=True,
    ),
    # Output centers -+0.5 scaled to -+0.25, i.e. pixel positions 0.25 and 0.75.
    _affine_row(
        "hand-half-scale",
        _given([[[[1.75, 2.25], [2.75, 3.25]]]]),
        fixed(_RAMP),
        fixed([[0.5, 0.0, 0.0, 0.0, 0.5, 0.0]]),
        output_height=2,
        output_width=2,
        align_corners=False,
    ),
    # Shifted right by half the image: columns 0.5 and 1.5, the latter half padding.
    _affine_row(
        "hand-shift-into-padding",
        _given([[[[1.5, 1.0], [3.5, 2.0]]]]),
        fixed(_RAMP),
        fixed([[1.0, 0.0, 1.0, 0.0, 1.0, 0.0]]),
        output_height=2,
        output_width=2,
        align_corners=True,
    ),
]


def _affine_program(**changes: Any) -> dict[str, Any]:
    attrs = {**_AFFINE_MODES, "output_height": 2, "output_width": 2, "align_corners": True}
    return {**attrs, **changes}


@pytest.mark.parametrize(
    "changes",
    [
        {"sampling_mode": "nearest"},
        {"padding_mode": "border"},
        {"padding_mode": "reflection"},
        {"padding_mode": "symmetric"},
        {"padding_value": F32(1.0)},
        {"coordinates_mode": "unnormalized"},
        {"coordinates_mode": "normalized_zero_to_one"},
    ],
    ids=lambda changes: "-".join(f"{k}={v}" for k, v in changes.items()),
)
def test_affine_modes_coremltools_refuses_to_build(changes: dict[str, Any]) -> None:
    """coremltools 9 (iOS15 affine, also at iOS18) builds only bilinear, constant zero
    padding, normalized_minus_one_to_one: a program cannot hold another affine."""
    from anekit import sim

    x, matrix = np.zeros((1, 1, 2, 2), F32), np.zeros((1, 6), F32)
    with pytest.raises(NotImplementedError, match="not implemented"):
        sim.run_op("affine", x, matrix, numerics="fp32", **_affine_program(**changes))


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("sampling_mode", "nearest"),
        ("padding_mode", "border"),
        ("coordinates_mode", "normalized_zero_to_one"),
    ],
)
def test_affine_simulator_refuses_other_modes(name: str, value: str) -> None:
    """Were one to reach it, the simulator names the op and the mode it does not run."""
    from types import SimpleNamespace

    from anekit.errors import UnsupportedOpError
    from anekit.ops.registry import OpContext, record

    impl = record("affine").reference
    assert impl is not None
    ctx = OpContext(numerics=None, op=SimpleNamespace(name="warp", op_type="affine"))  # type: ignore[arg-type]
    x, matrix = np.zeros((1, 1, 2, 2), F32), np.zeros((1, 6), F32)
    with pytest.raises(UnsupportedOpError, match=rf"'warp' \(affine\).*{name}='{value}'"):
        impl(ctx, x, matrix, **_affine_program(**{name: value}))


def test_affine_padding_value_pads_when_called_directly() -> None:
    """coremltools refuses a non-zero padding_value; the simulator pads with it."""
    from types import SimpleNamespace

    from anekit.ops.registry import OpContext, record

    impl = record("affine").reference
    assert impl is not None
    ctx = OpContext(numerics=None, op=SimpleNamespace(name="warp", op_type="affine"))  # type: ignore[arg-type]
    x = np.asarray(_RAMP, F32)
    shift = np.asarray([[1.0, 0.0, 1.0, 0.0, 1.0, 0.0]], F32)
    attrs = _affine_program(padding_value=F32(-2.0))
    np.testing.assert_allclose(impl(ctx, x, shift, **attrs), [[[[1.5, 0.0], [3.5, 1.0]]]])
