"""The direct ANE path (experimental, macOS): a program compiled and run by the private
``AppleNeuralEngine`` framework, without Core ML.

**Private, undocumented API that any macOS update can break; never the default.** It is
used only when asked for (``program(x, backend="direct")``); when the framework cannot
load, :meth:`DirectBackend.load` falls back to Core ML with a warning that says why.

The call sequence is maderix/ANE's (``training/ane_runtime.h``, ``inmem_basic.m``;
docs/ane-knowledge.md §5.1), through PyObjC:

1. ``_ANEInMemoryModelDescriptor modelWithMILText:weights:optionsPlist:`` with the
   program as MIL text (:mod:`anekit.package.mil_text`) and a weights dictionary
   ``{"@model_path/weights/weight.bin": {"offset": 0, "data": weight.bin}}``;
2. ``_ANEInMemoryModel inMemoryModelWithDescriptor:``, then ``compileWithQoS:options:error:``
   and ``loadWithQoS:options:error:`` (QoS 21);
3. one IOSurface per input and output (a flat byte buffer, fp16), each wrapped by
   ``_ANEIOSurfaceObject objectWithIOSurface:``;
4. ``_ANERequest requestWithInputs:inputIndices:outputs:outputIndices:weightsBuffer:
   perfStats:procedureIndex:`` and ``evaluateWithQoS:options:request:error:``;
5. ``unloadWithQoS:error:`` on close.

The ANE compiler serves about 100 compiles per process (MDX ``docs/ANE_INTERNALS.md``):
past :data:`COMPILE_BUDGET` a load is refused, and a caller that needs more runs them in
a fresh process. Inputs and outputs are fp16; the ANE wants a last axis of at least 32
elements, which anekit's ``pad_io_width`` pass gives every traced program (its I/O
contract pads and slices around the call).

Unverified on hardware: nothing in this project's CI has an ANE. tests/backends/
test_direct.py runs this module against a stand-in of the private classes that refuses
what the sources say they refuse; docs/direct.md says what is and is not known.
"""

from __future__ import annotations

import ctypes
import platform
import tempfile
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from anekit.backends import RunReport
from anekit.errors import BackendUnavailableError

if TYPE_CHECKING:
    from anekit.program import CompiledProgram

FRAMEWORK = "/System/Library/PrivateFrameworks/AppleNeuralEngine.framework"
IOSURFACE = "/System/Library/Frameworks/IOSurface.framework/IOSurface"
#: The quality of service every call passes (maderix/ANE, AppleNeuralEngine.jl).
QOS = 21
#: Compiles this process may still make (the ANE compiler's per-process limit, ~100-119).
COMPILE_BUDGET = 100
#: The MIL text form: ``1.3`` (M3 and later) or ``1.0`` (every ANE; M1/M2 need it).
FORMS = ("1.3", "1.0")

#: ``+[_ANERequest requestWithInputs:inputIndices:outputs:outputIndices:weightsBuffer:
#: perfStats:procedureIndex:]`` as PyObjC names it.
_REQUEST = (
    "requestWithInputs_inputIndices_outputs_outputIndices_weightsBuffer_perfStats_procedureIndex_"
)

_compiles = 0


class DirectError(BackendUnavailableError):
    """The private framework refused a step (load, compile, evaluate); the message says
    which, with the framework's own error."""


def unavailable_reason() -> str | None:
    """Why the direct path cannot run here, or None when it may."""
    if platform.system() != "Darwin":
        return "the direct ANE path needs macOS"
    if platform.machine() != "arm64":
        return "the direct ANE path needs an Apple silicon Mac (arm64)"
    if not Path(FRAMEWORK).is_dir():
        return f"no {FRAMEWORK} on this Mac"
    try:
        import objc  # noqa: F401
    except ImportError:
        return "PyObjC is not installed (pip install pyobjc-core pyobjc-framework-Cocoa)"
    return None


