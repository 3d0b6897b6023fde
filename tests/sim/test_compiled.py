"""The compiled engine (one ONNX Runtime graph) agrees with the interpreter, which
defines the simulator's semantics, and hands over to it whenever it must."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import anekit
from anekit import demo, errors, nn, sim
from anekit.ops.numerics import Numerics
from anekit.sim import compiled

F32 = np.float32


def both(fn: Any, *args: np.ndarray, mode: Any = "ane") -> tuple[Any, Any]:
    program = anekit.compile(fn, *args, passes=False)
    feeds = {str(spec.name): arg for spec, arg in zip(program.input_specs, args, strict=True)}
    assert compiled.cached(program.program.functions["main"], Numerics(mode)) is not None
    fast = sim.run(program.program, feeds, mode=mode, executor="compiled")
    slow = sim.run(program.program, feeds, mode=mode, executor="interpreter")
    return fast, slow


@pytest.mark.parametrize("mode", ["ane", "fp32"])
def test_ffn_block_agrees(mode: Any) -> None:
    ffn, x = demo.make_ffn(256, 512), demo.example_input(64, 256)
    fast, slow = both(ffn, x, mode=mode)
    got, want = fast.outputs["output"].astype(F32), slow.outputs["output"].astype(F32)
    # Both accumulate matmuls in fp32 and round once; summation order may differ, so an
    # fp16 result can land one ulp apart.
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)
    assert [(s.name, s.op_type) for s in fast.report.ops] == [
        (s.name, s.op_type) for s in slow.report.ops
    ]
    for a, b in zip(fast.report.ops, slow.report.ops, strict=True):
        assert a.max_abs == pytest.approx(b.max_abs, rel=1e-2, abs=1e-3)


def test_attention_block_agrees(rng: np.random.Generator) -> None:
    wq = (rng.standard_normal((64, 64)) / 8).astype(F32)
    gamma = (1 + 0.1 * rng.standard_normal(64)).astype(F32)

    def block(x: Any) -> Any:
        h = nn.layer_norm(x, gamma, axis=-1)
        q = nn.linear(h, wq)
        scores = nn.softmax((q @ h.T) * 0.125, axis=-1)
        return nn.gelu(scores @ h) + x

    fast, slow = both(block, rng.standard_normal((32, 64)).astype(np.float16))
    np.testing.assert_allclose(
        fast.outputs["output"].astype(F32), slow.outputs["output"].astype(F32), rtol=5e-3, atol=5e-3
    )


def test_cliff_rules_fire_in_the_compiled_engine() -> None:
    x = np.full((2, 64), 30.0, F32)
    w = np.full((64, 4), 20.0, F32)
    fast, slow = both(lambda v: v @ w, x)
    assert [w.rule for w in fast.report.warnings] == [w.rule for w in slow.report.warnings]
    assert fast.report.warnings_for("ane.matmul_saturation")
    logs, _ = both(lambda v: np.log(v), np.array([[1e-6, 1.0]], F32))
    assert logs.report.warnings_for("ane.small_log_input")
    sliced, _ = both(lambda v: v[:, 2:] * 1, np.full((2, 8), 5000.0, F32))
    assert sliced.report.warnings_for("ane.width_slice_saturation")


def test_inf_or_nan_hands_over_to_the_interpreter() -> None:
    program = anekit.compile(lambda v: np.exp(v) * 2, np.zeros((2, 4), F32), passes=False)
    result = sim.run(program.program, {"v": np.full((2, 4), 20.0, F32)}, mode="ane")
    first = result.report.first_nonfinite
    assert first is not None
    assert first.op_type == "exp"
    with pytest.raises(errors.ProgramError, match="inf/NaN"):
        sim.run(program.program, {"v": np.full((2, 4), 20.0, F32)}, mode="ane", executor="compiled")


def test_values_onnx_runtime_refuses_hand_over_to_the_interpreter() -> None:
    """An index out of bounds for a gather with validate_indices: the compiled graph's
    Gather fails inside ONNX Runtime; the interpreter then names the op and the reason."""
    import coremltools as ct
    from coremltools.converters.mil.mil import Builder as mb
    from coremltools.converters.mil.mil import types

    specs = [mb.TensorSpec(shape=(2, 3)), mb.TensorSpec(shape=(2,), dtype=types.int32)]

    def build(x: Any, i: Any) -> Any:
        return mb.gather(x=x, indices=i, axis=0, validate_indices=True, name="picked")

    program = mb.program(input_specs=specs, opset_version=ct.target.iOS17)(build)
    assert compiled.cached(program.functions["main"], Numerics("fp32")) is not None
    feeds = {"x": np.ones((2, 3), F32), "i": np.array([0, 5], np.int32)}
    with pytest.raises(errors.ProgramError, match=r"'picked'.*out of bounds"):
        sim.run(program, feeds, mode="fp32")
    with pytest.raises(errors.ProgramError, match="failed on these values"):
        sim.run(program, feeds, mode="fp32", executor="compiled")
    good = sim.run(program, {**feeds, "i": np.array([1, 0], np.int32)}, mode="fp32")
    np.testing.assert_array_equal(good.outputs["picked"], np.ones((2, 3), F32))


def test_internal_overflow_hands_over_to_the_interpreter() -> None:
    x = np.zeros((1, 64, 1, 8), F32)
    x[:, ::2] = 300.0
    x[:, 1::2] = -300.0
    program = anekit.compile(lambda v: nn.layer_norm(v, axis=1), x, passes=False)
    result = sim.run(program.program, {"v": x}, mode="ane")
    assert result.report.warnings_for("sim.internal_overflow")


def test_programs_it_cannot_lower_run_in_the_interpreter() -> None:
    program = anekit.compile(lambda v: np.pad(v, 1) * 2, np.ones((2, 3), F32), passes=False)
    function = program.program.functions["main"]
    assert compiled.cached(function, Numerics("ane")) is None
    result = sim.run(program.program, {"v": np.ones((2, 3), F32)})
    assert result.outputs["output"].shape == (4, 5)
    with pytest.raises(errors.ProgramError, match="cannot run"):
        sim.run(program.program, {"v": np.ones((2, 3), F32)}, executor="compiled")
    with pytest.raises(errors.ProgramError, match="unknown executor 'gpu'"):
        sim.run(program.program, {"v": np.ones((2, 3), F32)}, executor="gpu")
    with pytest.warns(DeprecationWarning, match=r"engine=\.\.\.\) is now executor="):
        old = sim.run(program.program, {"v": np.ones((2, 3), F32)}, engine="interpreter")
    np.testing.assert_array_equal(old.outputs["output"], result.outputs["output"])
    with pytest.raises(errors.ProgramError, match="give executor, not engine too"):
        sim.run(program.program, {"v": np.ones((2, 3), F32)}, executor="compiled", engine="x")
    with pytest.warns(DeprecationWarning, match="is now executor="):
        single = sim.run_op("add", np.ones(3, F32), np.ones(3, F32), engine="interpreter")
    np.testing.assert_array_equal(single, np.full(3, 2, F32))


def test_outputs_that_ended_constant_or_zero_are_marked_by_both_engines() -> None:
    def block(x: Any) -> Any:
        zeroed = np.maximum(x, 0.0)  # x is all negative: every element 0
        flat = zeroed + 3.0  # every element 3
        return flat * x  # varies

    x = -np.linspace(1.0, 2.0, 64, dtype=F32).reshape(2, 32)
    fast, slow = both(block, x)
    for result in (fast, slow):
        by_type = {stats.op_type: stats for stats in result.report.ops}
        assert by_type["maximum"].constant == 0.0 and by_type["add"].constant == 3.0
        assert by_type["mul"].constant is None
        assert [op["constant"] for op in result.report.to_json()["ops"]] == [0.0, 3.0, None]


def test_a_compiled_function_is_kept_with_its_function_and_freed_with_it() -> None:
    import gc
    import weakref

    ffn, x = demo.make_ffn(64, 128), demo.example_input(8, 64)
    program = anekit.compile(ffn, x, passes=False)
    func = program.program.functions["main"]
    first = compiled.cached(func, Numerics("ane"))
    assert first is not None and compiled.cached(func, Numerics("ane")) is first  # reused
    # the compiled form holds the function's ops (its report names them): a table keyed
    # weakly by the function would keep both alive for ever (the MiniLM page's 6 buckets
    # grew the simulator's memory from 2.1 to 5.4 GB)
    # a copy or a pickle of the program carries none of it (an ONNX Runtime session can be
    # neither): it compiles its own
    import copy
    import pickle

    twin = copy.deepcopy(program.program).functions["main"]
    assert getattr(twin, "_anekit_compiled", {}) == {}
    assert pickle.loads(pickle.dumps(func._anekit_compiled)) == {}
    assert compiled.cached(twin, Numerics("ane")) is not first
    del twin
    dead = weakref.ref(func), weakref.ref(first)
    del program, func, first
    gc.collect()
    assert [ref() for ref in dead] == [None, None]
