"""Contract-enforcing stand-ins for the external APIs anekit calls where this machine
cannot run them: coremltools' compiler and loader and Core ML through PyObjC (macOS
only), and ONNX Runtime's execution providers (CUDA).

The rule for every stand-in here: it refuses what the real API refuses, as the real
API's source or documentation states it (argument names and types, required
keywords, file extensions, enum values), and it behaves as the real one does where
that behaviour is the point (ONNX Runtime's quiet fallback to the CPU; coremltools'
``shutil.move`` into the destination). A call the real API would refuse fails the
test. Each contract is stated once, here, with its source; tests/backends/
test_standins.py shows each stand-in refusing what the real API refuses.

Sources (the versions this project installs):

- coremltools 9.0: ``coremltools/models/utils.py`` (``compile_model``),
  ``coremltools/models/_compiled_model.py`` (``CompiledMLModel._init_check``),
  ``coremltools/__init__.py`` (``ComputeUnit``); ``coremltools/models/compute_plan.py``
  and ``compute_device.py`` (``MLComputePlan.load_from_path(path, compute_units)``:
  "The path must be the location of the ``mlmodelc`` directory"; it passes
  ``compute_units.name`` on) and, under them, ``coremlpython/CoreMLPython.mm``
  (``Model::getComputePlan(const std::string&, const std::string&)``: "MLComputePlan
  is only available on macOS >= 14.4", Core ML's ``MLComputePlan loadContentsOfURL:``
  errors raised as RuntimeError; the structure and device objects it returns are the
  Python classes of those two modules, built around native proxies); coremltools'
  own test of it (``coremltools/test/api/test_api_examples.py``,
  ``TestMLComputePlan``) skips ``const`` and ``cast`` ops, which may have no usage;
- Core ML: Apple's documentation of ``MLModel modelWithContentsOfURL:configuration:
  error:`` ("the path to a compiled model file (ModelName.mlmodelc)"),
  ``MLModelConfiguration.computeUnits``/``functionName``, ``MLMultiArray
  initWithShape:dataType:error:``, ``dataPointer``, ``strides``; the enum values as
  PyObjC's own tests assert them (pyobjc-framework-CoreML/PyObjCTest/
  test_mlmodelconfiguration.py: MLComputeUnits CPUOnly 0, CPUAndGPU 1, All 2,
  CPUAndNeuralEngine 3; test_mlmultiarray.py: MLMultiArrayDataType Float16
  0x10010, Float32 0x10020, Float64 0x10040, Int32 0x20020; ``error:`` arguments
  are output arguments, passed as None and returned in a tuple);
- PyObjC: pyobjc-core/Modules/objc/varlist.m (``varlist.as_buffer(count)``: a
  writable memoryview of ``count`` items; a ``void *`` varlist's items are bytes);
- onnxruntime 1.32: ``onnxruntime/capi/onnxruntime_inference_collection.py``
  (``InferenceSession.__init__``, ``check_and_normalize_provider_args``): the
  providers must be a sequence of names or (name, options) tuples; a provider this
  build lacks is dropped with a UserWarning; a provider that cannot load (CUDA
  without its libraries) is dropped too, and the CPU provider is always registered
  last. ``get_providers()`` returns what was registered.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
import types
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime
import pytest

from anekit._coremltools import ct

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"


def fake_mlpackage(path: Path, weights: bytes = b"weights") -> Path:
    """A directory shaped like an .mlpackage (Manifest.json, a model and a weight
    file); ``weights`` makes its content differ from another's."""
    data = path / "Data" / "com.apple.CoreML"
    (data / "weights").mkdir(parents=True)
    (path / "Manifest.json").write_text('{"fileFormatVersion": "1.0.0"}')
    (data / "model.mlmodel").write_bytes(b"mlprogram")
    (data / "weights" / "weight.bin").write_bytes(weights)
    return path


def tree_digest(folder: Path) -> str:
    """SHA-256 of a folder's files, for checking which package a model came from."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


# -- coremltools ---------------------------------------------------------------------


@dataclass
class CompiledModel:
    """What the CompiledMLModel stand-in returns: the arguments it was loaded with, and
    ``predict`` computing with the stand-in's ``compute`` (source package, feeds)."""

    path: str
    compute_units: Any
    function_name: str
    compute: Callable[[Path, dict[str, np.ndarray], str], dict[str, np.ndarray]] | None = None

    def predict(self, data: Any, state: Any = None) -> dict[str, np.ndarray]:
        """coremltools/models/_compiled_model.py, ``predict`` (9.0): ``data`` must be a
        dict (or a list of dicts, not served here: ``MLModel._check_predict_data``);
        fp16 arrays go to Core ML as fp32 (``_update_float16_multiarray_input_to_float32``)."""
        if type(data) not in (list, dict):
            raise TypeError(
                f'"data" parameter must be either a dict or list of dict, but got {type(data)}.'
            )
        if self.compute is None or type(data) is not dict:
            raise AssertionError(
                "this stand-in computes single dict predictions when given compute"
            )
        feeds = {
            name: value.astype(np.float32) if getattr(value, "dtype", None) == np.float16 else value
            for name, value in data.items()
        }
        return self.compute(Path(self.path) / "source", feeds, self.function_name)


