"""The fp16 failure modes the seeds report appear in `ane` mode and not in `fp32` mode."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import anekit
from anekit import nn, sim
from anekit.errors import UnsupportedOpError
from anekit.sim import SimResult

F32 = np.float32


def simulate(fn: Any, *args: np.ndarray, mode: str) -> SimResult:
    program = anekit.compile(fn, *args, passes=False)
    feeds = {str(spec.name): arg for spec, arg in zip(program.input_specs, args, strict=True)}
    return sim.run(program.program, feeds, mode=mode)


def activations_above_256(rng: np.random.Generator) -> np.ndarray:
    """(B, C, 1, S) activations whose deviations from the channel mean exceed 256."""
    x = rng.standard_normal((1, 64, 1, 8)).astype(F32)
    x[:, ::2] += 300.0
    x[:, 1::2] -= 300.0
    return x


def test_layer_norm_variance_overflows_above_256(rng: np.random.Generator) -> None:
    x = activations_above_256(rng)

    def layer_norm(v: Any) -> Any:
        return nn.layer_norm(v, axis=1)

    reference = simulate(layer_norm, x, mode="fp32")
    ane = simulate(layer_norm, x, mode="ane")
    expected = nn.layer_norm(x.astype(np.float64), axis=1)
    np.testing.assert_allclose(reference.outputs["output"], expected, rtol=1e-5, atol=1e-5)
    assert not reference.report.warnings
    # In fp16, (x - mean)^2 > 65504: the variance is inf and the output collapses to 0.
    overflow = ane.report.warnings_for("sim.internal_overflow")
    assert [warning.op_type for warning in overflow] == ["layer_norm"]
    assert np.abs(ane.outputs["output"]).max() < 0.1 < np.abs(expected).max()


def test_hand_written_variance_overflows_at_the_square(rng: np.random.Generator) -> None:
    x = activations_above_256(rng)

    def layer_norm(v: Any) -> Any:
        centred = v - v.mean(axis=1, keepdims=True)
        variance = (centred * centred).mean(axis=1, keepdims=True)
        return centred / np.sqrt(variance + 1e-5)

    assert simulate(layer_norm, x, mode="fp32").report.first_nonfinite is None
    ane = simulate(layer_norm, x, mode="ane")
    first = ane.report.first_nonfinite
    assert first is not None
    assert first.op_type == "mul"  # centred * centred
    assert first.location is not None
    assert "test_failure_modes.py" in first.location


def test_softmax_over_a_fully_masked_row_with_minus_inf_masks_is_nan(
    rng: np.random.Generator,
) -> None:
    scores = rng.standard_normal((2, 4, 8)).astype(F32)
    # Hugging Face's additive mask: finfo(float32).min where keys are padding. The
    # second sequence is all padding, so every key of its rows is masked.
    padding = np.zeros((2, 1, 8), F32)
    padding[1] = np.finfo(np.float32).min

    def attention_weights(s: Any) -> Any:
        return nn.softmax(s + padding, axis=-1)

    reference = simulate(attention_weights, scores, mode="fp32")
    assert np.isfinite(reference.outputs["output"]).all()
    ane = simulate(attention_weights, scores, mode="ane")
    weights = ane.outputs["output"]
    assert np.isnan(weights[1]).all()
    assert np.isfinite(weights[0]).all()
    # The cause is named: finfo.min does not fit fp16 and becomes -inf.
    first = ane.report.first_nonfinite
    assert first is not None
    assert first.op_type == "const"
    assert first.name == "padding"


def test_two_minus_65504_masks_overflow_when_added(rng: np.random.Generator) -> None:
    scores = rng.standard_normal((1, 6, 6)).astype(F32)
    causal = np.triu(np.full((6, 6), -65504.0, F32), k=1)
    padding = np.zeros((1, 6), F32)
    padding[0, 4:] = -65504.0

    def masked_scores(s: Any) -> Any:
        return s + causal + padding  # each mask is added to the scores in turn

    reference = simulate(masked_scores, scores, mode="fp32")
    assert np.isfinite(reference.outputs["output"]).all()
    ane = simulate(masked_scores, scores, mode="ane")
    first = ane.report.first_nonfinite
    assert first is not None
    assert first.op_type == "add"
    assert np.isneginf(ane.outputs["output"]).any()


def test_minus_1e4_masks_stay_finite(rng: np.random.Generator) -> None:
    scores = rng.standard_normal((1, 6, 6)).astype(F32)
    causal = np.triu(np.full((6, 6), -1e4, F32), k=1)
    padding = np.zeros((1, 6), F32)
    padding[0, 4:] = -1e4

    def attention_weights(s: Any) -> Any:
        return nn.softmax(s + (causal + padding), axis=-1)

    ane = simulate(attention_weights, scores, mode="ane")
    assert ane.report.first_nonfinite is None
    assert np.isfinite(ane.outputs["output"]).all()


def test_zero_times_a_minus_inf_mask_is_nan() -> None:
    # `(1 - mask) * finfo.min`, the classic additive-mask formula: where mask is 1 the
    # product is 0 * -inf = NaN once finfo.min is stored in fp16.
    mask = np.ones((2, 8), F32)

    def additive(m: Any) -> Any:
        return (1.0 - m) * np.finfo(np.float32).min

    assert np.isfinite(simulate(additive, mask, mode="fp32").outputs["output"]).all()
    assert np.isnan(simulate(additive, mask, mode="ane").outputs["output"]).all()


def test_resize_of_three_axes_is_refused_by_name() -> None:
    # MIL allows resized_dims up to the rank; the simulator interpolates at most two axes.
    x = np.zeros((1, 2, 3, 4), np.float32)
    with pytest.raises(UnsupportedOpError, match="resizes the last 3 axes"):
        sim.run_op("resize", x, shape=np.array([4, 6, 8], np.int32), resized_dims=np.uint32(3))
