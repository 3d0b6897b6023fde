"""MIL ``resample``: coremltools' worked examples, and PyTorch's ``grid_sample`` (which
coremltools converts to it: reflection without align_corners is MIL's symmetric)."""

from __future__ import annotations

from typing import Any

import coremltools as ct
import numpy as np
import pytest
from coremltools.converters.mil.mil import Builder as mb
from coremltools.converters.mil.mil import types

from anekit.sim.interpreter import run

X = np.array([11.0, 22.0, 33.0, 44.0], np.float32).reshape(1, 1, 2, 2)
FLOAT = np.array([-1.0, -2.0, -3.7, -1.0, 0.0, 0.0, 3.5, 1.2], np.float32).reshape(1, 2, 2, 2)
INT = np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int32).reshape(1, 2, 2, 2)


def resample(x: np.ndarray, coordinates: np.ndarray, mode: str = "fp32", **how: Any) -> Any:
    dtype = types.int32 if coordinates.dtype == np.int32 else types.fp32
    specs = [mb.TensorSpec(shape=x.shape), mb.TensorSpec(shape=coordinates.shape, dtype=dtype)]

    def build(x: Any, c: Any) -> Any:
        return mb.resample(x=x, coordinates=c, **how)

    program = mb.program(input_specs=specs, opset_version=ct.target.iOS15)(build)
    (out,) = run(program, {"x": x, "c": coordinates}, mode=mode).outputs.values()
    return out


# coremltools' test_image_resizing.py::TestResample: (how, float coordinates, int ones)
EXAMPLES = [
    (("bilinear", "constant", 6.17, "normalized_minus_one_to_one", True),
     [8.585, 6.17, 27.5, 6.17], [27.5, 44.0, 27.5, 44.0]),
    (("nearest", "border", -1.0, "unnormalized", False),
     [11.0, 11.0, 11.0, 44.0], [11.0, 44.0, 11.0, 44.0]),
    (("bilinear", "reflection", -1.0, "normalized_zero_to_one", True),
     [22.0, 36.3, 11.0, 34.1], [11.0, 44.0, 11.0, 44.0]),
    (("nearest", "symmetric", -1.0, "normalized_zero_to_one", False),
     [22.0, 33.0, 11.0, 33.0], [11.0, 44.0, 11.0, 44.0]),
]  # fmt: skip


@pytest.mark.parametrize(("how", "floats", "ints"), EXAMPLES)
def test_coremltools_worked_examples(how: tuple[Any, ...], floats: list, ints: list) -> None:
    names = ("sampling_mode", "padding_mode", "padding_value", "coordinates_mode")
    kwargs = dict(zip((*names, "align_corners"), how, strict=True))
    np.testing.assert_allclose(resample(X, FLOAT, **kwargs).reshape(-1), floats, rtol=1e-5)
    np.testing.assert_allclose(resample(X, INT, **kwargs).reshape(-1), ints, rtol=1e-6)


@pytest.mark.parametrize("sampling", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [True, False])
def test_matches_torch_grid_sample(sampling: str, padding: str, align_corners: bool) -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    grid = rng.uniform(-2.5, 2.5, (2, 4, 6, 2)).astype(np.float32)  # in and far outside
    expected = torch.nn.functional.grid_sample(
        torch.from_numpy(x),
        torch.from_numpy(grid),
        mode=sampling,
        padding_mode=padding,
        align_corners=align_corners,
    ).numpy()
    mil_padding = {"zeros": "constant", "border": "border", "reflection": "reflection"}[padding]
    if padding == "reflection" and not align_corners:
        mil_padding = "symmetric"  # as coremltools' torch converter maps it
    out = resample(
        x,
        grid,
        sampling_mode=sampling,
        padding_mode=mil_padding,
        padding_value=0.0,
        coordinates_mode="normalized_minus_one_to_one",
        align_corners=align_corners,
    )
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_ane_numerics_round_the_result_to_fp16() -> None:
    how = dict(zip(("sampling_mode", "padding_mode", "padding_value", "coordinates_mode",
                    "align_corners"), EXAMPLES[0][0], strict=True))  # fmt: skip
    out = resample(X, FLOAT, mode="ane", **how).reshape(-1)
    np.testing.assert_array_equal(out, out.astype(np.float16).astype(out.dtype))
    assert out[0] == np.float16(8.585) != np.float32(8.585)
    np.testing.assert_allclose(out, EXAMPLES[0][1], rtol=1e-3)
