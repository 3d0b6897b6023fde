"""No silent garbage: a simulated call that overflows warns (NumericsWarning) naming the
first op and the user's line; strict=True or ANEKIT_STRICT_NUMERICS=1 raises instead."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import anekit
from anekit import errors, nn

HERE = Path(__file__).name


def layer_norm_by_hand(x: Any) -> Any:
    m = x.mean(-1, keepdims=True)
    v = ((x - m) * (x - m)).mean(-1, keepdims=True)  # SQUARE_LINE: 90000 > 65504
    return (x - m) / np.sqrt(v + 1e-5)


def _line_of(marker: str) -> int:
    lines = Path(__file__).read_text().splitlines()
    return next(number for number, text in enumerate(lines, 1) if marker in text)


def _loud() -> np.ndarray:
    return (np.random.default_rng(0).standard_normal((64, 384)) * 300).astype(np.float16)


@pytest.fixture(scope="module")
def unsafe_norm() -> anekit.CompiledProgram:
    """The norm as written (no passes): at RMS 300 its output is all zeros."""
    return anekit.compile(layer_norm_by_hand, _loud(), passes=False)


def test_an_output_zeroed_by_an_overflow_warns_naming_the_op_and_line(
    unsafe_norm: anekit.CompiledProgram,
) -> None:
    where = f"{HERE}:{_line_of('SQUARE_LINE')}"
    expected = rf"output 'output' is all zeros because mul_0 \(mul\) at \S*{re.escape(where)}"
    with pytest.warns(errors.NumericsWarning, match=expected) as caught:
        result = unsafe_norm(_loud())
    assert not np.abs(result).max()  # the garbage the warning is about
    # Ours, attributed to the caller's line (a first import inside the call may warn too).
    ours = [item for item in caught if issubclass(item.category, errors.NumericsWarning)]
    assert Path(ours[0].filename).name == HERE
    assert unsafe_norm.last_run is not None
    assert "is all zeros because mul_0 (mul)" in unsafe_norm.last_run.describe()


def test_strict_raises_instead(
    unsafe_norm: anekit.CompiledProgram, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(errors.NumericsError, match="is all zeros because mul_0"):
        unsafe_norm(_loud(), strict=True)
    monkeypatch.setenv("ANEKIT_STRICT_NUMERICS", "1")
    with pytest.raises(errors.NumericsError, match="is all zeros because mul_0"):
        unsafe_norm(_loud())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.warns(errors.NumericsWarning):
            unsafe_norm(_loud(), strict=False)  # an explicit False wins over the variable


def test_inf_in_an_output_warns_with_its_count_and_origin() -> None:
    x = np.full((4, 8), 300, np.float16)
    program = anekit.compile(lambda v: v * v, x)  # SQUARES_INF
    where = re.escape(f"{HERE}:{_line_of('SQUARES_INF')}")
    pattern = rf"output 'output' holds 32 inf/NaN values: \S+ \(mul\) at \S*{where} produced"
    with pytest.warns(errors.NumericsWarning, match=pattern):
        program(x)


def test_a_constant_output_after_an_overflow_warns() -> None:
    def saturated(v: Any) -> Any:
        return np.minimum(v * v, 7.0) * 0 + 3  # the square overflows, the output is 3

    x = np.full((4, 8), 300, np.float16)
    program = anekit.compile(saturated, x, passes=False)
    with pytest.warns(errors.NumericsWarning, match=r"is constant \(3\) because mul_0"):
        program(x)


def test_an_overflow_that_zeroes_some_rows_warns() -> None:
    """RMS 13 over 384 channels: about half the rows' sums of squares overflow."""
    x = (np.random.default_rng(0).standard_normal((64, 384)) * 13).astype(np.float16)
    program = anekit.compile(layer_norm_by_hand, x, passes=False)
    pattern = r"at \S+ produced inf/NaN; the outputs are finite but computed from it"
    with pytest.warns(errors.NumericsWarning, match=pattern):
        result = program(x)
    zero_rows = int(np.sum(~np.abs(result).any(axis=1)))
    assert 0 < zero_rows < 64


def test_healthy_runs_and_honest_zeros_do_not_warn(rng: np.random.Generator) -> None:
    x = rng.standard_normal((4, 8)).astype(np.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        anekit.compile(nn.silu, x)(x)
        zeros = anekit.compile(lambda v: np.maximum(v, 0) * 0, x)(x)  # zeros, no overflow
        assert not np.abs(zeros).max()
        anekit.compile(layer_norm_by_hand, _loud())(_loud())  # the pass makes it safe


def test_an_input_beyond_fp16_warns_and_is_described() -> None:
    program = anekit.compile(lambda v: v * 0.5, np.zeros((2, 4), np.float16))
    values = np.array([[70000, 1, 2, 3], [-80000, 4, 5, 6]], np.float32)
    with pytest.warns(errors.NumericsWarning) as caught:
        program(values)
    message = str(caught[0].message)
    assert "input 'v': 2 value(s) beyond float16's range (largest |value| 80000" in message
    assert program.last_run is not None
    assert "became inf in the cast" in program.last_run.describe()
    with pytest.raises(errors.NumericsError, match="input 'v': 2 value"):
        program(values, strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        program(np.array([[65504, 1, 2, 3], [-1, 4, 5, 6]], np.float32))  # in range: quiet


def test_fp32_mode_reports_fp32_accumulation(rng: np.random.Generator) -> None:
    from anekit import sim

    x = rng.standard_normal((4, 8)).astype(np.float32)
    program = anekit.compile(lambda v: v.sum(axis=1), x, passes=False)
    result = sim.run(program.program, {"v": x}, mode="fp32", accumulation="fp16")
    assert result.report.accumulation == "fp32"
