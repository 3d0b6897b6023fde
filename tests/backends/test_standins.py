"""The stand-ins (tests/standins.py) refuse what the real APIs refuse.

Where the real function's source is installed here (coremltools, onnxruntime), the
stand-in's messages are checked against that source, so an upgrade that changes the
contract shows up here; where it is not (Core ML through PyObjC), the values are the
ones Apple's headers and PyObjC's own tests state.
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper

import anekit
from anekit import errors
from anekit._coremltools import ct
from anekit.backends import coreml, coreml_nogil
from standins import (
    CPU,
    CUDA,
    ML_COMPUTE_UNITS,
    ML_DATA_TYPES,
    PLAN_DEVICES,
    CoreMLComputePlan,
    CoreMLTools,
    OnnxRuntime,
    PyObjCCoreML,
    fake_mlpackage,
)

# -- coremltools ---------------------------------------------------------------------


@pytest.fixture
def coremltools(monkeypatch: pytest.MonkeyPatch) -> CoreMLTools:
    return CoreMLTools().install(monkeypatch)


def test_compile_model_refuses_a_destination_not_ending_in_mlmodelc(
    coremltools: CoreMLTools, tmp_path: Path
) -> None:
    package = str(fake_mlpackage(tmp_path / "m.mlpackage"))
    for destination in ("m.mlmodelc.partial", "m.partial", "m"):
        with pytest.raises(Exception, match=r'must have "\.mlmodelc" file extension'):
            ct.models.utils.compile_model(package, str(tmp_path / destination))
    assert coremltools.compiles == []  # refused before compiling anything
    compiled = ct.models.utils.compile_model(package, str(tmp_path / "m.mlmodelc/"))
    assert compiled == str(tmp_path / "m.mlmodelc/") and Path(compiled).is_dir()


def test_compile_model_takes_a_str_path_to_a_package(
    coremltools: CoreMLTools, tmp_path: Path
) -> None:
    package = fake_mlpackage(tmp_path / "m.mlpackage")
    with pytest.raises(TypeError, match="It should be a spec or model file path"):
        ct.models.utils.compile_model(package, str(tmp_path / "a.mlmodelc"))  # a Path
    with pytest.raises(ValueError, match="Invalid model file path"):
        ct.models.utils.compile_model(str(tmp_path / "m.onnx"), str(tmp_path / "b.mlmodelc"))


def test_compile_model_moves_into_an_existing_destination(
    coremltools: CoreMLTools, tmp_path: Path
) -> None:
    """As shutil.move does in coremltools: a destination that exists gets the compiled
    model inside it, which is why compiles must go to a path that does not exist."""
    package = str(fake_mlpackage(tmp_path / "m.mlpackage"))
    (tmp_path / "m.mlmodelc").mkdir()
    ct.models.utils.compile_model(package, str(tmp_path / "m.mlmodelc"))
    assert not (tmp_path / "m.mlmodelc" / "coremldata.bin").exists()
    (nested,) = (tmp_path / "m.mlmodelc").iterdir()
    assert (nested / "coremldata.bin").is_file()


def test_compiled_ml_model_checks_its_arguments(coremltools: CoreMLTools, tmp_path: Path) -> None:
    compiled = ct.models.utils.compile_model(
        str(fake_mlpackage(tmp_path / "m.mlpackage")), str(tmp_path / "m.mlmodelc")
    )
    load = ct.models.CompiledMLModel
    with pytest.raises(TypeError, match='"compute_units" parameter must be of type'):
        load(compiled, compute_units="CPU_AND_NE")
    with pytest.raises(TypeError, match=r'"compute_units" parameter'):
        load(compiled, compute_units=ct.ComputeUnit.CPU_AND_NE.value)
    with pytest.raises(TypeError, match='"path" parameter must be of type "str"'):
        load(Path(compiled))
    with pytest.raises(TypeError, match='"function_name" parameter must be of type "str"'):
        load(compiled, function_name=128)
    with pytest.raises(RuntimeError, match="not a compiled model"):
        load(str(tmp_path / "m.mlpackage"))
    loaded = load(compiled, ct.ComputeUnit.CPU_AND_GPU, "seq128")
    assert loaded.compute_units is ct.ComputeUnit.CPU_AND_GPU and loaded.function_name == "seq128"


def test_the_coremltools_contract_is_the_installed_one() -> None:
    """The stand-in's checks, in the installed coremltools' own words."""
    from coremltools.models._compiled_model import CompiledMLModel

    compile_source = inspect.getsource(ct.models.utils.compile_model)
    assert 'endswith(".mlmodelc")' in compile_source
    assert 'parameter must have \\".mlmodelc\\" file extension' in compile_source
    assert "_shutil.move(original_compiled_model_path, destination_path)" in compile_source
    assert "Invalid model file path" in compile_source
    check = inspect.getsource(CompiledMLModel._init_check)
    for text in (
        'The "path" parameter must be of type "str".',
        'The "compute_units" parameter must be of type: "coremltools.ComputeUnit".',
        'The "function_name" parameter must be of type "str".',
    ):
        assert text in check
    assert list(inspect.signature(CompiledMLModel.__init__).parameters)[1:4] == [
        "path",
        "compute_units",
        "function_name",
    ]
    assert set(coreml.COMPUTE_UNITS) <= set(ct.ComputeUnit.__members__)


# -- Core ML's compute plan, through coremltools ------------------------------------


@pytest.fixture
def compiled_tiny(coremltools: CoreMLTools, tmp_path: Path) -> tuple[str, str]:
    """A real one-matmul package and its (stand-in) compiled model."""
    weight = np.full((64, 64), 0.01, np.float16)
    program = anekit.compile(lambda x: np.tanh(x @ weight), np.zeros((8, 64), np.float16))
    package = str(program.save(tmp_path / "tiny.mlpackage"))
    return package, ct.models.utils.compile_model(package, str(tmp_path / "tiny.mlmodelc"))


def test_compute_plan_refuses_what_coremltools_and_core_ml_refuse(
    compiled_tiny: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from coremltools.models.compute_plan import MLComputePlan

    stand_in = CoreMLComputePlan().install(monkeypatch)
    package, compiled = compiled_tiny
    load = MLComputePlan.load_from_path
    with pytest.raises(AttributeError, match="'str' object has no attribute 'name'"):
        load(compiled, compute_units="CPU_AND_NE")  # coremltools reads compute_units.name
    with pytest.raises(AttributeError, match="'int' object has no attribute 'name'"):
        load(compiled, compute_units=ct.ComputeUnit.CPU_AND_NE.value)
    with pytest.raises(TypeError, match="incompatible function arguments"):
        load(Path(compiled), ct.ComputeUnit.CPU_AND_NE)  # a std::string in C++
    with pytest.raises(TypeError, match="unexpected keyword argument 'compiled_model_path'"):
        load(compiled_model_path=compiled)  # the docstring's name, not the parameter's
    with pytest.raises(RuntimeError, match="not a compiled model"):
        load(package, ct.ComputeUnit.CPU_AND_NE)  # the package, not its .mlmodelc
    assert stand_in.loads == []
    stand_in.macos = "14.3"
    with pytest.raises(RuntimeError, match=r"only available on macOS >= 14\.4"):
        load(compiled, ct.ComputeUnit.CPU_AND_NE)
    stand_in.macos = "14.4"
    plan = load(path=compiled, compute_units=ct.ComputeUnit.CPU_AND_NE)
    assert stand_in.loads == [(compiled, "CPU_AND_NE")]
    assert isinstance(plan, MLComputePlan)
    assert plan.model_structure.neuralnetwork is None and plan.model_structure.pipeline is None
    operation = plan.model_structure.program.functions["main"].block.operations[0]
    foreign = dataclasses.replace(operation, __proxy__=object())  # not from a compute plan
    with pytest.raises(RuntimeError, match="Unable to cast"):
        plan.get_compute_device_usage_for_mlprogram_operation(foreign)
    gpu = CoreMLComputePlan(place=lambda function, operation: "gpu").install(monkeypatch)
    with pytest.raises(AssertionError, match="CPU_AND_NE cannot place an operation on the gpu"):
        load(compiled, ct.ComputeUnit.CPU_AND_NE)
    assert gpu.loads == []


def test_compute_plan_returns_coremltools_own_objects(
    compiled_tiny: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The structure of the compiled ML program (const ops included, with no usage), the
    devices as coremltools' classes, the costs as weights that sum to 1."""
    from coremltools.models import compute_device as devices
    from coremltools.models import compute_plan as plans

    placed = {"tanh": "cpu"}
    CoreMLComputePlan(
        place=lambda function, operation: placed.get(operation.operator_name, "ane")
    ).install(monkeypatch)
    _, compiled = compiled_tiny
    plan = plans.MLComputePlan.load_from_path(compiled, ct.ComputeUnit.CPU_AND_NE)
    structure = plan.model_structure
    assert isinstance(structure, plans.MLModelStructure)
    function = structure.program.functions["main"]
    assert isinstance(function, plans.MLModelStructureProgramFunction)
    assert [value.name for value in function.inputs] == ["x"]
    assert function.block.output_names == ["output"]
    operations = function.block.operations
    kinds = [operation.operator_name for operation in operations]
    assert "const" in kinds and {"conv", "tanh"} <= set(kinds)
    weights = 0.0
    for operation in operations:
        assert isinstance(operation, plans.MLModelStructureProgramOperation)
        usage = plan.get_compute_device_usage_for_mlprogram_operation(operation)
        cost = plan.get_estimated_cost_for_mlprogram_operation(operation)
        if operation.operator_name == "const":
            assert usage is None and cost is None
            continue
        assert isinstance(usage, plans.MLComputePlanDeviceUsage)
        want = (
            devices.MLCPUComputeDevice
            if operation.operator_name == "tanh"
            else (devices.MLNeuralEngineComputeDevice)
        )
        assert type(usage.preferred_compute_device) is want
        assert {type(item) for item in usage.supported_compute_devices} == {
            devices.MLCPUComputeDevice,
            devices.MLNeuralEngineComputeDevice,
        }
        assert isinstance(cost, plans.MLComputePlanCost) and 0 < cost.weight <= 1
        weights += cost.weight
    assert weights == pytest.approx(1.0)
    (conv,) = [operation for operation in operations if operation.operator_name == "conv"]
    assert set(conv.inputs) >= {"x", "weight"} and conv.blocks == []
    assert conv.inputs["x"].bindings[0].name is not None
    engine = devices.MLNeuralEngineComputeDevice.get_all_compute_devices()[-1]
    assert engine.total_core_count > 0


