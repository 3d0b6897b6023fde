"""fp16_safe_norm: normalizations whose squares overflow fp16 before the pass and not
after, exact in fp32 up to rounding."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import anekit
from anekit import nn
from passkit import apply_pass, only, op_types, relative, run

GAMMA = np.linspace(0.5, 1.5, 64).astype(np.float16)


def rms_divide(x: Any) -> Any:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-5) * GAMMA


def rms_rsqrt_sum(x: Any) -> Any:
    return x * (1 / np.sqrt(np.sum(np.square(x), axis=-1, keepdims=True) / 64 + 1e-5))


def layer_norm_by_hand(x: Any) -> Any:
    centred = x - np.mean(x, axis=-1, keepdims=True)
    return centred / np.sqrt(np.mean(centred * centred, axis=-1, keepdims=True) + 1e-5)


def layer_norm_op(x: Any) -> Any:
    return nn.layer_norm(x, GAMMA, axis=-1)


def _large(rng: np.random.Generator) -> np.ndarray:
    """Activations whose sum of squares overflows fp16 (RMS 100 over 64 values), and
    stays in range once scaled by 1/8."""
    return (rng.standard_normal((8, 64)) * 100).astype(np.float16)


@pytest.mark.parametrize(
    ("fn", "rewritten"),
    [
        (rms_divide, "layer_norm(x * 2^-3) of concat([v, -v])"),
        (rms_rsqrt_sum, "layer_norm(x * 2^-3) of concat([v, -v])"),
        (layer_norm_by_hand, "(x - mean) / sqrt(var + eps)"),
        (layer_norm_op, "layer_norm -> layer_norm(x * 2^-3)"),
    ],
)
def test_norms_stop_overflowing(fn: Any, rewritten: str, rng: np.random.Generator) -> None:
    x = _large(rng)
    program = anekit.compile(fn, x, passes=False).program
    feeds = {"x": x}
    before32, before16 = run(program, feeds), run(program, feeds, "ane")
    overflowed = before16.report.first_nonfinite is not None or before16.report.warnings_for(
        "sim.internal_overflow"
    )
    assert overflowed

    result = apply_pass(program, "fp16_safe_norm")
    assert len(result.changes) == 1 and rewritten in result.changes[0]
    after32, after16 = run(program, feeds), run(program, feeds, "ane")
    assert after16.report.ok, after16.report.summary()
    assert relative(only(after32), only(before32)) < 1e-5
    reference = fn(x.astype(np.float64))
    assert relative(only(after16), reference) < 5e-3  # fp16 storage, not an overflow
    assert apply_pass(program, "fp16_safe_norm").changes == []  # idempotent


def test_a_bert_epsilon_is_raised_with_a_note(rng: np.random.Generator) -> None:
    x = rng.standard_normal((8, 64)).astype(np.float32)
    program = anekit.compile(lambda v: nn.layer_norm(v, eps=1e-12), x, passes=False).program
    result = apply_pass(program, "fp16_safe_norm", scale_exponent=0)
    assert result.changes
    (note,) = result.notes
    assert "epsilon 1e-12" in note and "below fp16's smallest value" in note
    (norm,) = (op for op in program.functions["main"].operations if op.op_type == "layer_norm")
    assert float(norm.inputs["epsilon"].val) == pytest.approx(2.0**-24)


def test_unrelated_arithmetic_is_not_rewritten(rng: np.random.Generator) -> None:
    def not_a_norm(x: Any) -> Any:  # divides by the root of a mean of x*y, not of x*x
        return x / np.sqrt(np.mean(x * (x + 1), axis=-1, keepdims=True) + 1)

    program = anekit.compile(not_a_norm, rng.random((4, 64), np.float32), passes=False).program
    types_before = op_types(program)
    assert apply_pass(program, "fp16_safe_norm").changes == []
    assert op_types(program) == types_before
