"""bench/mil_op_suite.py: coremltools' MIL op tests with the simulator as their executor."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "mil_op_suite.py"


@pytest.fixture(scope="module")
def suite() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mil_op_suite", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("mil_op_suite", module)
    spec.loader.exec_module(module)
    return module


def test_a_sample_is_evenly_spaced_and_keeps_both_ends(suite: ModuleType) -> None:
    items = list(range(10))
    assert suite._sampled(items, 20) == items
    assert suite._sampled(items, 4) == [0, 3, 6, 9]
    assert suite._sampled(items, 1) == [0]


def test_the_summary_counts_only_what_reached_the_executor(suite: ModuleType) -> None:
    rows = [
        {"test": "test_conv.py::TestConv::test_a[x]", "file": "iOS17/test_conv.py",
         "outcome": "passed", "reached": True, "excluded": None},
        {"test": "test_conv.py::TestConv::test_a[y]", "file": "iOS17/test_conv.py",
         "outcome": "failed", "reached": True, "excluded": None},
        {"test": "test_conv.py::TestConv::test_eval[x]", "file": "iOS17/test_conv.py",
         "outcome": "failed", "reached": False, "excluded": None},
        {"test": "test_image.py::TestResize::test_b[x]", "file": "iOS16/test_image.py",
         "outcome": "skipped", "reached": False, "excluded": "image input"},
        {"test": "test_conv.py::TestConv::test_a[z]", "file": "iOS17/test_conv.py",
         "outcome": "skipped", "reached": True, "excluded": None, "xfail": True},
    ]  # fmt: skip
    summary = suite.summarise(rows)
    assert (summary["reached"], summary["expected_to_fail"], summary["counted"]) == (3, 1, 2)
    assert (summary["passed"], summary["pass_rate"]) == (1, 0.5)
    assert summary["excluded"] == {"image input": 1}
    assert summary["not_reached"] == {"failed": 1}
    assert summary["failing_families"] == {
        "iOS17/test_conv.py::TestConv": {"failed": 1, "reached": 2}
    }


def test_a_prediction_is_the_simulators_run_of_the_models_program(
    suite: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The patched predict feeds the converted model's MIL program in each input's own
    dtype and returns the simulator's outputs by name; ane mode stores fp16."""
    from coremltools.converters.mil.mil import Builder as mb
    from coremltools.converters.mil.mil import Program, types

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 3), dtype=types.fp32)])  # type: ignore[untyped-decorator]
    def program(x: Any) -> Any:
        return mb.mul(x=x, y=np.float32(1.0 / 3.0), name="out")

    class Model:
        _mil_program: Program = program

    feeds = {"x": np.array([[1.0, 2.0, 3.0]])}  # float64, as a test may give it
    monkeypatch.setenv(suite.MODE_ENV, "fp32")
    suite._current.clear()
    out = suite._simulated_predict(Model(), dict(feeds))
    assert suite._current["reached"] is True
    np.testing.assert_allclose(out["out"], feeds["x"] / 3.0, rtol=1e-6)
    monkeypatch.setenv(suite.MODE_ENV, "ane")
    ane = suite._simulated_predict(Model(), dict(feeds))
    assert not np.array_equal(ane["out"], out["out"])  # rounded through fp16
    np.testing.assert_allclose(ane["out"], feeds["x"] / 3.0, rtol=1e-3)
    suite._current.clear()
    with pytest.raises(pytest.skip.Exception, match="stateful"):
        suite._simulated_predict(Model(), dict(feeds), state=object())
    assert suite._current["excluded"] == "stateful model"


def test_a_refused_run_fails_as_core_mls_predict_does(
    suite: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index out of bounds with validate_indices: RuntimeError with Core ML's words."""
    import coremltools as ct
    from coremltools.converters.mil.mil import Builder as mb
    from coremltools.converters.mil.mil import Program, types

    specs = [mb.TensorSpec(shape=(2, 3)), mb.TensorSpec(shape=(2,), dtype=types.int32)]

    @mb.program(input_specs=specs, opset_version=ct.target.iOS17)  # type: ignore[untyped-decorator]
    def program(x: Any, i: Any) -> Any:
        return mb.gather(x=x, indices=i, axis=0, validate_indices=True)

    class Model:
        _mil_program: Program = program

    monkeypatch.setenv(suite.MODE_ENV, "fp32")
    feeds = {"x": np.ones((2, 3), np.float32), "i": np.array([0, 5], np.int32)}
    with pytest.raises(RuntimeError, match="Unable to compute the prediction using ML Program"):
        suite._simulated_predict(Model(), feeds)
