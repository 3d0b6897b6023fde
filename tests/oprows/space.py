"""Op-table rows: space_to_batch and batch_to_space (MIL iOS15 ``tensor_transformation.py``,
unchanged through iOS18).

The MIL docs give only the shapes; the element order is TensorFlow's SpaceToBatchND /
BatchToSpaceND (coremltools converts those to these ops, after an NHWC -> NCHW
transpose): the offset (i, j) within a block is the major part of the new batch,
``out[(i * b_w + j) * N + n, c, h, w] = padded[n, c, h * b_h + i, w * b_w + j]``. One row
of each op is coremltools' own builder test, with its expected values.

coremltools 9 builds only rank-4 ``x`` with a block_shape of length 2 (the tests below
pin that it refuses length 1), so every row has two block axes.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from oprows.table import F32, I32, OpRecord, fixed, normal, op_record

RECORDS: list[OpRecord] = []


def _space_to_batch(x: Any, block_shape: Any, paddings: Any) -> Any:
    bh, bw = (int(b) for b in block_shape)
    (top, bottom), (left, right) = paddings
    n, c, h, w = x.shape
    padded = np.zeros((n, c, h + top + bottom, w + left + right))
    padded[:, :, top : top + h, left : left + w] = x
    out = np.empty((n * bh * bw, c, padded.shape[2] // bh, padded.shape[3] // bw))
    for ob, ch, oh, ow in itertools.product(*map(range, out.shape)):
        offset, image = divmod(ob, n)
        i, j = divmod(offset, bw)
        out[ob, ch, oh, ow] = padded[image, ch, oh * bh + i, ow * bw + j]
    return out


def _batch_to_space(x: Any, block_shape: Any, crops: Any) -> Any:
    bh, bw = (int(b) for b in block_shape)
    (top, bottom), (left, right) = crops
    batch, c, h, w = x.shape
    n = batch // (bh * bw)
    full = np.empty((n, c, h * bh, w * bw))
    for ob, ch, ih, iw in itertools.product(*map(range, x.shape)):
        offset, image = divmod(ob, n)
        i, j = divmod(offset, bw)
        full[image, ch, ih * bh + i, iw * bw + j] = x[ob, ch, ih, iw]
    return full[:, :, top : h * bh - bottom, left : w * bw - right]


def _pairs(values: Any) -> np.ndarray:
    return np.asarray(values, I32)


# coremltools' builder tests (mil/ops/tests/iOS14/test_tensor_transformation.py).
_CT_SPACE = [[[[1, 2, 3, 4], [5, 6, 7, 8]]], [[[9, 10, 11, 12], [13, 14, 15, 16]]]]
_CT_BATCH = [
    [[[0, 1, 3]]], [[[0, 9, 11]]], [[[0, 2, 4]]], [[[0, 10, 12]]],
    [[[0, 5, 7]]], [[[0, 13, 15]]], [[[0, 6, 8]]], [[[0, 14, 16]]],
]  # fmt: skip


def _given(values: Any) -> Any:
    return lambda *inputs, **attrs: np.asarray(values, np.float64)


RECORDS += [
    op_record(
        "space_to_batch",
        _space_to_batch,
        normal(2, 3, 4, 5),
        tag="2x2-padded",
        block_shape=_pairs([2, 2]),
        paddings=_pairs([[1, 1], [0, 1]]),
    ),
    op_record(
        "space_to_batch",
        _space_to_batch,
        normal(1, 2, 6, 4),
        tag="3x2-unpadded",
        block_shape=_pairs([3, 2]),
        paddings=_pairs([[0, 0], [0, 0]]),
    ),
    op_record(
        "space_to_batch",
        _space_to_batch,
        normal(2, 1, 3, 4),
        tag="1x3-width-only",
        block_shape=_pairs([1, 3]),
        paddings=_pairs([[0, 0], [1, 1]]),
    ),
    op_record(
        "space_to_batch",
        _space_to_batch,
        normal(3, 2, 2, 3),
        tag="1x1-pad-only",
        block_shape=_pairs([1, 1]),
        paddings=_pairs([[1, 0], [0, 2]]),
    ),
    op_record(
        "space_to_batch",
        _given(_CT_BATCH),
        fixed(_CT_SPACE),
        tag="coremltools-example",
        block_shape=_pairs([2, 2]),
        paddings=_pairs([[0, 0], [2, 0]]),
    ),
    op_record(
        "batch_to_space",
        _batch_to_space,
        normal(8, 3, 3, 3),
        tag="2x2-cropped",
        block_shape=_pairs([2, 2]),
        crops=_pairs([[1, 0], [0, 2]]),
    ),
    op_record(
        "batch_to_space",
        _batch_to_space,
        normal(12, 2, 2, 3),
        tag="3x2-uncropped",
        block_shape=_pairs([3, 2]),
        crops=_pairs([[0, 0], [0, 0]]),
    ),
    op_record(
        "batch_to_space",
        _batch_to_space,
        normal(4, 1, 3, 2),
        tag="1x2-crops",
        block_shape=_pairs([1, 2]),
        crops=_pairs([[1, 1], [0, 1]]),
    ),
    op_record(
        "batch_to_space",
        _batch_to_space,
        normal(2, 2, 3, 4),
        tag="1x1-crop-only",
        block_shape=_pairs([1, 1]),
        crops=_pairs([[0, 2], [1, 1]]),
    ),
    op_record(
        "batch_to_space",
        _given(_CT_SPACE),
        fixed(_CT_BATCH),
        tag="coremltools-example",
        block_shape=_pairs([2, 2]),
        crops=_pairs([[0, 0], [2, 0]]),
    ),
]


@pytest.mark.parametrize("numerics", ["fp32", "ane"])
@pytest.mark.parametrize(
    ("shape", "block_shape", "paddings"),
    [
        ((2, 3, 4, 6), [2, 3], [[0, 0], [0, 0]]),
        ((1, 2, 5, 3), [2, 2], [[1, 2], [0, 1]]),
        ((3, 1, 4, 4), [4, 1], [[2, 2], [3, 0]]),
    ],
)
def test_space_to_batch_then_batch_to_space_is_identity(
    shape: tuple[int, ...], block_shape: list[int], paddings: list[list[int]], numerics: str
) -> None:
    """batch_to_space with crops equal to the paddings undoes space_to_batch."""
    from anekit import sim

    x = np.random.default_rng(7).standard_normal(shape).astype(F32)
    blocks = _pairs(block_shape)
    moved = sim.run_op(
        "space_to_batch", x, block_shape=blocks, paddings=_pairs(paddings), numerics=numerics
    )
    assert moved.shape[0] == shape[0] * int(np.prod(block_shape))
    back = sim.run_op(
        "batch_to_space", moved, block_shape=blocks, crops=_pairs(paddings), numerics=numerics
    )
    # ane stores every value as fp16 (the program's fp32 input included)
    expected = x if numerics == "fp32" else x.astype(np.float16)
    np.testing.assert_array_equal(back.astype(np.float64), expected.astype(np.float64))


@pytest.mark.parametrize(
    ("op", "margins"), [("space_to_batch", "paddings"), ("batch_to_space", "crops")]
)
@pytest.mark.parametrize(
    ("shape", "block_shape", "pairs"),
    [((2, 1, 4), [2], [[0, 0]]), ((4, 1, 4, 2), [2], [[0, 0]])],
    ids=["rank3", "rank4"],
)
def test_block_shape_of_length_one_coremltools_refuses_to_build(
    op: str, margins: str, shape: tuple[int, ...], block_shape: list[int], pairs: Any
) -> None:
    """coremltools 9 wants rank-4 x and two block axes (TensorFlow's one-axis case it
    converts to reshapes and transposes instead)."""
    from anekit import sim

    attrs: dict[str, Any] = {"block_shape": _pairs(block_shape), margins: _pairs(pairs)}
    with pytest.raises(ValueError, match=r"rank 4|spatial dimensions = 2"):
        sim.run_op(op, np.zeros(shape, F32), numerics="fp32", **attrs)


def _direct(op: str, x: Any, **attrs: Any) -> Any:
    from anekit.ops.registry import OpContext, record

    impl = record(op).reference
    assert impl is not None
    ctx = OpContext(numerics=None, op=SimpleNamespace(name="blocks", op_type=op))  # type: ignore[arg-type]
    return impl(ctx, x, **attrs)


def test_one_block_axis_is_tensorflows_when_called_directly() -> None:
    """The simulator's ops take any number of block axes; one (on [N, C, W]) is
    TensorFlow's SpaceToBatchND: out[j * N + n, c, w] = padded[n, c, w * b + j]."""
    x = np.arange(2 * 2 * 5, dtype=F32).reshape(2, 2, 5)
    moved = _direct("space_to_batch", x, block_shape=_pairs([3]), paddings=_pairs([[1, 0]]))
    padded = np.pad(x, [(0, 0), (0, 0), (1, 0)])
    expected = np.concatenate([padded[:, :, j::3] for j in range(3)])
    np.testing.assert_array_equal(moved, expected)
    back = _direct("batch_to_space", moved, block_shape=_pairs([3]), crops=_pairs([[1, 0]]))
    np.testing.assert_array_equal(back, x)


