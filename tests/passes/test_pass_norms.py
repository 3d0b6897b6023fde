"""fp16_safe_norm (after dedupe): every way of writing a normalization survives fp16 at
ordinary and large activation sizes, exact in fp32 up to rounding."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import anekit
from anekit import nn
from norm_forms import FORMS, l2_normalize, ln_by_hand, ln_op, row_cosines
from passkit import apply_pass, only, op_types, run


@pytest.mark.parametrize("magnitude", [1, 300, 3000])
@pytest.mark.parametrize("form", list(FORMS))
def test_every_norm_form_survives_fp16(form: str, magnitude: int) -> None:
    """(64, 384) activations of RMS 1, 300 and 3000: finite, min row cosine >= 0.999
    against float64 NumPy in the simulator's ane mode, and each row's length right
    (the epsilon and the scale are not lost)."""
    fn, reference = FORMS[form]
    rng = np.random.default_rng(magnitude)
    x = (rng.standard_normal((64, 384)) * magnitude).astype(np.float16)
    program = anekit.compile(fn, x)
    assert program.pass_report.result("fp16_safe_norm").changed
    got = np.asarray(program(x, backend="sim", mode="ane"), np.float64)
    want = (reference or fn)(x.astype(np.float64))
    assert np.isfinite(got).all()
    assert row_cosines(got, want).min() >= 0.999
    lengths = np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    assert np.abs(lengths - 1).max() < 5e-3


@pytest.mark.parametrize("form", ["layer norm by hand", "seed 003 rms norm", "l2 normalize"])
def test_without_the_pass_these_inputs_are_garbage(form: str) -> None:
    """The test above is not vacuous: at RMS 300 (3000 for the l2 norm, whose sum of
    squares overflows later) the forms as written overflow."""
    fn, _ = FORMS[form]
    magnitude = 3000 if form == "l2 normalize" else 300
    x = (np.random.default_rng(1).standard_normal((64, 384)) * magnitude).astype(np.float16)
    program = anekit.compile(fn, x, passes=False)
    got = only(run(program.program, {"x": x}, "ane"))
    assert not np.isfinite(got).all() or not np.abs(got).max() > 0


@pytest.mark.parametrize("form", list(FORMS))
def test_the_rewrite_is_exact_in_fp32(form: str, rng: np.random.Generator) -> None:
    fn, _ = FORMS[form]
    x = (rng.standard_normal((8, 64)) * 10).astype(np.float32)
    program = anekit.compile(fn, x, passes=False).program
    before = only(run(program, {"x": x}))
    apply_pass(program, "dedupe")
    result = apply_pass(program, "fp16_safe_norm")
    assert result.changed
    after = only(run(program, {"x": x}))
    assert np.abs(after - before).max() / np.abs(before).max() < 1e-5
    assert apply_pass(program, "fp16_safe_norm").changes == []  # idempotent


def test_dedupe_merges_repeated_computations(rng: np.random.Generator) -> None:
    x = rng.standard_normal((4, 64)).astype(np.float16)
    program = anekit.compile(ln_by_hand, x, passes=False).program
    assert op_types(program).count("sub") == 3
    before = only(run(program, {"x": x}, "ane"))
    result = apply_pass(program, "dedupe")
    assert op_types(program).count("sub") == 1
    assert len(result.changes) == 2 and all("merged" in change for change in result.changes)
    np.testing.assert_array_equal(only(run(program, {"x": x}, "ane")), before)
    assert apply_pass(program, "dedupe").changes == []


def test_zero_and_constant_rows_stay_finite() -> None:
    x = np.vstack([np.zeros((2, 64)), np.full((2, 64), 5.0)]).astype(np.float16)
    for form in ("layer norm by hand", "np.std + eps", "nn.layer_norm", "rms norm"):
        fn, reference = FORMS[form]
        got = anekit.compile(fn, x)(x, backend="sim", mode="ane")
        np.testing.assert_allclose(got, (reference or fn)(x.astype(np.float64)), atol=1e-3)


def test_near_fp16_max_an_l2_norm_divides_before_it_overflows() -> None:
    """An l2 norm of 384 values of RMS 9000 is 176,000: not an fp16 number. v / norm
    is computed as (v / max|v|) / norm', which is."""
    x = np.clip(np.random.default_rng(2).standard_normal((8, 384)) * 9000, -65000, 65000)
    x = x.astype(np.float16)
    program = anekit.compile(l2_normalize, x)
    assert (
        "v / root -> (v / max|v|) / root" in program.pass_report.result("fp16_safe_norm").changes[0]
    )
    got = np.asarray(program(x, backend="sim", mode="ane"), np.float64)
    assert row_cosines(got, l2_normalize(x.astype(np.float64))).min() >= 0.999


def test_a_bert_epsilon_is_raised_with_a_note(rng: np.random.Generator) -> None:
    x = rng.standard_normal((8, 64)).astype(np.float32)
    program = anekit.compile(lambda v: nn.layer_norm(v, eps=1e-12), x, passes=False).program
    result = apply_pass(program, "fp16_safe_norm", scale_exponent=0)
    assert result.changes
    (note,) = result.notes
    assert "epsilon 1e-12" in note and "below fp16's smallest value" in note
    (norm,) = (op for op in program.functions["main"].operations if op.op_type == "layer_norm")
    assert float(norm.inputs["epsilon"].val) == pytest.approx(2.0**-24)


def test_fixed_scale_is_one_op(rng: np.random.Generator) -> None:
    """dynamic=False keeps the old single multiply by 2^-k for layer_norm ops."""
    x = rng.standard_normal((8, 64)).astype(np.float16)
    program = anekit.compile(ln_op, x, passes=False).program
    result = apply_pass(program, "fp16_safe_norm", dynamic=False)
    (change,) = result.changes
    assert "(layer_norm): layer_norm -> layer_norm(x * 2^-3)" in change
    assert op_types(program) == ["mul", "layer_norm"]


def test_unrelated_arithmetic_is_not_rewritten(rng: np.random.Generator) -> None:
    def not_a_norm(x: Any) -> Any:  # divides by the root of a mean of x*y, not of x*x
        return x / np.sqrt(np.mean(x * (x + 1), axis=-1, keepdims=True) + 1)

    program = anekit.compile(not_a_norm, rng.random((4, 64), np.float32), passes=False).program
    types_before = op_types(program)
    assert apply_pass(program, "fp16_safe_norm").changes == []
    assert op_types(program) == types_before