class PrivateANE:
    """The private framework through PyObjC, and IOSurfaces through ctypes: the only code
    in anekit that touches them."""

    def __init__(self) -> None:
        import objc
        from Foundation import NSData, NSDictionary

        objc.loadBundle("AppleNeuralEngine", {}, bundle_path=FRAMEWORK)
        self.objc, self.NSData, self.NSDictionary = objc, NSData, NSDictionary
        # BOOL-returning methods with an NSError** last argument: PyObjC returns
        # (ok, error) once the argument is declared as an output.
        for selector, error_argument in (
            (b"compileWithQoS:options:error:", 4),
            (b"loadWithQoS:options:error:", 4),
            (b"unloadWithQoS:error:", 3),
            (b"evaluateWithQoS:options:request:error:", 5),
        ):
            objc.registerMetaDataForSelector(
                b"_ANEInMemoryModel",
                selector,
                {"retval": {"type": objc._C_NSBOOL},
                 "arguments": {error_argument: {"type_modifier": objc._C_OUT}}},
            )  # fmt: skip
        self.Descriptor = objc.lookUpClass("_ANEInMemoryModelDescriptor")
        self.Model = objc.lookUpClass("_ANEInMemoryModel")
        self.Request = objc.lookUpClass("_ANERequest")
        self.SurfaceObject = objc.lookUpClass("_ANEIOSurfaceObject")
        self.iosurface = ctypes.cdll.LoadLibrary(IOSURFACE)
        self.iosurface.IOSurfaceCreate.restype = ctypes.c_void_p
        self.iosurface.IOSurfaceCreate.argtypes = [ctypes.c_void_p]
        self.iosurface.IOSurfaceGetBaseAddress.restype = ctypes.c_void_p
        self.iosurface.IOSurfaceGetBaseAddress.argtypes = [ctypes.c_void_p]
        self.iosurface.IOSurfaceLock.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p]
        self.iosurface.IOSurfaceUnlock.argtypes = [
            ctypes.c_void_p,
            ctypes.c_uint32,
            ctypes.c_void_p,
        ]

    def model(self, text: str, weights: bytes, weight_path: str) -> Any:
        """The in-memory model of ``text``, its weight file prepared where the compiler
        looks for it (a temporary folder named by the model's identifier)."""
        descriptor = self.Descriptor.modelWithMILText_weights_optionsPlist_(
            self.NSData.dataWithBytes_length_(text.encode(), len(text.encode())),
            {
                weight_path: {
                    "offset": 0,
                    "data": self.NSData.dataWithBytes_length_(weights, len(weights)),
                }
            },
            None,
        )
        if descriptor is None:
            raise DirectError("the ANE framework refused the MIL text (no model descriptor)")
        model = self.Model.inMemoryModelWithDescriptor_(descriptor)
        folder = Path(tempfile.gettempdir()) / str(model.hexStringIdentifier())
        (folder / "weights").mkdir(parents=True, exist_ok=True)
        (folder / "model.mil").write_text(text)
        (folder / "weights" / "weight.bin").write_bytes(weights)
        return model

    def call(self, step: str, method: Any, *arguments: Any) -> None:
        """``method(*arguments, None)`` -> (ok, error); a refusal raises DirectError."""
        ok, error = method(*arguments, None)
        if not ok:
            raise DirectError(f"the ANE framework refused to {step}: {error}")

    def surface(self, size: int) -> tuple[int, Any]:
        """A flat IOSurface of ``size`` bytes (width = size, height 1, one byte per
        element) and the framework's object wrapping it."""
        properties = self.NSDictionary.dictionaryWithDictionary_(
            {"IOSurfaceWidth": size, "IOSurfaceHeight": 1, "IOSurfaceBytesPerElement": 1,
             "IOSurfaceBytesPerRow": size, "IOSurfaceAllocSize": size, "IOSurfacePixelFormat": 0}
        )  # fmt: skip
        pointer = self.iosurface.IOSurfaceCreate(self.objc.pyobjc_id(properties))
        if not pointer:
            raise DirectError(f"IOSurfaceCreate refused a surface of {size} bytes")
        wrapped = self.SurfaceObject.objectWithIOSurface_(self.objc.objc_object(c_void_p=pointer))
        return pointer, wrapped

    def write(self, pointer: int, data: bytes) -> None:
        self.iosurface.IOSurfaceLock(pointer, 0, None)
        try:
            ctypes.memmove(self.iosurface.IOSurfaceGetBaseAddress(pointer), data, len(data))
        finally:
            self.iosurface.IOSurfaceUnlock(pointer, 0, None)

    def read(self, pointer: int, size: int) -> bytes:
        self.iosurface.IOSurfaceLock(pointer, 1, None)  # kIOSurfaceLockReadOnly
        try:
            return ctypes.string_at(self.iosurface.IOSurfaceGetBaseAddress(pointer), size)
        finally:
            self.iosurface.IOSurfaceUnlock(pointer, 1, None)

    def request(self, inputs: list[Any], outputs: list[Any], procedure: int) -> Any:
        return getattr(self.Request, _REQUEST)(
            inputs,
            list(range(len(inputs))),
            outputs,
            list(range(len(outputs))),
            None,
            None,
            procedure,
        )