@dataclass
class CoreMLTools:
    """``ct.models.utils.compile_model`` and ``ct.models.CompiledMLModel`` as they
    behave on a Mac (coremltools 9.0), without Core ML.

    A compile takes ``seconds`` and writes a directory holding a copy of the source
    package under ``source/`` (an ``.mlmodel`` source: the file ``source``), so a test
    can tell which package a compiled model came from and the compute-plan stand-in
    can read its program; ``fail_compile`` makes the next compile fail like Core ML's
    compiler.
    """

    seconds: float = 0.0
    #: Function names the compiled models have (None: any).
    functions: frozenset[str] | None = None
    fail_compile: str | None = None
    #: What the loaded models' ``predict`` computes: (source package, feeds, function) -> outputs.
    compute: Callable[[Path, dict[str, np.ndarray], str], dict[str, np.ndarray]] | None = None
    compiles: list[tuple[str, str | None]] = field(default_factory=list)
    loads: list[CompiledModel] = field(default_factory=list)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> CoreMLTools:
        monkeypatch.setattr(ct.models.utils, "compile_model", self.compile_model)
        monkeypatch.setattr(ct.models, "CompiledMLModel", self.compiled_ml_model)
        return self

    def compile_model(self, model: Any, destination_path: str | None = None) -> str:
        """coremltools/models/utils.py, ``compile_model`` (9.0), after its macOS
        checks: the same argument checks in the same order, then Core ML's compile
        to a temporary ``.mlmodelc`` and ``shutil.move`` to ``destination_path``."""
        if isinstance(model, str):
            if not model.rstrip("/").endswith((".mlpackage", ".mlmodel")):
                raise ValueError(
                    f"Invalid model file path: '{model}'."
                    "Expected a file with .mlpackage or .model extension. "
                )
        else:  # not a spec either: coremltools only takes a str path or a Model_pb2
            raise TypeError(
                'Unrecognized input for "model" parameter. It should be a spec or model file path.'
            )
        if destination_path is not None and not destination_path.rstrip("/").endswith(".mlmodelc"):
            raise Exception('"destination_path" parameter must have ".mlmodelc" file extension.')
        self.compiles.append((model, destination_path))
        time.sleep(self.seconds)
        source = Path(model)
        if self.fail_compile is not None:
            message, self.fail_compile = self.fail_compile, None
            raise RuntimeError(f"Error compiling model: {message}")
        if not ((source / "Manifest.json").is_file() or source.is_file()):
            raise RuntimeError(f"Error compiling model: {model} is not a model package")
        original = Path(tempfile.mkdtemp(suffix=".mlmodelc"))
        if source.is_file():  # an .mlmodel, which compile_model takes too
            shutil.copyfile(source, original / "source")
        else:
            shutil.copytree(source, original / "source")
        (original / "coremldata.bin").write_bytes(b"compiled")
        if destination_path is None:
            return str(original)
        shutil.move(str(original), destination_path)  # into it, when it exists
        return destination_path

    def compiled_ml_model(
        self,
        path: str,
        compute_units: Any = ct.ComputeUnit.ALL,
        function_name: str | None = None,
        optimization_hints: dict[str, Any] | None = None,
        asset: Any = None,
    ) -> CompiledModel:
        """coremltools/models/_compiled_model.py, ``CompiledMLModel.__init__`` and
        ``_init_check`` (9.0); the path is "a compiled model directory, ending in
        ``.mlmodelc``" (its docstring), which Core ML then opens."""
        function = "" if function_name is None else function_name
        if not isinstance(path, str):
            raise TypeError('The "path" parameter must be of type "str".')
        if not isinstance(compute_units, ct.ComputeUnit):
            raise TypeError(
                'The "compute_units" parameter must be of type: "coremltools.ComputeUnit".'
            )
        if not isinstance(function, str):
            raise TypeError('The "function_name" parameter must be of type "str".')
        if optimization_hints is not None and not isinstance(optimization_hints, dict):
            raise TypeError('"optimization_hint_input" must be a dictionary or None')
        compiled = Path(path)
        if not (compiled.name.endswith(".mlmodelc") and (compiled / "coremldata.bin").is_file()):
            raise RuntimeError(f"Error opening compiled model {path}: not a compiled model")
        if self.functions is not None and function and function not in self.functions:
            raise RuntimeError(f"{path}: no function named {function!r}")
        loaded = CompiledModel(path, compute_units, function, self.compute)
        self.loads.append(loaded)
        return loaded


def simulated_device(
    offset: float = 0.0,
) -> Callable[[Path, dict[str, np.ndarray], str], dict[str, np.ndarray]]:
    """A ``compute`` for :class:`CoreMLTools`: the function the model was loaded with, of
    the compiled model's source package, run in anekit's simulator (fp16 numerics), plus
    ``offset`` (a device computing wrongly)."""

    def compute(source: Path, feeds: dict[str, np.ndarray], function: str) -> dict[str, np.ndarray]:
        import anekit

        package = source.parent / "source.mlpackage"  # anekit.load wants the extension
        if not package.exists():
            shutil.copytree(source, package)
        program = anekit.load(package, function=function or None)
        values = program(*[feeds[str(spec.name)] for spec in program.input_specs], backend="sim")
        if not isinstance(values, dict):
            values = {str(program.output_specs[0].name): values}
        return {name: np.asarray(value) + offset for name, value in values.items()}

    return compute


# -- Core ML's compute plan, through coremltools ------------------------------------

#: The devices each compute-units value lets Core ML use (MLComputeUnits).
PLAN_DEVICES: dict[str, tuple[str, ...]] = {
    "CPU_ONLY": ("cpu",),
    "CPU_AND_GPU": ("cpu", "gpu"),
    "CPU_AND_NE": ("cpu", "ane"),
    "ALL": ("cpu", "gpu", "ane"),
}


class _CPUDeviceProxy:
    """libcoremlpython's ``_MLCPUComputeDeviceProxy``."""


class _GPUDeviceProxy:
    """libcoremlpython's ``_MLGPUComputeDeviceProxy``."""


class _NeuralEngineDeviceProxy:
    """libcoremlpython's ``_MLNeuralEngineComputeDeviceProxy``."""

    def get_total_core_count(self) -> int:
        return 16


class _OperationProxy:
    """The native ``ModelStructureProgramOperation`` behind an operation's ``__proxy__``."""

    def __init__(self, function: str, operator: str, cost: float | None) -> None:
        self.function, self.operator, self.cost = function, operator, cost
        self.device: str | None = None


class _LayerProxy:
    """The native ``ModelStructureNeuralNetworkLayer`` behind a layer's ``__proxy__``."""


def _plan_device(kind: str) -> Any:
    """A real coremltools device object (its ``__init__`` checks the proxy's type)."""
    from coremltools.models import compute_device

    if kind == "ane":
        return compute_device.MLNeuralEngineComputeDevice(_NeuralEngineDeviceProxy())
    if kind == "gpu":
        return compute_device.MLGPUComputeDevice(_GPUDeviceProxy())
    return compute_device.MLCPUComputeDevice(_CPUDeviceProxy())


def _pybind_string(function: str, **arguments: Any) -> None:
    """pybind11 refuses what is not a Python str where C++ takes a ``std::string``."""
    for name, value in arguments.items():
        if not isinstance(value, str):
            raise TypeError(
                f"{function}(): incompatible function arguments. The following argument "
                f"types are supported: (arg0: str, ...); {name}: {type(value).__name__}"
            )


