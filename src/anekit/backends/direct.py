"""The direct ANE path (experimental, macOS): a program compiled and run by the private
``AppleNeuralEngine`` framework, without Core ML.

**Private, undocumented API that any macOS update can break; never the default.** It is
used only when asked for (``program(x, backend="direct")``); when the framework cannot
load, :meth:`DirectBackend.load` falls back to Core ML with a warning that says why
(inside :func:`no_fallback`, it raises instead).

The call sequence is maderix/ANE's (``training/ane_runtime.h``, ``inmem_basic.m``;
docs/ane-knowledge.md §5.1), through PyObjC:

1. ``_ANEInMemoryModelDescriptor modelWithMILText:weights:optionsPlist:`` with the
   program as MIL text (:mod:`anekit.package.mil_text`) and a weights dictionary
   ``{"@model_path/weights/weight.bin": {"offset": 0, "data": weight.bin}}``;
2. ``_ANEInMemoryModel inMemoryModelWithDescriptor:``, then ``compileWithQoS:options:error:``
   and ``loadWithQoS:options:error:`` (QoS 21);
3. after the load, the model's ``modelAttributes``: each procedure's buffer layouts
   and symbol indices (:mod:`anekit.backends.direct_io`); a performance-statistics mask
   (``setPerfStatsMask:``), so that a request can report the hardware time;
4. one IOSurface per input and output, of the size its layout reports (fp16, rows at
   the reported stride), each wrapped by ``_ANEIOSurfaceObject objectWithIOSurface:``;
5. per procedure, ``_ANERequest requestWithInputs:inputIndices:outputs:outputIndices:
   weightsBuffer:perfStats:procedureIndex:`` (``perfStats``: an array holding one
   ``_ANEPerformanceStats statsWithHardwareExecutionNS:``) and
   ``evaluateWithQoS:options:request:error:``; then ``hwExecutionTime`` (ns) of the
   request's statistics, where the framework fills it in;
6. ``unloadWithQoS:error:`` on close.

A program's functions are procedures of one model (:class:`DirectModel`): a model's
buckets cost one compile.

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

import contextlib
import ctypes
import platform
import tempfile
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from anekit.backends import RunReport
from anekit.backends.direct_io import Procedure, Tensor, procedures
from anekit.backends.request import LoadRequest
from anekit.errors import BackendUnavailableError, ProgramError

if TYPE_CHECKING:
    from coremltools.converters.mil.mil import Program

FRAMEWORK = "/System/Library/PrivateFrameworks/AppleNeuralEngine.framework"
IOSURFACE = "/System/Library/Frameworks/IOSurface.framework/IOSurface"
#: The quality of service every call passes (maderix/ANE, AppleNeuralEngine.jl).
QOS = 21
#: Compiles one process may make (the ANE compiler's per-process limit, ~100-119, MDX);
#: ``ANEKIT_DIRECT_COMPILE_BUDGET`` sets another (:func:`compile_budget`).
COMPILE_BUDGET = 100
#: The MIL text form: ``1.3`` (M3 and later) or ``1.0`` (every ANE; M1/M2 need it).
FORMS = ("1.3", "1.0")

#: ``+[_ANERequest requestWithInputs:inputIndices:outputs:outputIndices:weightsBuffer:
#: perfStats:procedureIndex:]`` as PyObjC names it.
_REQUEST = (
    "requestWithInputs_inputIndices_outputs_outputIndices_weightsBuffer_perfStats_procedureIndex_"
)

_compiles = 0
#: Set inside :func:`no_fallback`: a refusal raises instead of running on Core ML.
_refuse_fallback: ContextVar[bool] = ContextVar("anekit_direct_refuse_fallback", default=False)


class DirectError(BackendUnavailableError):
    """The private framework refused a step (load, compile, evaluate); the message says
    which, with the framework's own error."""


#: What a direct path that cannot take a program raises: a refusal (a step, a buffer
#: description), a program the MIL text cannot hold, a framework or PyObjC that would not load.
REFUSALS = (BackendUnavailableError, ProgramError, ImportError, OSError, AttributeError)


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


def compile_budget() -> int:
    """Compiles this process may make: ``ANEKIT_DIRECT_COMPILE_BUDGET`` or
    :data:`COMPILE_BUDGET`."""
    from anekit.config import direct_compile_budget

    return direct_compile_budget(COMPILE_BUDGET)


def compiles_left() -> int:
    """Compiles this process may still make."""
    return max(compile_budget() - _compiles, 0)


