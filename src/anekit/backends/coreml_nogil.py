"""Core ML predictions with the GIL released (macOS, ``pyobjc-framework-CoreML``).

coremltools' ``MLModel.predict`` calls Core ML with the GIL held
(``coremlpython/CoreMLPython.mm``, ``Model::predict``), so nothing else in the
process runs Python while the ANE works. PyObjC releases the GIL around every
Objective-C call, so this module calls ``-[MLModel predictionFromFeatures:error:]``
through PyObjC instead. Everything Core ML reads during the call is a real Foundation
object (``NSArray`` shapes, an ``NSDictionary`` of features): a Python list or dict
would reach Core ML as a Python-backed proxy and take the GIL back inside the call.

Unverified on hardware in this project's CI (no Mac); written against Apple's
documented API (``MLModelConfiguration.computeUnits`` / ``functionName``,
``MLMultiArray initWithShape:dataType:error:``, ``dataPointer``, ``strides``) and
PyObjC's ``objc.varlist.as_buffer``. Where PyObjC's CoreML bindings are missing,
:func:`available` is false and callers use coremltools.
"""

from __future__ import annotations

import importlib.util
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anekit.errors import BackendUnavailableError

#: MLComputeUnits values (CoreML/MLModelConfiguration.h).
COMPUTE_UNITS = {"CPU_ONLY": 0, "CPU_AND_GPU": 1, "ALL": 2, "CPU_AND_NE": 3}
#: MLMultiArrayDataType values (CoreML/MLMultiArray.h) and their NumPy types.
DTYPES: dict[int, Any] = {
    0x10000 | 16: np.float16,
    0x10000 | 32: np.float32,
    0x10000 | 64: np.float64,
    0x20000 | 32: np.int32,
}


def available() -> bool:
    """True on macOS with PyObjC's CoreML bindings installed."""
    return platform.system() == "Darwin" and importlib.util.find_spec("CoreML") is not None


def strided_view(array: Any, dtype: Any) -> np.ndarray:
    """A NumPy view of an ``MLMultiArray``'s memory with its own (possibly padded)
    strides; valid while ``array`` lives."""
    dtype = np.dtype(dtype)
    shape = [int(size) for size in array.shape()]
    strides = [int(step) for step in array.strides()]
    if any(size == 0 for size in shape):
        return np.empty(shape, dtype)
    span = 1 + sum((size - 1) * step for size, step in zip(shape, strides, strict=True))
    flat = np.frombuffer(array.dataPointer().as_buffer(span * dtype.itemsize), dtype, span)
    return np.lib.stride_tricks.as_strided(
        flat, shape=shape, strides=[step * dtype.itemsize for step in strides]
    )


def _ns_array(values: Sequence[int]) -> Any:
    import Foundation

    return Foundation.NSArray.arrayWithArray_(
        [Foundation.NSNumber.numberWithInt_(int(v)) for v in values]
    )


class NoGilModel:
    """A compiled Core ML model (``.mlmodelc``) whose ``predict`` releases the GIL."""

    def __init__(
        self, compiled: Path, compute_units: str = "CPU_AND_NE", function_name: str | None = None
    ) -> None:
        if not available():
            raise BackendUnavailableError(
                "GIL-free Core ML needs macOS and pyobjc-framework-CoreML"
            )
        import CoreML
        import Foundation

        configuration = CoreML.MLModelConfiguration.alloc().init()
        configuration.setComputeUnits_(COMPUTE_UNITS[compute_units])
        if function_name is not None:
            configuration.setFunctionName_(function_name)  # macOS 15: multifunction models
        url = Foundation.NSURL.fileURLWithPath_(str(compiled))
        model, error = CoreML.MLModel.modelWithContentsOfURL_configuration_error_(
            url, configuration, None
        )
        if model is None:
            raise BackendUnavailableError(f"{compiled}: Core ML could not load it: {error}")
        self.model = model
        self.input_types: dict[str, int] = {}
        for name, description in model.modelDescription().inputDescriptionsByName().items():
            constraint = description.multiArrayConstraint()
            if constraint is not None:
                self.input_types[str(name)] = int(constraint.dataType())

    def _multi_array(self, name: str, value: np.ndarray) -> Any:
        import CoreML

        kind = self.input_types.get(name, 0x10000 | 32)
        array, error = CoreML.MLMultiArray.alloc().initWithShape_dataType_error_(
            _ns_array(value.shape), kind, None
        )
        if array is None:
            raise BackendUnavailableError(f"input {name}: no MLMultiArray: {error}")
        strided_view(array, DTYPES[kind])[...] = value
        return array

    def predict(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Output name -> array (a copy), like coremltools' ``predict``."""
        import CoreML
        import Foundation
        import objc

        with objc.autorelease_pool():
            features = Foundation.NSMutableDictionary.dictionary()
            for name, value in feeds.items():
                array = self._multi_array(name, np.asarray(value))
                features.setObject_forKey_(
                    CoreML.MLFeatureValue.featureValueWithMultiArray_(array), name
                )
            provider, error = CoreML.MLDictionaryFeatureProvider.alloc().initWithDictionary_error_(
                features, None
            )
            if provider is None:
                raise BackendUnavailableError(f"Core ML refused the inputs: {error}")
            outputs, error = self.model.predictionFromFeatures_error_(provider, None)  # GIL free
            if outputs is None:
                raise BackendUnavailableError(f"Core ML prediction failed: {error}")
            result = {}
            for name in outputs.featureNames():
                array = outputs.featureValueForName_(name).multiArrayValue()
                if array is None:
                    continue  # not a tensor output
                dtype = DTYPES.get(int(array.dataType()), np.float32)
                result[str(name)] = np.array(strided_view(array, dtype))
            return result


def load(compiled: Path, compute_units: str, function_name: str | None = None) -> Any:
    """A predictor for a compiled model: GIL-free where PyObjC allows it, else
    coremltools' ``CompiledMLModel`` (which holds the GIL while it predicts)."""
    if available():
        return NoGilModel(compiled, compute_units, function_name)
    from anekit._coremltools import ct

    return ct.models.CompiledMLModel(
        str(compiled),
        compute_units=getattr(ct.ComputeUnit, compute_units),
        function_name=function_name,
    )