def _spec_of(source: Path) -> Any:
    """The model spec of a package directory (its Manifest.json's root model) or of an
    ``.mlmodel`` file."""
    if source.is_dir():
        manifest = json.loads((source / "Manifest.json").read_text())
        entry = manifest["itemInfoEntries"][manifest["rootModelIdentifier"]]
        source = source / "Data" / entry["path"]
    spec = ct.proto.Model_pb2.Model()
    spec.ParseFromString(source.read_bytes())
    return spec


class _ComputePlanProxy:
    """libcoremlpython's ``_MLComputePlanProxy`` (``ComputePlan`` in CoreMLPython.mm)."""

    def __init__(self, structure: Any, units: str) -> None:
        self._structure, self.units = structure, units

    @property
    def model_structure(self) -> Any:
        return self._structure

    @staticmethod
    def _operation(operation: Any) -> _OperationProxy:
        # py::cast<ModelStructureProgramOperation>(operation.attr("__proxy__"))
        proxy = operation.__proxy__
        if not isinstance(proxy, _OperationProxy):
            raise RuntimeError(
                f"Unable to cast Python instance of type {type(proxy).__name__} to C++ type "
                "'ModelStructureProgramOperation'"
            )
        return proxy

    def get_compute_device_usage_for_mlprogram_operation(self, operation: Any) -> Any:
        from coremltools.models.compute_plan import MLComputePlanDeviceUsage

        proxy = self._operation(operation)
        if proxy.device is None:
            return None
        return MLComputePlanDeviceUsage(
            preferred_compute_device=_plan_device(proxy.device),
            supported_compute_devices=[_plan_device(kind) for kind in PLAN_DEVICES[self.units]],
        )

    def get_estimated_cost_for_mlprogram_operation(self, operation: Any) -> Any:
        from coremltools.models.compute_plan import MLComputePlanCost

        cost = self._operation(operation).cost
        return None if cost is None else MLComputePlanCost(weight=cost)

    def get_compute_device_usage_for_neuralnetwork_layer(self, layer: Any) -> Any:
        from coremltools.models.compute_plan import MLComputePlanDeviceUsage

        if not isinstance(layer.__proxy__, _LayerProxy):
            raise RuntimeError("Unable to cast Python instance to C++ type")
        return MLComputePlanDeviceUsage(
            preferred_compute_device=_plan_device("cpu"),
            supported_compute_devices=[_plan_device(kind) for kind in PLAN_DEVICES[self.units]],
        )


@dataclass
class CoreMLComputePlan:
    """Core ML's compute plan as coremltools 9.0 reaches it on a Mac running ``macos``,
    without Core ML: the native layer under ``coremltools.models.compute_plan`` and
    ``compute_device`` (libcoremlpython's ``_MLModelProxy.get_compute_plan`` and the
    proxies) is replaced, so coremltools' own Python (``MLComputePlan.load_from_path``,
    its ``compute_units.name``, the structure and device classes) runs as it is.

    It loads compiled models the :class:`CoreMLTools` stand-in wrote (a ``*.mlmodelc``
    directory with ``coremldata.bin`` and the source package under ``source``) and
    returns the structure of their ML program: every function, operation (``const``
    included), output name and nested block, as Core ML's ``MLModelStructure`` has
    them. ``place(function, operation)`` names each non-const operation's preferred
    device (``ane``, ``gpu``, ``cpu``; default: the ANE where the compute units allow
    it, else the GPU, else the CPU); it must be one the compute units allow. ``const``
    operations have no usage and no cost; the others share the cost equally.
    """

    place: Callable[[str, Any], str] | None = None
    #: The macOS version this Mac runs (``platform.mac_ver``); 14.4 has compute plans.
    macos: str = "15.5"
    #: (path, compute units name) of each compute plan loaded.
    loads: list[tuple[str, str]] = field(default_factory=list)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> CoreMLComputePlan:
        import platform

        from coremltools.models import compute_device, compute_plan

        model_proxy = types.SimpleNamespace(
            get_compute_plan=self.get_compute_plan,
            get_model_structure=self.get_model_structure,
            get_all_compute_devices=lambda: [_plan_device(k) for k in ("cpu", "gpu", "ane")],
        )
        monkeypatch.setattr(compute_plan, "_MLModelProxy", model_proxy)
        monkeypatch.setattr(compute_plan, "_MLComputePlanProxy", _ComputePlanProxy)
        monkeypatch.setattr(compute_device, "_MLModelProxy", model_proxy)
        monkeypatch.setattr(compute_device, "_MLCPUComputeDeviceProxy", _CPUDeviceProxy)
        monkeypatch.setattr(compute_device, "_MLGPUComputeDeviceProxy", _GPUDeviceProxy)
        monkeypatch.setattr(
            compute_device, "_MLNeuralEngineComputeDeviceProxy", _NeuralEngineDeviceProxy
        )
        monkeypatch.setattr(platform, "mac_ver", lambda *args: (self.macos, ("", "", ""), "arm64"))
        return self

    def _has_compute_plans(self) -> bool:
        version = tuple(int(part) for part in self.macos.split("."))
        return version >= (14, 4)

    def _compiled_source(self, path: str) -> Path:
        """Core ML's ``loadContentsOfURL:`` needs a compiled model; its NSError comes
        back through ``Utils::handleError`` as a RuntimeError."""
        compiled = Path(path)
        if not (compiled.name.endswith(".mlmodelc") and (compiled / "coremldata.bin").is_file()):
            raise RuntimeError(f"Error opening compiled model {path}: not a compiled model")
        source = compiled / "source"
        if not source.exists():
            raise AssertionError(f"{path}: not compiled by the CoreMLTools stand-in")
        return source

    def get_compute_plan(self, path: Any, compute_units: Any) -> Any:
        """``Model::getComputePlan(compiledModelPath, computeUnits)``."""
        from coremltools.models import compute_plan

        _pybind_string("get_compute_plan", path=path, compute_units=compute_units)
        if not self._has_compute_plans():
            raise RuntimeError("MLComputePlan is only available on macOS >= 14.4")
        if compute_units not in PLAN_DEVICES:  # setComputeUnit asserts "ALL" otherwise
            raise AssertionError(f'computeUnits == "ALL" failed: {compute_units!r}')
        structure = self._structure(self._compiled_source(path), compute_units)
        self.loads.append((path, compute_units))
        return compute_plan.MLComputePlan(_ComputePlanProxy(structure, compute_units))

    def get_model_structure(self, path: Any) -> Any:
        """``Model::getModelStructure(compiledModelPath)`` (MLModelStructure)."""
        _pybind_string("get_model_structure", path=path)
        if not self._has_compute_plans():
            raise RuntimeError("MLModelStructure is only available on macOS >= 14.4")
        return self._structure(self._compiled_source(path), "ALL")

    def _structure(self, source: Path, units: str) -> Any:
        from coremltools.models import compute_plan as cp

        try:
            spec = _spec_of(source)
        except Exception as error:
            raise RuntimeError(f"Failed to load compute plan, with error={error}.") from None
        kind = spec.WhichOneof("Type")
        if kind == "neuralNetwork":
            layers = [
                cp.MLModelStructureNeuralNetworkLayer(
                    name=layer.name,
                    type=layer.WhichOneof("layer"),
                    input_names=list(layer.input),
                    output_names=list(layer.output),
                    __proxy__=_LayerProxy(),
                )
                for layer in spec.neuralNetwork.layers
            ]
            return cp.MLModelStructure(
                neuralnetwork=cp.MLModelStructureNeuralNetwork(layers=layers),
                program=None,
                pipeline=None,
            )
        if kind != "mlProgram":
            return cp.MLModelStructure(neuralnetwork=None, program=None, pipeline=None)
        operations: list[_OperationProxy] = []

        def named(value: Any) -> Any:
            return cp.MLModelStructureProgramNamedValueType(
                name=value.name, type=cp.MLModelStructureProgramValueType()
            )

        def block(function: str, proto: Any) -> Any:
            built = []
            for op in proto.operations:
                proxy = _OperationProxy(function, op.type, None)
                inputs = {
                    name: cp.MLModelStructureProgramArgument(
                        bindings=[
                            cp.MLModelStructureProgramBinding(
                                name=binding.name or None,
                                value=None
                                if binding.WhichOneof("binding") == "name"
                                else cp.MLModelStructureProgramValue(),
                            )
                            for binding in argument.arguments
                        ]
                    )
                    for name, argument in op.inputs.items()
                }
                operation = cp.MLModelStructureProgramOperation(
                    inputs=inputs,
                    operator_name=op.type,
                    outputs=[named(output) for output in op.outputs],
                    blocks=[block(function, inner) for inner in op.blocks],
                    __proxy__=proxy,
                )
                if op.type != "const":
                    proxy.device = self._placed(function, operation, units)
                    operations.append(proxy)
                built.append(operation)
            return cp.MLModelStructureProgramBlock(
                inputs=[named(value) for value in proto.inputs],
                operations=built,
                output_names=list(proto.outputs),
            )

        functions = {
            name: cp.MLModelStructureProgramFunction(
                inputs=[named(value) for value in function.inputs],
                block=block(name, function.block_specializations[function.opset]),
            )
            for name, function in spec.mlProgram.functions.items()
        }
        for proxy in operations:
            proxy.cost = 1.0 / len(operations)
        return cp.MLModelStructure(
            neuralnetwork=None,
            program=cp.MLModelStructureProgram(functions=functions),
            pipeline=None,
        )

    def _placed(self, function: str, operation: Any, units: str) -> str:
        allowed = PLAN_DEVICES[units]
        if self.place is None:
            return next(kind for kind in ("ane", "gpu", "cpu") if kind in allowed)
        device = self.place(function, operation)
        if device not in allowed:
            raise AssertionError(f"{units} cannot place an operation on the {device}")
        return device


