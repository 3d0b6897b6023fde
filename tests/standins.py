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
  ``coremltools/__init__.py`` (``ComputeUnit``);
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
    """What the CompiledMLModel stand-in returns: the arguments it was loaded with."""

    path: str
    compute_units: Any
    function_name: str
    predict: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]] | None = None


@dataclass
class CoreMLTools:
    """``ct.models.utils.compile_model`` and ``ct.models.CompiledMLModel`` as they
    behave on a Mac (coremltools 9.0), without Core ML.

    A compile takes ``seconds`` and writes a directory holding a copy of the source
    package under ``source/`` (so a test can tell which package a compiled model came
    from); ``fail_compile`` makes the next compile fail like Core ML's compiler.
    """

    seconds: float = 0.0
    #: Function names the compiled models have (None: any).
    functions: frozenset[str] | None = None
    fail_compile: str | None = None
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
        if not (source / "Manifest.json").is_file():
            raise RuntimeError(f"Error compiling model: {model} is not a model package")
        original = Path(tempfile.mkdtemp(suffix=".mlmodelc"))
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
        loaded = CompiledModel(path, compute_units, function)
        self.loads.append(loaded)
        return loaded


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
    "CompiledModel",
    "CoreMLTools",
    "MLMultiArray",
    "OnnxRuntime",
    "PyObjCCoreML",
    "fake_mlpackage",
    "tree_digest",
]