@contextlib.contextmanager
def no_fallback() -> Iterator[None]:
    """Inside it, a program the direct path cannot load raises :class:`DirectError`
    instead of falling back to Core ML: for callers that report what ran under the
    direct path's name (a bench column, a probe, an encoder, a lane)."""
    token = _refuse_fallback.set(True)
    try:
        yield
    finally:
        _refuse_fallback.reset(token)


def objc_class(name: str, objc: Any) -> Any:
    """The Objective-C class ``name``, or None where this macOS lacks it."""
    try:
        return objc.lookUpClass(name)
    except objc.nosuchclass_error:
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

    def attributes(self, model: Any) -> Any:
        """The loaded model's ``modelAttributes`` (read from the inner ``_ANEModel``: the
        in-memory wrapper can raise for it, per Epistates/pmetal), or None."""
        try:
            return model.model().modelAttributes()
        except Exception:  # an unknown selector is an objc.error; nothing to read then
            return None

    def enable_stats(self, model: Any) -> None:
        """Ask for performance statistics (mask 0xF: bits beyond it give 0 on M3 Max, per
        christopherkarani/Espresso); set after the load, which clears it (tmc/apple)."""
        with contextlib.suppress(Exception):  # best effort: the hardware time is extra
            model.setPerfStatsMask_(0xF)
        with contextlib.suppress(Exception):
            model.model().setPerfStatsMask_(0xF)

    def request(
        self,
        inputs: list[Any],
        input_indices: list[int],
        outputs: list[Any],
        output_indices: list[int],
        procedure: int,
    ) -> Any:
        """The request of one procedure, with a statistics object where the framework
        makes one (macOS 27's ``validate`` counts ``perfStats``: it is an array)."""
        make = getattr(self.Request, _REQUEST)
        try:
            stats = objc_class("_ANEPerformanceStats", self.objc)
            statistics = [stats.statsWithHardwareExecutionNS_(0)] if stats is not None else None
            return make(inputs, input_indices, outputs, output_indices, None, statistics, procedure)
        except Exception:  # no statistics on this macOS: the request without them
            return make(inputs, input_indices, outputs, output_indices, None, None, procedure)

    def hardware_ns(self, request: Any) -> int | None:
        """The last evaluation's ``hwExecutionTime`` (ns), or None where not reported."""
        with contextlib.suppress(Exception):
            listed = request.perfStatsArray() or [request.perfStats()]
            value = int(listed[0].hwExecutionTime())
            return value if value > 0 else None
        return None


class DirectModel:
    """A MIL program compiled and loaded by the private framework, each of its functions
    a procedure (in program order); fp16 in, fp16 out. One compile serves every
    function, so a model's buckets cost one of the process's :data:`COMPILE_BUDGET`."""

    def __init__(
        self,
        program: Program,
        runtime: Any,
        form: str = "1.3",
        functions: Sequence[str] | None = None,
    ) -> None:
        global _compiles
        from anekit.package.mil_text import to_mil_text

        if form not in FORMS:
            raise ValueError(f"MIL text form must be one of {', '.join(FORMS)}, got {form!r}")
        names = list(program.functions) if functions is None else list(functions)
        # the text refuses, by name, what it cannot express (dynamic shapes among them)
        written = to_mil_text(program, form=form, functions=names)  # type: ignore[arg-type]
        declared = [_declared(name, program.functions[name]) for name in names]
        if _compiles >= compile_budget():
            raise DirectError(
                f"this process has made {_compiles} ANE compiles, the framework's budget; "
                "run further programs in a fresh process"
            )
        self.runtime, self.form = runtime, form
        self.model = runtime.model(written.text, written.weights, written.weight_path)
        _compiles += 1
        runtime.call("compile", self.model.compileWithQoS_options_error_, QOS, {})
        runtime.call("load", self.model.loadWithQoS_options_error_, QOS, {})
        runtime.enable_stats(self.model)
        self.procedures = {
            found.name: found for found in procedures(declared, runtime.attributes(self.model))
        }
        self._prepared: dict[str, tuple[list[Any], list[Any], Any]] = {}

    def _buffers(self, procedure: Procedure) -> tuple[list[Any], list[Any], Any]:
        """The procedure's input and output surfaces and its request, made once."""
        if procedure.name not in self._prepared:
            inputs = [self.runtime.surface(layout.size) for layout in procedure.inputs]
            outputs = [self.runtime.surface(layout.size) for layout in procedure.outputs]
            request = self.runtime.request(
                [wrapped for _, wrapped in inputs],
                list(procedure.input_symbols),
                [wrapped for _, wrapped in outputs],
                list(procedure.output_symbols),
                procedure.index,
            )
            self._prepared[procedure.name] = (inputs, outputs, request)
        return self._prepared[procedure.name]

    def predict(
        self, feeds: Mapping[str, np.ndarray], function: str
    ) -> tuple[dict[str, np.ndarray], float | None]:
        """Run ``function``'s procedure on ``feeds`` (by input name): its outputs by
        name, and the ANE's own execution time in seconds where the framework reports it
        (else None)."""
        procedure = self.procedures[function]
        inputs, outputs, request = self._buffers(procedure)
        for layout, (pointer, _) in zip(procedure.inputs, inputs, strict=True):
            if layout.name not in feeds:
                raise ValueError(f"{function}: no value for input {layout.name!r}")
            self.runtime.write(pointer, layout.pack(feeds[layout.name]))
        self.runtime.call(
            "evaluate", self.model.evaluateWithQoS_options_request_error_, QOS, {}, request
        )
        results = {
            layout.name: layout.unpack(self.runtime.read(pointer, layout.size))
            for layout, (pointer, _) in zip(procedure.outputs, outputs, strict=True)
        }
        nanoseconds = self.runtime.hardware_ns(request)
        return results, None if nanoseconds is None else nanoseconds / 1e9

    def close(self) -> None:
        """Unload the model from the ANE."""
        self.runtime.call("unload", self.model.unloadWithQoS_error_, QOS)