class DirectSession:
    """A program compiled and loaded by the private framework; fp16 in, fp16 out."""

    def __init__(self, program: CompiledProgram, runtime: Any, form: str = "1.3") -> None:
        global _compiles
        from anekit.package.mil_text import to_mil_text

        if form not in FORMS:
            raise ValueError(f"MIL text form must be one of {', '.join(FORMS)}, got {form!r}")
        specs = [*program.io.inputs, *program.io.outputs]
        wide = [spec for spec in specs if np.dtype(spec.dtype) != np.float16]
        if wide:
            names = ", ".join(f"{spec.name} ({np.dtype(spec.dtype)})" for spec in wide)
            raise DirectError(f"the direct path takes fp16 inputs and outputs only: {names}")
        if _compiles >= COMPILE_BUDGET:
            raise DirectError(
                f"this process has made {_compiles} ANE compiles, the framework's budget; "
                "run further programs in a fresh process"
            )
        self.runtime, self.form = runtime, form
        self.last_run: RunReport | None = None
        self.inputs = [(str(spec.name), tuple(spec.shape)) for spec in program.io.inputs]
        self.outputs = [(str(spec.name), tuple(spec.shape)) for spec in program.io.outputs]
        written = to_mil_text(program.lowered(), form=form)  # type: ignore[arg-type]
        self.model = runtime.model(written.text, written.weights, written.weight_path)
        _compiles += 1
        runtime.call("compile", self.model.compileWithQoS_options_error_, QOS, {})
        runtime.call("load", self.model.loadWithQoS_options_error_, QOS, {})
        self._surfaces = {
            name: runtime.surface(_bytes(shape)) for name, shape in [*self.inputs, *self.outputs]
        }
        self._request = runtime.request(
            [self._surfaces[name][1] for name, _ in self.inputs],
            [self._surfaces[name][1] for name, _ in self.outputs],
            0,
        )

    def predict(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        start = time.perf_counter()
        for name, shape in self.inputs:
            value = np.ascontiguousarray(feeds[name], np.float16)
            if value.shape != shape:
                raise ValueError(f"input {name}: shape {value.shape}, expected {shape}")
            self.runtime.write(self._surfaces[name][0], value.tobytes())
        self.runtime.call(
            "evaluate", self.model.evaluateWithQoS_options_request_error_, QOS, {}, self._request
        )
        outputs: dict[str, np.ndarray] = {
            name: np.frombuffer(
                self.runtime.read(self._surfaces[name][0], _bytes(shape)), np.float16
            ).reshape(shape)
            for name, shape in self.outputs
        }
        self.last_run = RunReport(
            backend="direct",
            device="ANE (direct, private API; experimental)",
            simulated=False,
            seconds=time.perf_counter() - start,
            requested=f"MIL text {self.form}",
        )
        return outputs

    def close(self) -> None:
        """Unload the model from the ANE."""
        self.runtime.call("unload", self.model.unloadWithQoS_error_, QOS)


def _bytes(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape, dtype=np.int64)) * 2  # fp16


class DirectBackend:
    """The private framework directly (``backend="direct"``): experimental, never chosen
    automatically; falls back to Core ML, with a warning naming why, when it cannot load."""

    name = "direct"

    def __init__(self, runtime: Any = None) -> None:
        self._runtime = runtime

    def available(self) -> bool:
        return unavailable_reason() is None

    def unavailable_reason(self) -> str:
        return unavailable_reason() or ""

    def load(self, program: CompiledProgram, mode: str | None = None) -> Any:
        """``program`` on the ANE through the private framework (``mode``: the MIL text
        form, ``1.3`` by default); on a refusal, on Core ML instead."""
        try:
            if self._runtime is None:
                self._runtime = PrivateANE()
            return DirectSession(program, self._runtime, mode or "1.3")
        except (DirectError, ImportError, OSError, AttributeError) as error:
            from anekit.backends.coreml import CoreMLBackend

            warnings.warn(
                f"the direct ANE path could not run this program ({error}); running it on "
                "Core ML instead",
                RuntimeWarning,
                stacklevel=2,
            )
            return CoreMLBackend().load(program)
