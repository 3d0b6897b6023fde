"""iOS18 joint compression: a constexpr op whose input is another constexpr's output."""

from __future__ import annotations

from typing import Any

import coremltools as ct
import numpy as np
import pytest
from coremltools.converters.mil.mil import Builder as mb
from coremltools.converters.mil.mil import types
from coremltools.converters.mil.mil.ops.defs.iOS18 import (
    constexpr_blockwise_shift_scale,
    constexpr_lut_to_dense,
)

from anekit.sim.interpreter import run


@pytest.mark.parametrize("mode", ["fp32", "ane"])
def test_a_quantized_palette_decompresses_through_both_ops(mode: str) -> None:
    """An int8 palette dequantized by constexpr_blockwise_shift_scale, then read by
    constexpr_lut_to_dense: the values coremltools' own ``decompress`` functions give
    (coremltools' ``materialized_val_inference`` of the second op reads no palette)."""
    rng = np.random.default_rng(0)
    indices = rng.integers(0, 4, size=(4, 8)).astype(types.nptype_from_builtin(types.uint2))
    quantized = rng.integers(-128, 128, size=(1, 1, 4, 1)).astype(np.int8)
    scale = np.full((1, 1, 1, 1), 0.25, np.float16)
    offset = np.full((1, 1, 1, 1), 3, np.int8)

    def build(x: Any) -> Any:
        lut = mb.constexpr_blockwise_shift_scale(data=quantized, scale=scale, offset=offset)
        weight = mb.constexpr_lut_to_dense(indices=indices, lut=lut)
        return mb.add(x=x, y=weight)

    program = mb.program(
        input_specs=[mb.TensorSpec(shape=(4, 8), dtype=types.fp16)], opset_version=ct.target.iOS18
    )(build)
    palette = constexpr_blockwise_shift_scale.decompress(quantized, scale, offset)
    expected = constexpr_lut_to_dense.decompress(indices, palette, None)
    x = np.zeros((4, 8), np.float16)
    (out,) = run(program, {"x": x}, mode=mode).outputs.values()
    np.testing.assert_array_equal(out.astype(np.float32), expected.astype(np.float32))
    assert len(np.unique(out)) > 1  # the palette's entries, not one value