# -- Core ML through PyObjC ----------------------------------------------------------

#: MLComputeUnits (CoreML/MLModelConfiguration.h; PyObjC's test_mlmodelconfiguration.py).
ML_COMPUTE_UNITS = {"CPUOnly": 0, "CPUAndGPU": 1, "All": 2, "CPUAndNeuralEngine": 3}
#: MLMultiArrayDataType (CoreML/MLMultiArray.h; PyObjC's test_mlmultiarray.py).
ML_DATA_TYPES: dict[int, Any] = {
    0x10000 | 16: np.float16,
    0x10000 | 32: np.float32,
    0x10000 | 64: np.float64,
    0x20000 | 32: np.int32,
}


def _out_argument(error: Any) -> None:
    """PyObjC output arguments (``error:``) are passed as None (or objc.NULL) and
    come back in the result tuple."""
    if error is not None:
        raise TypeError(f"output argument 'error' must be None, got {error!r}")


class NSError:
    def __init__(self, description: str) -> None:
        self.description = description

    def localizedDescription(self) -> str:
        return self.description

    def __repr__(self) -> str:
        return f"NSError({self.description!r})"


class NSNumber(int):
    @classmethod
    def numberWithInt_(cls, value: Any) -> NSNumber:
        if not isinstance(value, int):
            raise ValueError(f"depythonifying 'int', got '{type(value).__name__}'")
        return cls(value)


class NSArray(tuple[Any, ...]):
    @classmethod
    def arrayWithArray_(cls, values: Sequence[Any]) -> NSArray:
        return cls(values)


class NSMutableDictionary(dict[str, Any]):
    @classmethod
    def dictionary(cls) -> NSMutableDictionary:
        return cls()

    def setObject_forKey_(self, value: Any, key: Any) -> None:
        if not isinstance(key, str):
            raise TypeError(f"feature names are NSStrings, got {type(key).__name__}")
        self[key] = value


class NSURL:
    def __init__(self, path: str) -> None:
        self._path = path

    @classmethod
    def fileURLWithPath_(cls, path: Any) -> NSURL:
        if not isinstance(path, str):  # an NSString; a pathlib.Path is not one
            raise ValueError(f"fileURLWithPath: takes an NSString, got {type(path).__name__}")
        return cls(path)

    def path(self) -> str:
        return self._path


class _Allocated:
    """``Class.alloc().init...`` as PyObjC spells it."""

    @classmethod
    def alloc(cls) -> Any:
        return cls.__new__(cls)


