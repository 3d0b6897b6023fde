"""CompiledProgram: specs, MIL text, saving .mlpackage, and running."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import coremltools as ct
import numpy as np
import pytest

import anekit
from anekit import errors
from anekit._coremltools import core_ml_runtime_available
from tracing import run_program

F32 = np.float32


def two_outputs(x: Any, ids: Any) -> Any:
    scaled = x * 2
    return {"scaled": scaled, "picked": ids + 1}


@pytest.fixture
def program() -> anekit.CompiledProgram:
    return anekit.compile(
        two_outputs, np.ones((2, 40), np.float16), np.zeros((3,), np.int32), passes=False
    )


def test_specs_use_parameter_and_dict_names(program: anekit.CompiledProgram) -> None:
    assert [spec.describe() for spec in program.input_specs] == [
        "x: float16[2, 40]",
        "ids: int32[3]",
    ]
    assert [spec.describe() for spec in program.output_specs] == [
        "scaled: float16[2, 40]",
        "picked: int32[3]",
    ]
    assert "two_outputs" in program.source
    assert "CompiledProgram" in repr(program) and "2 ops" in repr(program)


def test_names_can_be_given(rng: np.random.Generator) -> None:
    program = anekit.compile(
        lambda a, b: (a + b, a - b),
        np.ones(4, F32),
        np.ones(4, F32),
        input_names=["left", "right"],
        output_names=["total", "difference"],
    )
    assert [spec.name for spec in program.input_specs] == ["left", "right"]
    assert [spec.name for spec in program.output_specs] == ["total", "difference"]
    spec_input = anekit.TensorSpec((4,), np.float16, name="tokens")
    program = anekit.compile(lambda a: a * 2, spec_input)
    assert program.input_specs[0].describe() == "tokens: float16[4]"


def test_invalid_names_are_refused() -> None:
    with pytest.raises(errors.TraceError, match="not a valid identifier"):
        anekit.compile(lambda a: a, np.ones(4, F32), input_names=["not valid"])
    with pytest.raises(errors.TraceError, match="already the name of an input"):
        anekit.compile(lambda a: a + 1, np.ones(4, F32), output_names=["a"])
    with pytest.raises(errors.TraceError, match="unique"):
        anekit.compile(lambda a, b: a + b, np.ones(4, F32), np.ones(4, F32), input_names=["a", "a"])


def test_special_outputs_get_ops() -> None:
    program = anekit.compile(lambda x: (x, x.sum(), x.sum()), np.ones((2, 3), F32), passes=False)
    outputs = run_program(program, np.arange(6, dtype=F32).reshape(2, 3))
    np.testing.assert_array_equal(outputs[0], np.arange(6, dtype=F32).reshape(2, 3))
    assert outputs[1].shape == (1,) and outputs[1][0] == 15
    assert outputs[2][0] == 15
    assert [spec.shape for spec in program.output_specs] == [(2, 3), (1,), (1,)]


def test_mil_text_names_ops_weights_and_lines(program: anekit.CompiledProgram) -> None:
    weight = np.ones((8, 40), np.float16)
    traced = anekit.compile(lambda x: x @ weight.T, np.ones((2, 40), np.float16), passes=False)
    text = traced.mil_text()
    assert "func main(%x: fp16[2, 40])" in text
    assert "%weight_T: fp16[40, 8] = const(<320 values>)" in text
    assert "matmul(" in text and "test_program.py:" in text
    assert text.count("\n") >= 3


def test_same_function_traces_to_the_same_text() -> None:
    weight = np.ones((8, 40), np.float16)

    def fn(x: Any) -> Any:
        return np.tanh(x @ weight.T).sum(axis=-1)

    first = anekit.compile(fn, np.ones((2, 40), np.float16)).mil_text()
    second = anekit.compile(fn, np.ones((2, 40), np.float16)).mil_text()
    assert first == second


def test_save_writes_a_loadable_mlpackage(program: anekit.CompiledProgram, tmp_path: Path) -> None:
    path = program.save(tmp_path / "nested" / "model.mlpackage")
    assert path.is_dir() and (path / "Manifest.json").is_file()
    model = ct.models.MLModel(str(path), skip_model_load=True)
    spec = model.get_spec()
    assert [item.name for item in spec.description.input] == ["x", "ids"]
    assert [item.name for item in spec.description.output] == ["scaled", "picked"]
    metadata = dict(spec.description.metadata.userDefined)
    assert metadata["anekit.source"] == program.source
    assert "anekit.version" in metadata
    function = spec.mlProgram.functions["main"]
    assert function.opset == "CoreML8"  # macOS 15 / iOS 18
    ops = [op.type for op in function.block_specializations[function.opset].operations]
    assert "mul" in ops and "add" in ops
    program.save(path)  # overwriting works


def test_save_refuses_bad_paths(program: anekit.CompiledProgram, tmp_path: Path) -> None:
    with pytest.raises(errors.ProgramError, match=r"\.mlpackage"):
        program.save(tmp_path / "model.mlmodel")
    blocker = tmp_path / "file.mlpackage"
    blocker.write_text("not a package")
    with pytest.raises(errors.ProgramError, match="not a directory"):
        program.save(blocker)


def test_deployment_target_is_checked() -> None:
    program = anekit.compile(lambda x: x + 1, np.ones(3, F32), deployment_target="iOS17")
    assert program.program.functions["main"].opset_version == ct.target.iOS17
    with pytest.raises(errors.ProgramError, match="unknown deployment target"):
        anekit.compile(lambda x: x + 1, np.ones(3, F32), deployment_target="macOS9")


@pytest.mark.skipif(core_ml_runtime_available(), reason="off macOS the simulator runs programs")
def test_call_runs_in_the_simulator_off_macos(program: anekit.CompiledProgram) -> None:
    x = np.linspace(-1, 1, 80, dtype=np.float16).reshape(2, 40)
    result = program(x, np.arange(3, dtype=np.int32))
    np.testing.assert_array_equal(result["scaled"], x * 2)
    np.testing.assert_array_equal(result["picked"], np.arange(1, 4))
    assert program.last_run is not None
    assert program.last_run.simulated
    assert program.last_run.backend == "sim"
    assert "simulated" in program.last_run.describe()
    assert program.last_run.numerics.mode == "ane"


def test_call_in_fp32_mode_and_unknown_backend(program: anekit.CompiledProgram) -> None:
    x = np.full((2, 40), 60000, np.float16)
    with pytest.warns(errors.NumericsWarning, match="output 'scaled' holds 80 inf/NaN values: "):
        ane = program(x, np.zeros(3, np.int32), backend="sim")
    assert np.isinf(ane["scaled"]).all()  # 120000 overflows fp16
    with pytest.warns(errors.NumericsWarning, match="output 'scaled' holds 80 inf/NaN values"):
        reference = program(x, np.zeros(3, np.int32), mode="fp32")  # fp16 cannot hold it
    assert reference["scaled"].dtype == np.float16  # the declared output type
    assert program.last_run is not None
    assert program.last_run.numerics.mode == "fp32"
    with pytest.raises(errors.BackendUnavailableError, match="unknown backend"):
        program(x, np.zeros(3, np.int32), backend="tpu")


def test_call_validates_inputs_first(program: anekit.CompiledProgram) -> None:
    with pytest.raises(errors.ProgramError, match="takes 2 input"):
        program(np.ones((2, 40), np.float16))
    with pytest.raises(errors.ProgramError, match="static shapes"):
        program(np.ones((3, 40), np.float16), np.zeros(3, np.int32))
    with pytest.raises(errors.ProgramError, match="must be int32"):
        program(np.ones((2, 40), np.float16), np.zeros(3, np.float32))


@pytest.mark.macos
def test_call_runs_on_core_ml(program: anekit.CompiledProgram) -> None:
    x = np.linspace(-1, 1, 80, dtype=np.float16).reshape(2, 40)
    result = program(x, np.arange(3, dtype=np.int32))
    np.testing.assert_allclose(result["scaled"], x * 2, rtol=1e-3)
    np.testing.assert_array_equal(result["picked"], np.arange(1, 4))


@pytest.mark.macos
def test_call_runs_the_demo_ffn_on_core_ml() -> None:
    from anekit import demo

    ffn, x = demo.make_ffn(), demo.example_input()
    program = anekit.compile(ffn, x)
    got = program(x).astype(np.float32)
    want = ffn(x.astype(np.float32)).astype(np.float32)
    assert np.abs(got - want).max() / np.abs(want).max() < 1e-2


@pytest.mark.macos
def test_core_ml_runs_carry_the_compute_plan_and_take_compute_units() -> None:
    from anekit import demo

    ffn, x = demo.make_ffn(), demo.example_input()
    program = anekit.compile(ffn, x)
    program(x, backend="coreml")
    assert program.last_run is not None and program.last_run.residency
    assert program.last_run.residency.get("ane", 0) > 0  # the demo FFN is all ANE ops
    program(x, backend="coreml", mode="CPU_ONLY")
    assert program.last_run.device == "Core ML (CPU_ONLY)"
    with pytest.raises(ValueError, match="compute units"):
        program(x, backend="coreml", mode="NPU")


def test_saved_package_computes_in_fp16_with_fp32_io(tmp_path: Path) -> None:
    program = anekit.compile(lambda x: np.tanh(x) * 2, np.ones((4, 32), F32))
    path = program.save(tmp_path / "f32.mlpackage")
    spec = ct.models.MLModel(str(path), skip_model_load=True).get_spec()
    assert (
        spec.description.input[0].type.multiArrayType.dataType
        == ct.proto.FeatureTypes_pb2.ArrayFeatureType.FLOAT32
    )
    function = spec.mlProgram.functions["main"]
    ops = function.block_specializations[function.opset].operations
    tanh = next(op for op in ops if op.type == "tanh")
    assert tanh.outputs[0].type.tensorType.dataType == ct.proto.MIL_pb2.DataType.FLOAT16
    assert [op.type for op in ops].count("cast") == 2  # fp32 -> fp16 in, fp16 -> fp32 out


def test_a_package_stores_each_small_const_once() -> None:
    """coremltools shares only consts of 100+ elements by default; anekit's packages share
    every duplicate (anekit._coremltools.shared_consts), and the pass's process-wide
    threshold is coremltools' default again afterwards."""
    from coremltools.converters.mil.mil.passes.pass_registry import PASS_REGISTRY

    def f(x: Any) -> Any:
        return (x + 0.25) * 3.5 + (x - 0.25) * 3.5 + np.tanh(x) * 3.5

    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32)
    program = anekit.compile(f, x, passes=False)
    threshold = PASS_REGISTRY["common::const_deduplication"].const_threshold
    lowered = program.lowered().functions["main"]
    consts = [op.outputs[0].val for op in lowered.operations if op.op_type == "const"]
    floats = [float(v) for v in consts if np.asarray(v).dtype.kind == "f" and np.size(v) == 1]
    assert floats.count(3.5) == 1  # three uses, one const
    assert PASS_REGISTRY["common::const_deduplication"].const_threshold == threshold == 100
    spec = program.to_mlmodel().get_spec()
    (block,) = spec.mlProgram.functions["main"].block_specializations.values()
    assert sum(op.type == "const" for op in block.operations) == len(consts)
    np.testing.assert_allclose(program(x, backend="sim"), f(x), atol=2e-2)