def test_the_compute_plan_contract_is_the_installed_one() -> None:
    """The stand-in replaces libcoremlpython under coremltools' own Python, whose
    contract is checked here in the installed coremltools' words."""
    from coremltools.models import compute_device, compute_plan

    load = inspect.getsource(compute_plan.MLComputePlan.load_from_path)
    assert "The path must be the location of the ``mlmodelc`` directory." in load
    assert "return _MLModelProxy.get_compute_plan(path, compute_units.name)" in load
    assert list(inspect.signature(compute_plan.MLComputePlan.load_from_path).parameters) == [
        "path",
        "compute_units",
    ]
    assert "isinstance(proxy, _MLComputePlanProxy)" in inspect.getsource(
        compute_plan.MLComputePlan.__init__
    )
    for device in ("CPU", "GPU", "NeuralEngine"):
        init = inspect.getsource(getattr(compute_device, f"ML{device}ComputeDevice").__init__)
        assert f"_ML{device}ComputeDeviceProxy" in init
    fields = {
        cls.__name__: [item.name for item in dataclasses.fields(cls)]
        for cls in (
            compute_plan.MLComputePlanDeviceUsage,
            compute_plan.MLComputePlanCost,
            compute_plan.MLModelStructureProgramOperation,
            compute_plan.MLModelStructureProgramBlock,
            compute_plan.MLModelStructureProgramFunction,
        )
    }
    assert fields == {
        "MLComputePlanDeviceUsage": ["preferred_compute_device", "supported_compute_devices"],
        "MLComputePlanCost": ["weight"],
        "MLModelStructureProgramOperation": [
            "inputs",
            "operator_name",
            "outputs",
            "blocks",
            "__proxy__",
        ],
        "MLModelStructureProgramBlock": ["inputs", "operations", "output_names"],
        "MLModelStructureProgramFunction": ["inputs", "block"],
    }
    assert set(PLAN_DEVICES) == set(ct.ComputeUnit.__members__) >= set(coreml.COMPUTE_UNITS)


