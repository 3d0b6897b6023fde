"""The numerics report: per-op statistics, first inf/NaN, and the ANE cliff rules."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import anekit
from anekit import errors, nn, sim
from anekit._coremltools import Function, Program, ct, mb, types
from anekit.sim import SimResult

F32 = np.float32


def simulate(fn: Any, *args: np.ndarray, mode: str = "ane", **options: Any) -> SimResult:
    program = anekit.compile(fn, *args, passes=False)
    feeds = {str(spec.name): arg for spec, arg in zip(program.input_specs, args, strict=True)}
    return sim.run(program.program, feeds, mode=mode, **options)


def test_per_op_statistics_and_summary(rng: np.random.Generator) -> None:
    x = rng.standard_normal((4, 8)).astype(F32)
    result = simulate(lambda v: np.exp(v * 3) + 1, x)
    report = result.report
    assert [item.op_type for item in report.ops] == ["mul", "exp", "add"]
    exp_stats = report.ops[1]
    expected = float(np.float16(np.exp(np.float16(x * 3).astype(F32))).max())
    assert exp_stats.max_abs == pytest.approx(expected, rel=1e-3)
    assert exp_stats.nonfinite == 0
    assert report.first_nonfinite is None
    assert report.ok
    assert report.simulated
    text = report.summary()
    assert "simulated (ane numerics" in text
    assert "no inf or NaN" in text


def test_first_nonfinite_names_the_op_and_line() -> None:
    x = np.array([[100.0, 1.0]], F32)
    result = simulate(lambda v: np.exp(v) * 2, x)  # exp(100) overflows fp16
    first = result.report.first_nonfinite
    assert first is not None
    assert first.op_type == "exp"
    assert first.nonfinite == 1
    assert first.location is not None
    assert "test_report.py" in first.location
    # the mul after it has an inf too, but did not produce it
    assert [w.op_type for w in result.report.warnings_for("sim.nonfinite")] == ["exp"]
    assert "first inf/NaN: exp" in result.report.summary()


def test_report_json_is_strict_json(rng: np.random.Generator) -> None:
    result = simulate(lambda v: v @ v.T, rng.standard_normal((3, 3)).astype(F32))
    payload = result.report.to_json()
    text = json.dumps(payload, allow_nan=False)
    assert json.loads(text)["mode"] == "ane"
    assert [item["type"] for item in payload["ops"]] == ["transpose", "matmul"]


def test_matmul_saturation_rule() -> None:
    x = np.full((2, 64), 30.0, F32)
    w = np.full((64, 4), 20.0, F32)  # 64 * 600 = 38400: representable, above 32752
    result = simulate(lambda v: v @ w, x)
    fired = result.report.warnings_for("ane.matmul_saturation")
    assert len(fired) == 1
    assert "38400" in fired[0].message
    assert result.report.first_nonfinite is None
    quiet = simulate(lambda v: v @ w, x / 10)
    assert not quiet.report.warnings_for("ane.matmul_saturation")


def test_small_log_input_rule() -> None:
    x = np.array([[1e-6, 1.0]], F32)
    fired = simulate(lambda v: np.log(v), x).report.warnings_for("ane.small_log_input")
    assert [warning.op_type for warning in fired] == ["log"]
    rsqrt = simulate(lambda v: nn.rms_norm(v, eps=1e-8), x * 1e-3).report
    assert [w.op_type for w in rsqrt.warnings_for("ane.small_log_input")] == ["rsqrt"]
    assert not simulate(lambda v: np.log(v), x + 1).report.warnings_for("ane.small_log_input")


def test_attention_score_size_rule(rng: np.random.Generator) -> None:
    q = rng.standard_normal((1024, 8)).astype(F32)

    def attention(v: Any) -> Any:
        return nn.softmax((v @ v.T) * 0.125, axis=-1)

    fired = simulate(attention, q).report.warnings_for("ane.attention_score_size")
    assert len(fired) == 1
    assert "1048576" in fired[0].message
    small = simulate(attention, q[:512])
    assert not small.report.warnings_for("ane.attention_score_size")


def test_width_slice_saturation_rule() -> None:
    x = np.full((2, 8), 5000.0, F32)
    fired = simulate(lambda v: v[:, 2:] + 0, x).report.warnings_for("ane.width_slice_saturation")
    assert len(fired) == 1
    assert not simulate(lambda v: v[:, :6] + 0, x).report.warnings
    assert not simulate(lambda v: v[:, 2:] + 0, x / 10).report.warnings


def test_every_rule_is_documented() -> None:
    documented = set(sim.RULES)
    assert {"sim.nonfinite", "sim.internal_overflow", "ane.matmul_saturation"} <= documented
    assert all(sim.RULES[rule] for rule in documented)


def test_accumulation_option_changes_long_sums(rng: np.random.Generator) -> None:
    x = rng.uniform(0, 1, (16, 4096)).astype(np.float16)
    fp16 = simulate(lambda v: v.sum(axis=1), x, accumulation="fp16").outputs["output"]
    fp32 = simulate(lambda v: v.sum(axis=1), x, accumulation="fp32").outputs["output"]
    exact = x.astype(np.float64).sum(axis=1)
    # fp32 accumulation rounds once: it is the exact sum rounded to fp16.
    np.testing.assert_array_equal(fp32, exact.astype(np.float16))
    # pairwise fp16 accumulation rounds at every level and drifts further.
    assert (fp16 != fp32).any()
    assert np.abs(fp16 - exact).sum() >= np.abs(fp32 - exact).sum()


def test_intermediate_values_by_name(rng: np.random.Generator) -> None:
    x = rng.standard_normal((2, 3)).astype(F32)
    result = simulate(lambda v: np.tanh(v) * 2, x, mode="fp32", intermediate=True)
    assert result.intermediates is not None
    np.testing.assert_allclose(result.intermediates["tanh_0"], np.tanh(x), rtol=1e-6)


def test_unsupported_op_is_named() -> None:
    placeholders = {"x": mb.placeholder(shape=(1, 4, 8, 8), dtype=types.fp32)}
    with Function(placeholders, opset_version=ct.target.iOS18) as function:
        _, scores, _ = mb.non_maximum_suppression(
            boxes=np.zeros((1, 3, 4), np.float32),
            scores=np.zeros((1, 3, 2), np.float32),
            iou_threshold=np.float32(0.5),
            max_boxes=2,
        )
        function.set_outputs([mb.add(x=scores, y=np.float32(0), name="result")])
    program = Program()
    program.add_function("main", function)
    with pytest.raises(errors.UnsupportedOpError, match="non_maximum_suppression") as caught:
        sim.run(program, {"x": np.zeros((1, 4, 8, 8), F32)})
    assert isinstance(caught.value, NotImplementedError)


def test_bad_feeds_and_options_are_refused(rng: np.random.Generator) -> None:
    program = anekit.compile(lambda v: v + 1, np.zeros((2, 2), F32), passes=False)
    with pytest.raises(errors.ProgramError, match="missing input 'v'"):
        sim.run(program.program, {})
    with pytest.raises(errors.ProgramError, match="unknown input"):
        sim.run(program.program, {"v": np.zeros((2, 2), F32), "w": np.zeros(1)})
    with pytest.raises(errors.ProgramError, match="shape"):
        sim.run(program.program, {"v": np.zeros((3, 2), F32)})
    with pytest.raises(errors.ProgramError, match="unknown simulator mode"):
        sim.run(program.program, {"v": np.zeros((2, 2), F32)}, mode="fp8")
    with pytest.raises(errors.ProgramError, match="no function"):
        sim.run(program.program, {"v": np.zeros((2, 2), F32)}, function="other")


def test_fp16_rounding_matches_numpy_bit_for_bit(rng: np.random.Generator) -> None:
    from anekit.ops.fp16 import round_fp16

    values = np.concatenate(
        [
            rng.standard_normal(50_000).astype(F32) * 1e3,
            rng.standard_normal(50_000).astype(F32) * 1e-6,  # subnormal fp16 range
            np.array([np.nan, np.inf, -np.inf, 65504, 65519.99, 65520, -0.0, 2.0**-25], F32),
        ]
    )
    expected = values.astype(np.float16).astype(F32)
    np.testing.assert_array_equal(round_fp16(values), expected)
    assert round_fp16(np.float32(65520)).shape == ()


#: ane-knowledge.md §1.1, "candidate ANE-safe core set".
ANE_SAFE_CORE_SET = [
    "conv",
    "linear",
    "matmul",
    "einsum",
    "add",
    "sub",
    "mul",
    "real_div",
    "pow",
    "reduce_sum",
    "reduce_mean",
    "reduce_max",
    "reshape",
    "transpose",
    "slice_by_size",
    "split",
    "concat",
    "layer_norm",
    "relu",
    "sigmoid",
    "silu",
    "gelu",
    "rsqrt",
    "conv_transpose",
    "upsample_nearest_neighbor",
    "constexpr_affine_dequantize",
    "constexpr_lut_to_dense",
    "quantize",
    "dequantize",
    "scaled_dot_product_attention",
    "softmax",
]


def test_candidate_ane_safe_core_set_is_simulated() -> None:
    missing = sorted(set(ANE_SAFE_CORE_SET) - set(sim.supported_ops()))
    assert not missing
