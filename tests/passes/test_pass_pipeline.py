"""The pipeline: names, options, the report, determinism, idempotence and errors."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import anekit
from anekit import errors, nn, sim
from anekit.passes import ANE_PIPELINE, OPTIONAL_PASSES, pipeline, run_pipeline
from passkit import only, run


def _model(rng: np.random.Generator) -> Any:
    w = (rng.standard_normal((64, 64)) / 8).astype(np.float16)

    def block(x: Any) -> Any:
        h = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-5)
        h = nn.gelu(h @ w.T) @ w.T
        return nn.softmax(h @ w.T, axis=-1)

    return block


def test_the_default_pipeline_and_its_options() -> None:
    assert pipeline() == list(ANE_PIPELINE)
    assert "ane::gelu_tanh" in OPTIONAL_PASSES and "ane::gelu_tanh" not in ANE_PIPELINE
    chosen = pipeline(disable=["to_bc1s", "ane::no_tile"], enable=["gelu_tanh"])
    assert "ane::to_bc1s" not in chosen and "ane::no_tile" not in chosen
    assert chosen[-1] == "ane::gelu_tanh"


def test_unknown_passes_are_refused() -> None:
    with pytest.raises(errors.PassError, match="unknown pass 'no_such_pass'"):
        pipeline(disable=["no_such_pass"])
    with pytest.raises(errors.PassError, match="to_bc1s"):
        anekit.compile(np.tanh, np.zeros((4, 32), np.float16), extra_passes=["bc1s"])


def test_compile_reports_what_the_passes_did(rng: np.random.Generator) -> None:
    program = anekit.compile(_model(rng), np.zeros((1, 32, 64), np.float16))
    report = program.pass_report
    assert [item.name for item in report.results] == list(ANE_PIPELINE)
    assert report.result("fp16_safe_norm").changed
    assert len(report.result("to_bc1s").changes) == 3
    assert not report.result("attention_split").changed
    payload = json.loads(json.dumps(report.to_json()))
    assert [item["pass"] for item in payload["passes"]] == list(ANE_PIPELINE)
    assert "ane::to_bc1s: 3 rewrites" in report.summary()
    skipped = anekit.compile(
        _model(rng), np.zeros((1, 32, 64), np.float16), skip_passes=["to_bc1s"]
    )
    assert skipped.pass_report.skipped == ["ane::to_bc1s"]
    assert (
        anekit.compile(_model(rng), np.zeros((1, 32, 64), np.float16), passes=False).pass_report
        is None
    )


def test_the_pipeline_keeps_results_and_is_deterministic(rng: np.random.Generator) -> None:
    model = _model(rng)
    x = rng.standard_normal((1, 32, 64)).astype(np.float32)
    plain = anekit.compile(model, x, passes=False)
    first, second = anekit.compile(model, x), anekit.compile(model, x)
    assert first.mil_text() == second.mil_text()
    want = only(run(plain.program, {"x": x}))
    got = only(run(first.program, {"x": x}))
    # exact up to rounding (the RMSNorm's epsilon too: it is scaled per row)
    assert np.abs(got - want).max() / np.abs(want).max() < 1e-5


def test_a_second_run_changes_nothing(rng: np.random.Generator) -> None:
    program = anekit.compile(_model(rng), np.zeros((1, 32, 64), np.float16))
    again = run_pipeline(program.program)
    assert not again.changed, again.summary()


def test_the_simulator_sees_a_program_rewritten_in_place(rng: np.random.Generator) -> None:
    """The compiled simulator caches per function; a pass must invalidate it."""
    program = anekit.compile(nn.gelu, np.zeros((4, 64), np.float32), passes=False).program
    x = {"x": rng.standard_normal((4, 64)).astype(np.float32)}
    exact = only(sim.run(program, x, mode="fp32")).copy()
    run_pipeline(program, disable=ANE_PIPELINE, enable=["gelu_tanh"])
    assert not np.array_equal(only(sim.run(program, x, mode="fp32")), exact)


def test_pass_options_are_set_by_name(rng: np.random.Generator) -> None:
    x = rng.standard_normal((1, 32, 64)).astype(np.float16)
    scaled = anekit.compile(_model(rng), x, pass_options={"fp16_safe_norm": {"scale_exponent": 0}})
    (function,) = scaled.program.functions.values()
    assert not any(op.name.endswith("_prescale") for op in function.operations)
    with pytest.raises(
        errors.PassError, match="has no option 'clamp'; its options are logit_clamp"
    ):
        anekit.compile(_model(rng), x, pass_options={"prescale_query": {"clamp": 50}})
    with pytest.raises(errors.PassError, match="unknown pass"):
        anekit.compile(_model(rng), x, pass_options={"no_such": {}})