@pytest.mark.parametrize(
    ("op", "shape", "attrs", "message"),
    [
        (
            "space_to_batch",
            (1, 1, 3, 4),
            {"block_shape": [2, 2], "paddings": [[0, 0], [0, 0]]},
            "not multiples of block_shape",
        ),
        (
            "batch_to_space",
            (6, 1, 2, 2),
            {"block_shape": [2, 2], "crops": [[0, 0], [0, 0]]},
            "must be a multiple",
        ),
        (
            "batch_to_space",
            (4, 1, 2, 2),
            {"block_shape": [2, 2], "crops": [[3, 2], [0, 0]]},
            "fit in spatial sizes",
        ),
        (
            "space_to_batch",
            (1, 1, 4, 4),
            {"block_shape": [2, 2], "paddings": [[-1, 1], [0, 0]]},
            "non-negative",
        ),
    ],
)
def test_invalid_geometry_is_a_program_error(
    op: str, shape: tuple[int, ...], attrs: dict[str, Any], message: str
) -> None:
    """Shapes MIL's docs do not define (TensorFlow refuses them all) are invalid programs;
    coremltools refuses a batch not divisible by the blocks itself."""
    from anekit.errors import ProgramError

    arrays = {name: _pairs(value) for name, value in attrs.items()}
    with pytest.raises(ProgramError, match=message):
        _direct(op, np.zeros(shape, F32), **arrays)


def test_space_to_batch_of_a_size_the_block_does_not_divide_is_a_program_error() -> None:
    """coremltools builds it, declaring (size + paddings) / block truncated to an int."""
    from anekit import sim
    from anekit.errors import ProgramError

    attrs: dict[str, Any] = {"block_shape": _pairs([2, 2]), "paddings": _pairs([[0, 0], [1, 0]])}
    with pytest.raises(ProgramError, match=r"padded spatial sizes \[3, 5\]"):
        sim.run_op("space_to_batch", np.zeros((1, 1, 3, 4), F32), numerics="fp32", **attrs)