class VarList:
    """``objc.varlist`` of a ``void *``: items are bytes (varlist.m maps ``v`` to a
    char); ``as_buffer(count)`` is a writable view of the first ``count`` of them.
    Reading past the allocation is undefined behaviour in the real one: refused."""

    def __init__(self, memory: bytearray) -> None:
        self._memory = memory

    def as_buffer(self, count: int) -> memoryview:
        if not isinstance(count, int):
            raise TypeError(f"'count' must be an integer, got {type(count).__name__}")
        if not 0 <= count <= len(self._memory):
            raise AssertionError(f"as_buffer({count}) reads past the {len(self._memory)} bytes")
        return memoryview(self._memory)[:count]


class MLMultiArray(_Allocated):
    def initWithShape_dataType_error_(
        self, shape: Any, dataType: Any, error: Any
    ) -> tuple[MLMultiArray | None, Any]:
        _out_argument(error)
        # anekit's own rule on top of PyObjC's: Core ML must read Foundation objects,
        # not Python-backed proxies (which take the GIL back during the call).
        if not isinstance(shape, NSArray) or not all(isinstance(v, NSNumber) for v in shape):
            raise TypeError("shape must be an NSArray of NSNumber (not a Python list)")
        if dataType not in ML_DATA_TYPES:
            raise ValueError(f"{dataType!r} is not an MLMultiArrayDataType")
        self._setup([int(v) for v in shape], int(dataType), None)
        return self, None

    def _setup(self, shape: list[int], data_type: int, strides: list[int] | None) -> None:
        if strides is None:  # row-major, unpadded
            strides = [int(np.prod(shape[index + 1 :])) for index in range(len(shape))]
        self._shape, self._type, self._strides = shape, data_type, strides
        itemsize = np.dtype(ML_DATA_TYPES[data_type]).itemsize
        span = 1 + sum((size - 1) * step for size, step in zip(shape, strides, strict=True))
        self._memory = bytearray(max(span, 0) * itemsize)

    @classmethod
    def with_strides(cls, shape: list[int], data_type: int, strides: list[int]) -> MLMultiArray:
        """An array with Core ML's own (possibly padded) strides, in elements."""
        array: MLMultiArray = cls.alloc()
        array._setup(list(shape), data_type, list(strides))
        return array

    def memory(self) -> bytes:
        return bytes(self._memory)

    @classmethod
    def _padded(cls, values: np.ndarray, data_type: int) -> MLMultiArray:
        """An output array as Core ML may hand it back: rows (the last axis) padded
        to a multiple of 8 elements, so its strides are not NumPy's."""
        shape = list(values.shape)
        row = -(-shape[-1] // 8) * 8 if shape else 1
        strides = [row * int(np.prod(shape[index + 1 : -1])) for index in range(len(shape) - 1)]
        array = cls.with_strides(shape, data_type, [*strides, 1] if shape else [])
        array._view()[...] = values
        return array

    def _view(self) -> np.ndarray:
        dtype = np.dtype(ML_DATA_TYPES[self._type])
        flat = np.frombuffer(self._memory, dtype)
        return np.lib.stride_tricks.as_strided(
            flat, self._shape, [step * dtype.itemsize for step in self._strides]
        )

    def shape(self) -> NSArray:
        return NSArray(NSNumber(v) for v in self._shape)

    def strides(self) -> NSArray:
        return NSArray(NSNumber(v) for v in self._strides)

    def dataType(self) -> int:
        return self._type

    def dataPointer(self) -> VarList:
        return VarList(self._memory)


class MLFeatureValue:
    def __init__(self, array: MLMultiArray) -> None:
        self._array = array

    @classmethod
    def featureValueWithMultiArray_(cls, array: Any) -> MLFeatureValue:
        if not isinstance(array, MLMultiArray):
            raise TypeError(f"featureValueWithMultiArray: takes an MLMultiArray, got {array!r}")
        return cls(array)

    def multiArrayValue(self) -> MLMultiArray:
        return self._array


class MLDictionaryFeatureProvider(_Allocated):
    def initWithDictionary_error_(
        self, dictionary: Any, error: Any
    ) -> tuple[MLDictionaryFeatureProvider | None, Any]:
        _out_argument(error)
        if not isinstance(dictionary, NSMutableDictionary):
            raise TypeError("the features must be an NSDictionary (not a Python dict)")
        for name, value in dictionary.items():
            if not isinstance(value, MLFeatureValue):
                return None, NSError(f"feature {name}: not an MLFeatureValue")
        self._features = dict(dictionary)
        return self, None

    def featureNames(self) -> set[str]:
        return set(self._features)

    def featureValueForName_(self, name: str) -> MLFeatureValue | None:
        return self._features.get(name)


class MLModelConfiguration(_Allocated):
    def init(self) -> MLModelConfiguration:
        self.computeUnits = ML_COMPUTE_UNITS["All"]  # Core ML's default
        self.functionName: str | None = None
        return self

    def setComputeUnits_(self, value: Any) -> None:
        if not isinstance(value, int):
            raise ValueError(f"depythonifying 'long long', got '{type(value).__name__}'")
        if value not in ML_COMPUTE_UNITS.values():
            raise ValueError(f"{value} is not an MLComputeUnits value")
        self.computeUnits = value

    def setFunctionName_(self, name: Any) -> None:  # macOS 15
        if not isinstance(name, str):
            raise ValueError(f"functionName is an NSString, got {type(name).__name__}")
        self.functionName = name


@dataclass
class _Constraint:
    shape: tuple[int, ...]
    data_type: int

    def dataType(self) -> int:
        return self.data_type


@dataclass
class _Description:
    constraint: _Constraint

    def multiArrayConstraint(self) -> _Constraint:
        return self.constraint


@dataclass
class _ModelDescription:
    inputs: dict[str, _Description]

    def inputDescriptionsByName(self) -> dict[str, _Description]:
        return self.inputs


class MLModel:
    """A loaded model: the stand-in's ``compute`` behind Core ML's calling contract."""

    stand_in: PyObjCCoreML

    def __init__(self, path: str, configuration: MLModelConfiguration) -> None:
        self.path, self.configuration = path, configuration

    @classmethod
    def modelWithContentsOfURL_configuration_error_(
        cls, url: Any, configuration: Any, error: Any
    ) -> tuple[MLModel | None, NSError | None]:
        _out_argument(error)
        if not isinstance(url, NSURL):
            raise TypeError(f"url must be an NSURL, got {type(url).__name__}")
        if not isinstance(configuration, MLModelConfiguration):
            raise TypeError(f"configuration must be an MLModelConfiguration, got {configuration!r}")
        compiled = Path(url.path())
        if not (compiled.name.endswith(".mlmodelc") and compiled.is_dir()):
            return None, NSError(f"{compiled}: not a compiled model (.mlmodelc)")
        functions = cls.stand_in.functions
        name = configuration.functionName
        if name is not None and functions is not None and name not in functions:
            return None, NSError(f"no function named {name!r}")
        model = cls(str(compiled), configuration)
        cls.stand_in.loads.append(model)
        return model, None

    def modelDescription(self) -> _ModelDescription:
        return _ModelDescription(
            {
                name: _Description(_Constraint(shape, data_type))
                for name, (shape, data_type) in self.stand_in.inputs.items()
            }
        )

    def predictionFromFeatures_error_(
        self, provider: Any, error: Any
    ) -> tuple[MLDictionaryFeatureProvider | None, NSError | None]:
        _out_argument(error)
        if not isinstance(provider, MLDictionaryFeatureProvider):
            raise TypeError("the features must be an MLFeatureProvider")
        feeds = {}
        for name, (shape, data_type) in self.stand_in.inputs.items():
            value = provider.featureValueForName_(name)
            if value is None:
                return None, NSError(f"required input feature {name} not passed")
            array = value.multiArrayValue()
            if tuple(array._shape) != tuple(shape) or array._type != data_type:
                return None, NSError(f"input {name}: shape or data type does not match")
            feeds[name] = np.array(array._view())
        self.stand_in.predictions.append(feeds)
        outputs = NSMutableDictionary.dictionary()
        for name, values in self.stand_in.compute(feeds).items():
            kind = next(key for key, dtype in ML_DATA_TYPES.items() if dtype == values.dtype)
            outputs.setObject_forKey_(MLFeatureValue(MLMultiArray._padded(values, kind)), name)
        result, _ = MLDictionaryFeatureProvider.alloc().initWithDictionary_error_(outputs, None)
        return result, None


@dataclass
class PyObjCCoreML:
    """The ``CoreML``, ``Foundation`` and ``objc`` modules of PyObjC, for a model with
    these ``inputs`` (name -> (shape, MLMultiArrayDataType)) computing ``compute``."""

    inputs: dict[str, tuple[tuple[int, ...], int]] = field(default_factory=dict)
    compute: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]] = lambda feeds: {}
    functions: frozenset[str] | None = None
    loads: list[MLModel] = field(default_factory=list)
    predictions: list[dict[str, np.ndarray]] = field(default_factory=list)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> PyObjCCoreML:
        from anekit.backends import coreml_nogil

        model_class = type("MLModel", (MLModel,), {"stand_in": self})
        core_ml = types.ModuleType("CoreML")
        for item in (
            MLModelConfiguration,
            MLMultiArray,
            MLFeatureValue,
            MLDictionaryFeatureProvider,
        ):
            setattr(core_ml, item.__name__, item)
        core_ml.MLModel = model_class  # type: ignore[attr-defined]
        foundation = types.ModuleType("Foundation")
        for item in (NSNumber, NSArray, NSMutableDictionary, NSURL):  # type: ignore[assignment]
            setattr(foundation, item.__name__, item)
        objc = types.ModuleType("objc")
        objc.autorelease_pool = contextlib.nullcontext  # type: ignore[attr-defined]
        for name, module in (("CoreML", core_ml), ("Foundation", foundation), ("objc", objc)):
            monkeypatch.setitem(sys.modules, name, module)
        monkeypatch.setattr(coreml_nogil, "available", lambda: True)
        return self

    def compute_units(self) -> list[int]:
        return [model.configuration.computeUnits for model in self.loads]


