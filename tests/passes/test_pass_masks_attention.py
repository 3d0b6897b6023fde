"""finite_masks, prescale_query and attention_split: each shows its problem in the
simulator (ane mode) or the placement report before the pass and not after, while
the fp32 simulation stays the same within 1e-5 relative."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from coremltools.converters.mil import Builder as mb
from coremltools.converters.mil.mil import types

from anekit._coremltools import ct
from passkit import apply_pass, only, op_types, relative, rules, run

FP16 = types.fp16
TARGET = ct.target.iOS18


def _weights(rng: np.random.Generator, channels: int, scale: float = 1.0) -> list[np.ndarray]:
    return [
        (rng.standard_normal((channels, channels)) * scale / np.sqrt(channels)).astype(np.float16)
        for _ in range(3)
    ]


def _attention_program(
    sequence: int,
    channels: int,
    heads: int,
    mask: np.ndarray | None,
    weights: list[np.ndarray],
    mask_input: bool = False,
) -> Any:
    """x (1, S, C) -> per-head softmax(q k^T * d^-1/2 + mask) v, in the (B, H, S, D) layout."""
    head_dim = channels // heads

    def attention(x: Any, runtime_mask: Any = None) -> Any:
        q, k, v = (
            mb.transpose(
                x=mb.reshape(x=mb.linear(x=x, weight=w), shape=[1, sequence, heads, head_dim]),
                perm=[0, 2, 1, 3],
            )
            for w in weights
        )
        scores = mb.mul(
            x=mb.matmul(x=q, y=k, transpose_y=True), y=np.float16(1 / np.sqrt(head_dim))
        )
        if mask is not None:
            scores = mb.add(x=scores, y=mask.astype(np.float16))
        if runtime_mask is not None:
            scores = mb.add(x=scores, y=runtime_mask)
        out = mb.matmul(x=mb.softmax(x=scores, axis=-1), y=v)
        return mb.reshape(x=mb.transpose(x=out, perm=[0, 2, 1, 3]), shape=[1, sequence, channels])

    specs = [mb.TensorSpec((1, sequence, channels), dtype=FP16)]
    if mask_input:
        specs.append(mb.TensorSpec((1, 1, 1, sequence), dtype=FP16))

        def two(x: Any, mask: Any) -> Any:
            return attention(x, mask)

        return mb.program(input_specs=specs, opset_version=TARGET)(two)

    def one(x: Any) -> Any:
        return attention(x)

    return mb.program(input_specs=specs, opset_version=TARGET)(one)


# --- finite_masks ------------------------------------------------------------------------


def test_finite_masks_removes_nan_from_a_fully_masked_row(rng: np.random.Generator) -> None:
    sequence, channels = 64, 64
    mask = np.zeros((1, 1, sequence, sequence), np.float32)
    mask[..., -8:] = np.finfo(np.float32).min  # padding keys: -inf once stored in fp16
    mask[0, 0, 3, :] = -np.inf  # a query row with every key masked
    with np.errstate(over="ignore"):
        program = _attention_program(sequence, channels, 2, mask, _weights(rng, channels))
    feeds = {"x": rng.standard_normal((1, sequence, channels)).astype(np.float16)}
    before32, before16 = run(program, feeds), run(program, feeds, "ane")
    assert not before16.report.ok
    assert not np.isfinite(only(before16)).all()

    result = apply_pass(program, "finite_masks")
    assert any("-1e4" in change for change in result.changes)
    assert any("keep key 0 open" in change for change in result.changes)
    after32, after16 = run(program, feeds), run(program, feeds, "ane")
    assert after16.report.ok and np.isfinite(only(after16)).all()
    rows = np.ones(sequence, bool)
    rows[3] = False  # the fully masked row was NaN before; it attends to key 0 now
    got, want = only(after32)[0, rows], only(before32)[0, rows]
    assert relative(got, want) < 1e-5
    assert apply_pass(program, "finite_masks").changes == []  # idempotent


def test_finite_masks_clamps_a_mask_given_at_run_time(rng: np.random.Generator) -> None:
    sequence, channels = 32, 64
    program = _attention_program(
        sequence, channels, 2, None, _weights(rng, channels), mask_input=True
    )
    x = rng.standard_normal((1, sequence, channels)).astype(np.float16)
    empty = np.full((1, 1, 1, sequence), -np.inf, np.float16)  # every key masked
    assert not run(program, {"x": x, "mask": empty}, "ane").report.ok
    partial = np.zeros((1, 1, 1, sequence), np.float16)
    partial[..., -4:] = -np.inf
    before = run(program, {"x": x, "mask": partial})

    result = apply_pass(program, "finite_masks")
    assert result.changes and "clamped" in result.changes[0]
    assert "maximum" in op_types(program)
    assert run(program, {"x": x, "mask": empty}, "ane").report.ok
    after = run(program, {"x": x, "mask": partial})
    assert relative(only(after), only(before)) < 1e-5


def test_finite_masks_leaves_other_constants_alone() -> None:
    @mb.program(input_specs=[mb.TensorSpec((4, 32), dtype=FP16)], opset_version=TARGET)  # type: ignore[untyped-decorator]
    def floor(x: Any) -> Any:
        return mb.maximum(x=x, y=np.full((4, 32), -np.inf, np.float16))

    assert apply_pass(floor, "finite_masks").changes == []


# --- prescale_query ----------------------------------------------------------------------


def test_prescale_query_keeps_large_scores_finite(rng: np.random.Generator) -> None:
    sequence, channels = 32, 64
    program = _attention_program(sequence, channels, 1, None, _weights(rng, channels, 12.0))
    feeds = {"x": (rng.standard_normal((1, sequence, channels)) * 8).astype(np.float16)}
    before32, before16 = run(program, feeds), run(program, feeds, "ane")
    assert before16.report.first_nonfinite is not None  # q·k overflows fp16 before the scale

    result = apply_pass(program, "prescale_query")
    assert result.changes and "folded into the query projection" in result.changes[0]
    assert op_types(program).count("mul") == 0  # the score scale is gone
    after32, after16 = run(program, feeds), run(program, feeds, "ane")
    assert after16.report.first_nonfinite is None
    assert np.isfinite(only(after16)).all()
    assert relative(only(after32), only(before32)) < 1e-5
    assert apply_pass(program, "prescale_query").changes == []


def test_prescale_query_scales_a_query_without_a_projection() -> None:
    spec = mb.TensorSpec((1, 2, 32, 64), dtype=FP16)

    @mb.program(input_specs=[spec, spec], opset_version=TARGET)  # type: ignore[untyped-decorator]
    def bare(q: Any, k: Any) -> Any:
        scores = mb.real_div(x=mb.matmul(x=q, y=k, transpose_y=True), y=np.float16(8.0))
        return mb.matmul(x=mb.softmax(x=scores, axis=-1), y=k)

    rng = np.random.default_rng(2)
    feeds = {name: rng.standard_normal((1, 2, 32, 64)).astype(np.float16) for name in "qk"}
    before = run(bare, feeds)
    result = apply_pass(bare, "prescale_query")
    assert "query multiplied" in result.changes[0]
    assert "real_div" not in op_types(bare)
    assert relative(only(run(bare, feeds)), only(before)) < 1e-5


def test_prescale_query_logit_clamp_is_an_option(rng: np.random.Generator) -> None:
    program = _attention_program(32, 64, 1, None, _weights(rng, 64))
    result = apply_pass(program, "prescale_query", logit_clamp=50.0)
    assert any("clamped to [-50, 50]" in change for change in result.changes)
    assert "clip" in op_types(program)


# --- attention_split ---------------------------------------------------------------------


def test_attention_split_keeps_each_head_below_2_pow_20_scores(rng: np.random.Generator) -> None:
    sequence, channels = 1024, 64
    mask = np.zeros((1, 1, sequence, sequence), np.float32)
    mask[..., -16:] = -1e4
    program = _attention_program(sequence, channels, 2, mask, _weights(rng, channels))
    feeds = {"x": rng.standard_normal((1, sequence, channels)).astype(np.float16)}
    before = run(program, feeds)
    assert "attention.score_size" in rules(program)
    assert run(program, feeds, "ane").report.warnings_for("ane.attention_score_size")

    result = apply_pass(program, "attention_split")
    (change,) = result.changes
    assert change.endswith("1024x1024 scores per head split into 2 pieces of <= 512 rows")
    assert "attention.score_size" not in rules(program)
    assert op_types(program).count("softmax") == 2
    assert not run(program, feeds, "ane").report.warnings_for("ane.attention_score_size")
    assert relative(only(run(program, feeds)), only(before)) < 1e-5
    assert apply_pass(program, "attention_split").changes == []


@pytest.mark.parametrize(("queries", "pieces"), [(1024, 2), (2048, 3)])
def test_attention_split_pieces_are_even(queries: int, pieces: int) -> None:
    spec_q = mb.TensorSpec((1, 1, queries, 32), dtype=FP16)
    spec_k = mb.TensorSpec((1, 1, 1024, 32), dtype=FP16)

    @mb.program(input_specs=[spec_q, spec_k], opset_version=TARGET)  # type: ignore[untyped-decorator]
    def long(q: Any, k: Any) -> Any:
        weights = mb.softmax(x=mb.matmul(x=q, y=k, transpose_y=True), axis=-1)
        return mb.matmul(x=weights, y=k)

    result = apply_pass(long, "attention_split")
    assert f"into {pieces} pieces" in result.changes[0]
