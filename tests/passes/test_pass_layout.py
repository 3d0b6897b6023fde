"""to_bc1s, rank5_to_rank4, no_tile, pad_io_width and gelu_tanh: the placement report
shows the problem before the pass and not after; fp32 results stay the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from coremltools.converters.mil import Builder as mb
from coremltools.converters.mil.mil import types

import anekit
from anekit import nn
from anekit._coremltools import ct
from passkit import apply_pass, only, op_types, relative, rules, run

FP16 = types.fp16
TARGET = ct.target.iOS18


def _ffn(rng: np.random.Generator, channels: int = 128) -> Any:
    w1 = (rng.standard_normal((4 * channels, channels)) / np.sqrt(channels)).astype(np.float16)
    w2 = (rng.standard_normal((channels, 4 * channels)) / np.sqrt(4 * channels)).astype(np.float16)
    gamma = np.ones(channels, np.float16)

    def block(x: Any) -> Any:  # x: (B, S, C), the row layout torch models use
        h = nn.layer_norm(x, gamma)
        return nn.softmax(x + nn.gelu(h @ w1.T) @ w2.T, axis=-1)

    return block


def test_to_bc1s_makes_linears_1x1_convolutions(rng: np.random.Generator) -> None:
    x = rng.standard_normal((1, 64, 128)).astype(np.float16)
    program = anekit.compile(_ffn(rng), x, passes=False).program
    before = run(program, {"x": x})
    assert "layout.not_bc1s" in rules(program)

    result = apply_pass(program, "to_bc1s")
    assert len(result.changes) == 2
    assert "layout.not_bc1s" not in rules(program)
    assert op_types(program).count("conv") == 2 and "matmul" not in op_types(program)
    (note,) = result.notes
    assert "transpose(s) left" in note
    left = op_types(program).count("transpose")
    assert f"{left} transpose(s) left" in note
    assert left <= 4  # in and out of each conv at most; the gelu between them moved
    assert relative(only(run(program, {"x": x})), only(before)) < 1e-5
    assert apply_pass(program, "to_bc1s").changes == []


def test_to_bc1s_carries_layer_norm_and_softmax_into_the_ane_layout(
    rng: np.random.Generator,
) -> None:
    w = (rng.standard_normal((64, 64)) / 8).astype(np.float16)
    gamma = np.ones(64, np.float16)

    def chain(x: Any) -> Any:
        h = nn.layer_norm(x @ w.T, gamma)
        return (nn.softmax(h, axis=-1) @ w.T) @ w.T

    x = rng.standard_normal((1, 32, 64)).astype(np.float16)
    program = anekit.compile(chain, x, passes=False).program
    before = run(program, {"x": x})
    apply_pass(program, "to_bc1s")
    # one transpose in, one out: layer_norm and softmax run on (B, C, S) in between
    assert op_types(program).count("transpose") == 2
    (function,) = program.functions.values()
    norm = next(op for op in function.operations if op.op_type == "layer_norm")
    assert list(norm.inputs["axes"].val) == [1]
    assert relative(only(run(program, {"x": x})), only(before)) < 1e-5


def test_rank5_to_rank4_folds_a_qkv_split(rng: np.random.Generator) -> None:
    @mb.program(input_specs=[mb.TensorSpec((2, 16, 96), dtype=FP16)], opset_version=TARGET)  # type: ignore[untyped-decorator]
    def qkv(x: Any) -> Any:  # (B, S, 3*H*D) -> (B, S, 3, H, D) -> (B, 3, H, S, D)
        split = mb.reshape(x=x, shape=[2, 16, 3, 4, 8])
        moved = mb.transpose(x=split, perm=[0, 2, 3, 1, 4])
        return mb.reshape(x=moved, shape=[2, 12, 16, 8])

    feeds = {"x": rng.standard_normal((2, 16, 96)).astype(np.float16)}
    before = run(qkv, feeds)
    assert "rank.5" in rules(qkv)
    result = apply_pass(qkv, "rank5_to_rank4")
    assert "merged axes 2 and 3" in result.changes[0]
    assert "rank.5" not in rules(qkv)
    np.testing.assert_array_equal(only(run(qkv, feeds)), only(before))


def test_no_tile_broadcasts_instead(rng: np.random.Generator) -> None:
    def pooled(x: Any) -> Any:
        counts = np.sum(x, axis=-1, keepdims=True)
        return x / np.tile(counts, (1, 64))

    x = (rng.random((4, 64)) + 0.5).astype(np.float32)
    program = anekit.compile(pooled, x, passes=False).program
    before = run(program, {"x": x})
    assert "op.tile" in rules(program)
    assert apply_pass(program, "no_tile").changes
    assert "tile" not in op_types(program)
    np.testing.assert_array_equal(only(run(program, {"x": x})), only(before))


def test_no_tile_leaves_a_real_repeat() -> None:
    @mb.program(input_specs=[mb.TensorSpec((4, 32), dtype=FP16)], opset_version=TARGET)  # type: ignore[untyped-decorator]
    def repeat(x: Any) -> Any:
        return mb.tile(x=x, reps=[1, 2])

    result = apply_pass(repeat, "no_tile")
    assert result.changes == [] and "non-singleton" in result.notes[0]


def test_pad_io_width_widens_narrow_inputs_and_outputs(
    rng: np.random.Generator, tmp_path: Path
) -> None:
    w = rng.standard_normal((16, 8)).astype(np.float16)

    def narrow(x: Any) -> Any:
        return np.tanh(x @ w)

    x = rng.standard_normal((4, 16)).astype(np.float16)
    plain = anekit.compile(narrow, x, passes=False)
    assert "io.narrow" in rules(plain.program)
    padded = anekit.compile(narrow, x)
    assert "io.narrow" not in rules(padded.program)
    assert padded.io_widths == {"x": 16, "output": 8}
    assert [spec.shape for spec in padded.input_specs] == [(4, 16)]
    assert [spec.shape for spec in padded.output_specs] == [(4, 8)]
    result = padded.pass_report.result("pad_io_width")
    assert result.changes == [
        "input x: last axis 16 padded to 32 (sliced back inside)",
        "output output: last axis 8 zero-padded to 32",
    ]
    want = plain(x, mode="fp32")
    np.testing.assert_allclose(padded(x, mode="fp32"), want, rtol=1e-3, atol=1e-3)
    loaded = anekit.load(padded.save(tmp_path / "narrow.mlpackage"))
    assert loaded.io_widths == {"x": 16, "output": 8}
    assert loaded(x, mode="fp32").shape == (4, 8)
    np.testing.assert_allclose(loaded(x, mode="fp32"), want, rtol=1e-3, atol=1e-3)


def test_gelu_tanh_is_off_by_default_and_approximate(rng: np.random.Generator) -> None:
    x = rng.standard_normal((4, 64)).astype(np.float32)
    exact = anekit.compile(nn.gelu, x)
    assert "gelu_tanh" not in [item.name.split("::")[1] for item in exact.pass_report.results]
    tanh = anekit.compile(nn.gelu, x, extra_passes=["gelu_tanh"])
    assert tanh.pass_report.result("gelu_tanh").changes
    (function,) = tanh.program.functions.values()
    (gelu,) = (op for op in function.operations if op.op_type == "gelu")
    assert gelu.inputs["mode"].val == "TANH_APPROXIMATION"
    got, want = tanh(x, mode="fp32"), exact(x, mode="fp32")
    assert 0 < np.abs(got - want).max() < 1e-3  # an approximation, not a rewrite


def test_to_bc1s_on_row_activations_keeps_one_transpose_each_way(
    rng: np.random.Generator,
) -> None:
    """(S, C) activations: the SiLU between the two layers runs in (C, S)."""
    w = (rng.standard_normal((256, 64)) / 8).astype(np.float16)

    def mlp(x: Any) -> Any:
        return nn.silu(x @ w.T) @ w

    x = rng.standard_normal((32, 64)).astype(np.float16)
    program = anekit.compile(mlp, x, passes=False).program
    before = run(program, {"x": x})
    apply_pass(program, "to_bc1s")
    assert op_types(program).count("transpose") == 2
    assert relative(only(run(program, {"x": x})), only(before)) < 1e-5