# -- ONNX Runtime --------------------------------------------------------------------

_REAL_SESSION = onnxruntime.InferenceSession
_KNOWN_PROVIDERS = frozenset(onnxruntime.get_all_providers())


class StandInSession:
    """An ONNX Runtime session whose registered providers follow the stand-in's
    build; it computes with a real CPU session."""

    def __init__(self, requested: list[str], registered: list[str], real: Any) -> None:
        self.requested, self.registered, self._real = requested, registered, real

    def get_providers(self) -> list[str]:
        return list(self.registered)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


@dataclass
class OnnxRuntime:
    """onnxruntime built with the ``available`` providers, of which only ``working``
    can load on this machine (``CUDA`` in ``available`` but not in ``working``: an
    onnxruntime-gpu whose CUDA or cuDNN libraries are missing)."""

    available: Sequence[str] = (CUDA, CPU)
    working: Sequence[str] = (CPU,)
    sessions: list[StandInSession] = field(default_factory=list)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> OnnxRuntime:
        monkeypatch.setattr(onnxruntime, "get_available_providers", self.get_available_providers)
        monkeypatch.setattr(onnxruntime, "InferenceSession", self.inference_session)
        return self

    def get_available_providers(self) -> list[str]:
        return list(self.available)

    def inference_session(
        self,
        path_or_bytes: str | bytes | os.PathLike[str],
        sess_options: Any = None,
        providers: Sequence[str | tuple[str, dict[Any, Any]]] | None = None,
        provider_options: Sequence[dict[Any, Any]] | None = None,
        **kwargs: Any,
    ) -> StandInSession:
        """``InferenceSession.__init__`` and ``check_and_normalize_provider_args``."""
        if not isinstance(path_or_bytes, str | bytes | os.PathLike):
            raise TypeError(f"Unable to load from type '{type(path_or_bytes)}'")
        if sess_options is not None and not isinstance(sess_options, onnxruntime.SessionOptions):
            raise TypeError(
                f"sess_options must be an onnxruntime.SessionOptions, got {sess_options!r}"
            )
        names = self._provider_names(providers, provider_options)
        registered = []
        for name in names:
            if name not in self.available:
                warnings.warn(
                    f"Specified provider '{name}' is not in available provider names."
                    f"Available providers: '{', '.join(self.available)}'",
                    stacklevel=2,
                )
            elif name in self.working and name not in registered:
                registered.append(name)
        if CPU not in registered:
            registered.append(CPU)  # ONNX Runtime always registers the CPU provider last
        real = _REAL_SESSION(path_or_bytes, sess_options, providers=[CPU])
        session = StandInSession(names, registered, real)
        self.sessions.append(session)
        return session

    def _provider_names(
        self,
        providers: Sequence[str | tuple[str, dict[Any, Any]]] | None,
        provider_options: Sequence[dict[Any, Any]] | None,
    ) -> list[str]:
        if providers is None:
            return [name for name in self.available if name in self.working]
        if isinstance(providers, str):
            # the real one reads each character as a provider name, then falls back
            raise ValueError("'providers' should be a sequence of names, not one string.")
        if not isinstance(providers, Sequence):
            raise ValueError("'providers' should be a sequence.")
        names = []
        if provider_options is not None:
            if len(providers) != len(provider_options):
                raise ValueError(
                    "'providers' and 'provider_options' should be the same length if both "
                    "are given."
                )
            if not all(isinstance(provider, str) for provider in providers):
                raise ValueError(
                    "Only string values for 'providers' are supported if 'provider_options' "
                    "is given."
                )
        for provider in providers:
            if isinstance(provider, str):
                names.append(provider)
            elif (
                isinstance(provider, tuple)
                and len(provider) == 2
                and isinstance(provider[0], str)
                and isinstance(provider[1], dict)
            ):
                names.append(provider[0])
            else:
                raise ValueError(
                    "'providers' values must be either strings or (string, dict) tuples."
                )
        for name in names:
            if name not in _KNOWN_PROVIDERS:
                raise ValueError(f"Unknown Provider Type: {name}")
        return names

    def requested(self) -> list[list[str]]:
        return [session.requested for session in self.sessions]