class DirectSession:
    """One function of a program on the direct path, as a package holds it (the
    request's :attr:`~anekit.backends.LoadRequest.lowered`): the session
    ``program(x, backend="direct")`` runs (a model of one procedure)."""

    def __init__(self, request: LoadRequest, runtime: Any, form: str = "1.3") -> None:
        lowered = request.lowered()
        (self.function,) = lowered.functions  # one function: procedure 0
        self.model = DirectModel(lowered, runtime, form)
        self.last_run: RunReport | None = None

    def predict(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        start = time.perf_counter()
        outputs, hardware = self.model.predict(feeds, self.function)
        self.last_run = RunReport(
            backend="direct",
            device="ANE (direct, private API; experimental)",
            simulated=False,
            seconds=time.perf_counter() - start,
            requested=f"MIL text {self.model.form}",
            hardware_seconds=hardware,
        )
        return outputs

    def close(self) -> None:
        """Unload the model from the ANE."""
        self.model.close()


def _declared(name: str, function: Any) -> tuple[str, list[Tensor], list[Tensor]]:
    """A MIL function's inputs and outputs as (name, shape), refused unless all fp16."""
    from coremltools.converters.mil.mil import types

    tensors = [
        *((str(key), var) for key, var in function.inputs.items()),
        *((str(var.name), var) for var in function.outputs),
    ]
    wide = [(key, types.builtin_to_string(var.dtype)) for key, var in tensors]
    wide = [(key, kind) for key, kind in wide if kind != "fp16"]
    if wide:
        listed = ", ".join(f"{key} ({kind})" for key, kind in wide)
        raise DirectError(f"the direct path takes fp16 inputs and outputs only: {name}: {listed}")
    shapes = [(key, tuple(int(size) for size in var.shape)) for key, var in tensors]
    count = len(function.inputs)
    return name, shapes[:count], shapes[count:]


class DirectBackend:
    """The private framework directly (``backend="direct"``): experimental, never chosen
    automatically; falls back to Core ML, with a warning naming why, when it cannot load."""

    name = "direct"

    def __init__(self, runtime: Any = None) -> None:
        self._runtime = runtime

    def load(self, request: LoadRequest, mode: str | None = None) -> Any:
        """``request``'s program on the ANE through the private framework (``mode``: the
        MIL text form, ``1.3`` by default); on a refusal, on Core ML instead."""
        try:
            if self._runtime is None:
                self._runtime = PrivateANE()
            return DirectSession(request, self._runtime, mode or "1.3")
        except REFUSALS as error:
            from anekit.backends.coreml import CoreMLBackend

            if _refuse_fallback.get():
                if isinstance(error, DirectError):
                    raise
                raise DirectError(f"the ANE framework could not be used: {error}") from error
            warnings.warn(
                f"the direct ANE path could not run this program ({error}); running it on "
                "Core ML instead",
                RuntimeWarning,
                stacklevel=2,
            )
            return CoreMLBackend().load(request)