# -- Core ML through PyObjC ----------------------------------------------------------

FP16, FP32 = 0x10000 | 16, 0x10000 | 32


@pytest.fixture
def core_ml(monkeypatch: pytest.MonkeyPatch) -> PyObjCCoreML:
    def compute(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        x = feeds["x"].astype(np.float32)
        return {"y": (x * 2 + 1).astype(np.float16)}

    return PyObjCCoreML(
        inputs={"x": ((2, 3, 5), FP16)}, compute=compute, functions=frozenset({"main"})
    ).install(monkeypatch)


def _compiled(tmp_path: Path) -> Path:
    folder = tmp_path / "m.mlmodelc"
    folder.mkdir()
    return folder


def test_anekit_uses_core_mls_enum_values() -> None:
    assert {
        "CPU_ONLY": ML_COMPUTE_UNITS["CPUOnly"],
        "CPU_AND_GPU": ML_COMPUTE_UNITS["CPUAndGPU"],
        "ALL": ML_COMPUTE_UNITS["All"],
        "CPU_AND_NE": ML_COMPUTE_UNITS["CPUAndNeuralEngine"],
    } == coreml_nogil.COMPUTE_UNITS
    assert coreml_nogil.DTYPES == ML_DATA_TYPES


def test_pyobjc_core_ml_refuses_what_core_ml_refuses(core_ml: PyObjCCoreML, tmp_path: Path) -> None:
    import CoreML
    import Foundation

    configuration = CoreML.MLModelConfiguration.alloc().init()
    with pytest.raises(ValueError, match="not an MLComputeUnits value"):
        configuration.setComputeUnits_(ct.ComputeUnit.CPU_AND_NE.value)  # 4: coremltools'
    with pytest.raises(ValueError, match="depythonifying"):
        configuration.setComputeUnits_("CPU_AND_NE")
    url = Foundation.NSURL.fileURLWithPath_(str(_compiled(tmp_path)))
    with pytest.raises(TypeError, match="output argument"):
        CoreML.MLModel.modelWithContentsOfURL_configuration_error_(url, configuration, [])
    package = Foundation.NSURL.fileURLWithPath_(str(fake_mlpackage(tmp_path / "m.mlpackage")))
    model, error = CoreML.MLModel.modelWithContentsOfURL_configuration_error_(
        package, configuration, None
    )
    assert model is None and "not a compiled model" in error.localizedDescription()
    with pytest.raises(ValueError, match="NSString"):
        Foundation.NSURL.fileURLWithPath_(tmp_path)
    shape = Foundation.NSArray.arrayWithArray_([Foundation.NSNumber.numberWithInt_(2)])
    with pytest.raises(TypeError, match="NSArray of NSNumber"):
        CoreML.MLMultiArray.alloc().initWithShape_dataType_error_([2], FP16, None)
    with pytest.raises(ValueError, match="not an MLMultiArrayDataType"):
        CoreML.MLMultiArray.alloc().initWithShape_dataType_error_(shape, 16, None)
    with pytest.raises(ValueError, match="depythonifying 'int'"):
        Foundation.NSNumber.numberWithInt_(2.0)
    array, error = CoreML.MLMultiArray.alloc().initWithShape_dataType_error_(shape, FP32, None)
    assert error is None and array.dataPointer().as_buffer(8).nbytes == 8
    with pytest.raises(AssertionError, match="reads past"):
        array.dataPointer().as_buffer(9)
    with pytest.raises(TypeError, match="NSDictionary"):
        CoreML.MLDictionaryFeatureProvider.alloc().initWithDictionary_error_({}, None)


def test_gil_free_predictions_through_the_pyobjc_stand_in(
    core_ml: PyObjCCoreML, tmp_path: Path
) -> None:
    """NoGilModel end to end: configuration, load, Foundation inputs, padded fp16
    outputs copied out with their own strides."""
    model = coreml_nogil.NoGilModel(_compiled(tmp_path), "CPU_AND_NE", "main")
    ((loaded),) = core_ml.loads
    assert loaded.configuration.computeUnits == 3 and loaded.configuration.functionName == "main"
    x = np.arange(30, dtype=np.float32).reshape(2, 3, 5) / 8
    outputs = model.predict({"x": x})
    (feeds,) = core_ml.predictions
    assert feeds["x"].dtype == np.float16  # converted to the model's input type
    np.testing.assert_array_equal(outputs["y"], (x.astype(np.float16) * 2 + 1))
    assert outputs["y"].flags.owndata  # a copy, not a view of Core ML's memory


def test_no_gil_model_names_what_core_ml_refused(core_ml: PyObjCCoreML, tmp_path: Path) -> None:
    with pytest.raises(errors.BackendUnavailableError, match="not a compiled model"):
        coreml_nogil.NoGilModel(fake_mlpackage(tmp_path / "m.mlpackage"))
    with pytest.raises(errors.BackendUnavailableError, match="no function named 'seq9'"):
        coreml_nogil.NoGilModel(_compiled(tmp_path), "CPU_AND_NE", "seq9")


# -- ONNX Runtime --------------------------------------------------------------------


def _model_bytes() -> bytes:
    graph = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


def test_onnx_runtime_stand_in_refuses_what_onnx_runtime_refuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ort = OnnxRuntime().install(monkeypatch)
    model = _model_bytes()
    with pytest.raises(TypeError, match="Unable to load from type"):
        onnxruntime.InferenceSession(bytearray(model), providers=[CPU])
    with pytest.raises(ValueError, match="sequence of names, not one string"):
        onnxruntime.InferenceSession(model, providers=CPU)
    with pytest.raises(ValueError, match="either strings or"):
        onnxruntime.InferenceSession(model, providers=[(CPU,)])
    with pytest.raises(ValueError, match="Unknown Provider Type: CUDA"):
        onnxruntime.InferenceSession(model, providers=["CUDA"])
    with pytest.raises(ValueError, match="same length"):
        onnxruntime.InferenceSession(model, providers=[CPU], provider_options=[{}, {}])
    with pytest.raises(TypeError, match="SessionOptions"):
        onnxruntime.InferenceSession(model, {"intra_op_num_threads": 1}, providers=[CPU])
    assert ort.sessions == []


def test_onnx_runtime_stand_in_falls_back_as_onnx_runtime_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """This machine's real ONNX Runtime has no CUDA: asked for CUDA, it quietly builds
    a CPU session. The stand-in, as a build with CUDA that cannot load it, agrees;
    as one where CUDA works, it registers CUDA first and the CPU last."""
    real = onnxruntime.InferenceSession
    model = _model_bytes()
    if CUDA not in onnxruntime.get_available_providers():
        with pytest.warns(UserWarning, match="not in available provider names"):
            session = real(model, providers=[CUDA, CPU])
        assert session.get_providers() == [CPU]
    broken = OnnxRuntime(available=(CUDA, CPU), working=(CPU,)).install(monkeypatch)
    assert onnxruntime.get_available_providers() == [CUDA, CPU]
    session = onnxruntime.InferenceSession(model, providers=[CUDA, CPU])
    assert session.get_providers() == [CPU]
    np.testing.assert_array_equal(
        session.run(["y"], {"x": np.array([1, -2], np.float32)})[0], [-1, 2]
    )
    assert broken.requested() == [[CUDA, CPU]]
    working = OnnxRuntime(available=(CUDA, CPU), working=(CUDA, CPU)).install(monkeypatch)
    assert onnxruntime.InferenceSession(model, providers=[CUDA]).get_providers() == [CUDA, CPU]
    assert onnxruntime.InferenceSession(model, providers=[CPU]).get_providers() == [CPU]
    cpu_only = OnnxRuntime(available=(CPU,), working=(CPU,)).install(monkeypatch)
    with pytest.warns(UserWarning, match="not in available provider names"):
        session = onnxruntime.InferenceSession(model, providers=[CUDA, CPU])
    assert session.get_providers() == [CPU]
    assert len(working.sessions) == 2 and len(cpu_only.sessions) == 1


def test_the_onnx_runtime_contract_is_the_installed_one() -> None:
    from onnxruntime.capi import onnxruntime_inference_collection as collection

    source = inspect.getsource(collection.check_and_normalize_provider_args)
    for text in (
        "'providers' should be a sequence.",
        "'providers' values must be either strings or (string, dict) tuples.",
        "is not in available provider names",
        "should be the same length if both are given.",
    ):
        assert text in source
    session_init = inspect.getsource(collection.InferenceSession.__init__)
    assert "Unable to load from type" in session_init
    parameters = list(inspect.signature(collection.InferenceSession.__init__).parameters)
    assert parameters[1:5] == ["path_or_bytes", "sess_options", "providers", "provider_options"]
    assert {CPU, CUDA} <= set(onnxruntime.get_all_providers())
    assert isinstance(onnx.__version__, str)