__all__ = [
    "CPU",
    "CUDA",
    "ML_COMPUTE_UNITS",
    "ML_DATA_TYPES",
    "PLAN_DEVICES",
    "CompiledModel",
    "CoreMLComputePlan",
    "CoreMLTools",
    "MLMultiArray",
    "OnnxRuntime",
    "PyObjCCoreML",
    "fake_mlpackage",
    "tree_digest",
]


# -- the private ANE framework (anekit.backends.direct.PrivateANE) ---------------------


def _ane_layout(name: str, shape: tuple[int, ...], symbol: int, row_align: int) -> dict[str, Any]:
    """How the stand-in compiler lays out a tensor, as ``modelAttributes`` describes it:
    (..., C, H, W) as batches, channels, height and width, fp16, every row starting at a
    multiple of ``row_align`` bytes (tmc/apple x/ane/surface.go: 64-byte aligned rows)."""
    padded = (1, 1, 1, *shape)[-3:]
    channels, height, width = padded
    batches = int(np.prod(shape[:-3])) if len(shape) > 3 else 1
    row = -(-width * 2 // row_align) * row_align
    plane = row * height
    return {"Name": name, "Symbol": symbol, "Type": "Float16", "Batches": batches,
            "Channels": channels, "Depth": 1, "Height": height, "Width": width,
            "RowStride": row, "PlaneStride": plane, "DepthStride": plane,
            "BatchStride": plane * channels}  # fmt: skip


def _read_tensor(data: bytes, entry: dict[str, Any]) -> np.ndarray:
    """The (batches, channels, height, width) values of a buffer laid out as ``entry``,
    row by row (the stand-in's own reading, apart from anekit's)."""
    rows = []
    for b in range(entry["Batches"]):
        for c in range(entry["Channels"]):
            for h in range(entry["Height"]):
                offset = (
                    b * entry["BatchStride"] + c * entry["PlaneStride"] + h * entry["RowStride"]
                )
                rows.append(np.frombuffer(data, np.float16, entry["Width"], offset))
    return np.stack(rows)


def _write_tensor(value: np.ndarray, entry: dict[str, Any], size: int) -> bytes:
    buffer = bytearray(size)
    flat = np.asarray(value, np.float16).reshape(-1, entry["Width"])
    index = 0
    for b in range(entry["Batches"]):
        for c in range(entry["Channels"]):
            for h in range(entry["Height"]):
                offset = (
                    b * entry["BatchStride"] + c * entry["PlaneStride"] + h * entry["RowStride"]
                )
                row = flat[index].tobytes()
                buffer[offset : offset + len(row)] = row
                index += 1
    return bytes(buffer)


def _shapes(function: Any) -> dict[str, tuple[int, ...]]:
    """Every named value's shape in a parsed MIL function (tests/miltext.py)."""
    shapes = {name: kind.shape for statement in function.statements
              for kind, name in statement.outputs}  # fmt: skip
    shapes.update({name: kind.shape for kind, name in function.inputs})
    return shapes


@dataclass
class _Request:
    inputs: list[int]
    input_indices: list[int]
    outputs: list[int]
    output_indices: list[int]
    procedure: int
    hardware_ns: int | None = None


@dataclass
class _Model:
    """A compiled model: each ``func`` of its MIL text a procedure, in text order, its
    inputs' and outputs' symbols numbered across procedures."""

    runtime: StandInANE
    text: str
    steps: list[str] = field(default_factory=list)
    functions: list[Any] = field(default_factory=list)
    attributes: dict[str, Any] = field(default_factory=dict)
    stats_mask: int = 0
    evaluated: list[str] = field(default_factory=list)  # the functions run, in order

    def _checked(self, qos: int, error: Any) -> None:
        if qos != 21 or error is not None:
            raise TypeError(f"QoS {qos} (21 expected), error out-argument {error!r} (None)")

    def compileWithQoS_options_error_(self, qos: int, options: dict[str, Any], error: Any) -> Any:
        from miltext import parse

        self._checked(qos, error)
        self.steps.append("compile")
        if self.runtime.refuse == "compile":
            return (False, "ANECCompile() FAILED")
        self.functions = list(parse(self.text).functions.values())
        statuses, listed = [], []
        inputs = outputs = 0
        for function in self.functions:
            shapes, align = _shapes(function), self.runtime.row_align
            live_in = [_ane_layout(name, shapes[name], inputs + i, align)
                       for i, (_, name) in enumerate(function.inputs)]  # fmt: skip
            live_out = [_ane_layout(name, shapes[name], outputs + i, align)
                        for i, name in enumerate(function.outputs)]  # fmt: skip
            statuses.append({"LiveInputList": live_in, "LiveOutputList": live_out})
            listed.append({
                "ANEFModelInputSymbolIndexArray": [entry["Symbol"] for entry in live_in],
                "ANEFModelOutputSymbolIndexArray": [entry["Symbol"] for entry in live_out],
            })  # fmt: skip
            inputs, outputs = inputs + len(live_in), outputs + len(live_out)
        self.attributes = {
            "NetworkStatusList": statuses,
            "ANEFModelDescription": {"ANEFModelProcedures": listed},
        }
        return (True, None)

    def loadWithQoS_options_error_(self, qos: int, options: dict[str, Any], error: Any) -> Any:
        self._checked(qos, error)
        if self.steps[-1:] != ["compile"]:
            return (False, "load before compile")
        self.steps.append("load")
        return (True, None)

    def evaluateWithQoS_options_request_error_(
        self, qos: int, options: dict[str, Any], request: _Request, error: Any
    ) -> Any:
        self._checked(qos, error)
        if "load" not in self.steps or "unload" in self.steps:
            return (False, "evaluate on a model not loaded")
        procedure = request.procedure
        if not 0 <= procedure < len(self.functions):
            return (False, f"no procedure {procedure}")
        status = self.attributes["NetworkStatusList"][procedure]
        listed = self.attributes["ANEFModelDescription"]["ANEFModelProcedures"][procedure]
        if (request.input_indices, request.output_indices) != (
            listed["ANEFModelInputSymbolIndexArray"],
            listed["ANEFModelOutputSymbolIndexArray"],
        ):  # AIF docs/ane-internals.md: wrong indices are refused (error 0x2)
            return (
                False,
                f"symbol indices {request.input_indices} do not match procedure {procedure}",
            )
        function = self.functions[procedure]
        shapes = _shapes(function)
        memory = self.runtime.memory
        values = [
            _read_tensor(memory[pointer], entry).reshape(shapes[entry["Name"]])
            for pointer, entry in zip(request.inputs, status["LiveInputList"], strict=True)
        ]
        results = self.runtime.device(self.text, values, function.name)
        self.evaluated.append(function.name)
        for pointer, entry, result in zip(
            request.outputs, status["LiveOutputList"], results, strict=True
        ):
            assert np.shape(result) == shapes[entry["Name"]], "output shape"
            memory[pointer] = _write_tensor(result, entry, len(memory[pointer]))
        if self.stats_mask:
            request.hardware_ns = self.runtime.hardware_ns_per_call
        self.steps.append("evaluate")
        return (True, None)

    def unloadWithQoS_error_(self, qos: int, error: Any) -> Any:
        self._checked(qos, error)
        self.steps.append("unload")
        return (True, None)


@dataclass
class StandInANE:
    """:class:`anekit.backends.direct.PrivateANE`'s interface as its framework behaves
    (docs/ane-knowledge.md §5.1): MIL text that parses and a valid weight file, QoS 21, a
    compile before a load before an evaluation; after the load, buffer layouts with rows
    aligned to ``row_align`` bytes and symbol indices per procedure, which a request must
    use; buffers of the reported sizes; the hardware time when statistics were asked
    for. ``device(mil_text, inputs, function)`` plays the ANE."""

    device: Any
    refuse: str | None = None
    row_align: int = 64
    hardware_ns_per_call: int | None = 41_000
    models: list[_Model] = field(default_factory=list)
    memory: dict[int, bytes] = field(default_factory=dict)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> StandInANE:
        """Make anekit's direct backend use this stand-in, as on a Mac it may."""
        from anekit.backends import direct

        monkeypatch.setattr(direct, "unavailable_reason", lambda: None)
        monkeypatch.setattr(direct, "PrivateANE", lambda: self)
        return self

    def model(self, text: str, weights: bytes, weight_path: str) -> _Model:
        from anekit._milblob import read_blob_file
        from miltext import parse

        parse(text)  # the MIL text must parse
        read_blob_file(weights)  # and the weight file must be one
        assert weight_path == "@model_path/weights/weight.bin"
        self.models.append(_Model(self, text))
        return self.models[-1]

    def call(self, step: str, method: Any, *arguments: Any) -> None:
        ok, error = method(*arguments, None)
        if not ok:
            from anekit.backends.direct import DirectError

            raise DirectError(f"the ANE framework refused to {step}: {error}")

    def attributes(self, model: _Model) -> dict[str, Any] | None:
        assert "load" in model.steps, "modelAttributes are read after the load"
        return model.attributes

    def enable_stats(self, model: _Model) -> None:
        assert "load" in model.steps, "the load clears the statistics mask (tmc/apple)"
        model.stats_mask = 0xF

    def surface(self, size: int) -> tuple[int, Any]:
        pointer = len(self.memory) + 1
        self.memory[pointer] = bytes(size)
        return pointer, pointer

    def write(self, pointer: int, data: bytes) -> None:
        assert len(data) == len(self.memory[pointer]), "input buffer size"
        self.memory[pointer] = data

    def read(self, pointer: int, size: int) -> bytes:
        assert size == len(self.memory[pointer]), "output buffer size"
        return self.memory[pointer]

    def request(
        self,
        inputs: list[int],
        input_indices: list[int],
        outputs: list[int],
        output_indices: list[int],
        procedure: int,
    ) -> _Request:
        return _Request(inputs, input_indices, outputs, output_indices, procedure)

    def hardware_ns(self, request: _Request) -> int | None:
        return request.hardware_ns


def simulated_ane(monkeypatch: pytest.MonkeyPatch, row_align: int = 64) -> StandInANE:
    """:class:`StandInANE`, installed, whose device runs in anekit's simulator the MIL
    program a text was written from (the test records which program anekit wrote each
    text from; the stand-in itself is given the text only)."""
    from anekit.package import mil_text
    from anekit.sim import run

    written: dict[str, Any] = {}
    write = mil_text.to_mil_text

    def recording(program: Any, form: Any = "1.3", functions: Any = None) -> Any:
        result = write(program, form, functions)
        written[result.text] = program
        return result

    def device(text: str, values: list[np.ndarray], function: str) -> list[np.ndarray]:
        program = written[text]
        declared = program.functions[function]
        feeds = dict(zip(declared.inputs, values, strict=True))
        outputs = run(program, feeds, function=function).outputs
        return [outputs[var.name] for var in declared.outputs]

    monkeypatch.setattr(mil_text, "to_mil_text", recording)
    return StandInANE(device, row_align=row_align).install(monkeypatch)
