"""The runtime record: one entry per way anekit runs a model, read by everything that
picks one.

A *runtime* is what executes: Core ML, anekit's ANE simulator, ONNX Runtime, the
private ANE framework, NumPy. Each :class:`Runtime` says, once:

- its name and what runs it (:attr:`Runtime.device`, the label users see);
- whether it can run on this machine, and why not (:meth:`Runtime.unavailable_reason`:
  the one check, used by :func:`anekit.backends.select_backend`, :class:`anekit.Embedder`
  and the lanes alike);
- how to run a compiled program on it (:attr:`Runtime.backend`, a
  :class:`~anekit.backends.Backend`; NumPy runs no programs);
- how to open an encoder of a model variant on it (:attr:`Runtime.encoder`; the
  options it takes are :class:`~anekit.models.encoders.EncoderOptions`);
- what a lane of it needs (:attr:`Runtime.lane_engine`: the engine class a lane worker
  wraps it in, when not the plain one).

The classes live where their code does and are named here as ``"module:attribute"``,
imported on first use: this module sits below every layer that reads it, and naming a
runtime costs no import of its engine (coremltools, onnxruntime, PyObjC). Adding a
runtime is one :class:`Runtime` here plus its engine code.
"""

from __future__ import annotations

import importlib
import importlib.util
import platform
from dataclasses import dataclass
from typing import Any

from anekit.errors import BackendUnavailableError, ModelError


def attribute(reference: str) -> Any:
    """The object ``"package.module:name"`` names, its module imported now."""
    module_name, _, name = reference.partition(":")
    return getattr(importlib.import_module(module_name), name)


@dataclass(frozen=True)
class Runtime:
    """One way to run a model: see the module's docstring for each field."""

    name: str
    #: What runs it, as users read it (an encoder's runtime may say more once loaded:
    #: ONNX Runtime names the provider each session uses).
    device: str
    #: One line for listings: what it is, where it runs.
    description: str
    #: ``"module:function"`` returning why it cannot run here (None: it can), called
    #: with the runtime's options as keywords (``device="cuda"`` for ONNX Runtime);
    #: None: it runs everywhere anekit installs.
    check: str | None
    #: ``"module:Class"`` of the :class:`~anekit.backends.Backend` running compiled
    #: programs, or None where it runs none.
    backend: str | None
    #: ``"module:function"`` opening an encoder: ``(LoadedModel, EncoderOptions) ->
    #: ModelEncoder``; None: it runs no embedding model yet.
    encoder: str | None
    #: The encoder's weight variants, default first.
    variants: tuple[str, ...]
    #: Never picked unless named (a private API).
    by_name_only: bool = False
    #: ``"module:Class"`` of the engine a lane worker runs it in, where it needs more
    #: than the plain encoder engine (ONNX Runtime pins and checks its device).
    lane_engine: str | None = None
    #: The runtime that runs a program this one's backend cannot take (it raises
    #: :class:`~anekit.backends.ProgramRefused`), when this one was picked by default
    #: rather than named (:func:`anekit.backends.select_backend`): Core AI hands
    #: programs with ops it has no lowering for to Core ML.
    fallback: str | None = None

    def unavailable_reason(self, **options: Any) -> str | None:
        """Why this runtime cannot run here with ``options``, or None when it can."""
        if self.check is None:
            return None
        reason: str | None = attribute(self.check)(**options)
        return reason

    def available(self, **options: Any) -> bool:
        return self.unavailable_reason(**options) is None

    def require(self, **options: Any) -> None:
        """:class:`~anekit.errors.BackendUnavailableError` naming why, unless it can run."""
        if (reason := self.unavailable_reason(**options)) is not None:
            here = [item.name for item in RUNTIMES.values() if item.available()]
            raise BackendUnavailableError(
                f"the {self.name} runtime cannot run here: {reason}; "
                f"runtimes that run here: {', '.join(here) or 'none'}"
            )


def core_ml_reason(**_: Any) -> str | None:
    """Why Core ML cannot run here, or None (it imports coremltools only on macOS)."""
    from anekit._runtime import core_ml_runtime_available

    if platform.system() != "Darwin":
        return "Core ML exists only on macOS"
    if not core_ml_runtime_available():
        return "coremltools could not load its Core ML bindings (libcoremlpython)"
    return None


def onnx_runtime_reason(device: str = "auto", **_: Any) -> str | None:
    """Why ONNX Runtime cannot run here on ``device`` (``cuda``: its CUDA provider must
    be there), or None; onnxruntime is imported only to ask for CUDA."""
    if importlib.util.find_spec("onnxruntime") is None:
        return "onnxruntime is not installed"
    if device == "cuda":
        try:
            import onnxruntime
        except ImportError as error:
            return f"onnxruntime is installed but does not import: {error}"
        if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
            return "needs onnxruntime-gpu with a CUDA GPU"
    return None


#: How to install Core AI's package, the extra ``anekit[coreai]``.
COREAI_EXTRA = "pip install 'anekit[coreai]'"


def coreai_reason(**_: Any) -> str | None:
    """Why Core AI's runtime cannot run here: its package, the extra ``anekit[coreai]``,
    is not installed."""
    if importlib.util.find_spec("coreai") is None:
        return f"needs the coreai extra: {COREAI_EXTRA}"
    return None


#: The first macOS with the Core AI framework: coreai-core 1.0.0b3 uses the OS's Core AI
#: from macOS 27 on (``coreai/runtime/__init__.py``, ``_use_os_framework_backing``:
#: ``coreai_os_min_macos_version = 27``) and its bundled CPU runtime before it.
COREAI_MACOS = 27


def macos_major() -> int | None:
    """This Mac's major macOS version (``27``), None off macOS or when unreadable."""
    if platform.system() != "Darwin":
        return None
    release = platform.mac_ver()[0]
    try:
        return int(release.split(".")[0])
    except ValueError:
        return None


def coreai_ane_reason(**_: Any) -> str | None:
    """Why Core AI cannot run programs on the Neural Engine here, or None.

    Device placement is Core AI's "specialization", chosen at load, and coreai-core
    1.0.0b3 offers it only on macOS with the OS framework:
    ``SpecializationOptions.from_preferred_compute_unit_kind`` (and ``default``,
    ``cpu_only``) raise "... is only available on macOS" elsewhere
    (``coreai/runtime/_specialization_options.py``, ``_check_macos_availability``),
    ``ComputeUnitKind`` exists only on macOS (``coreai/runtime/__init__.py``), and
    ``SpecializationOptions.is_supported()`` (which never raises) is True only on macOS
    with the OS's Core AI (``_use_os_coreai``: macOS 27 or later and a wheel install).
    The platform is read before anything is imported; coreai only on macOS 27."""
    if platform.system() != "Darwin":
        return (
            f"Core AI on the Neural Engine needs macOS {COREAI_MACOS} (this is {platform.system()})"
        )
    major = macos_major()
    if major is None or major < COREAI_MACOS:
        return (
            f"Core AI is part of macOS {COREAI_MACOS} and later "
            f"(this Mac runs macOS {platform.mac_ver()[0] or 'of an unknown version'})"
        )
    if importlib.util.find_spec("coreai") is None:
        return f"needs the coreai extra: {COREAI_EXTRA}"
    try:
        from coreai.runtime import SpecializationOptions
    except Exception as error:  # the native runtime failed to load
        return f"coreai is installed but its runtime does not import: {error}"
    if not SpecializationOptions.is_supported():
        return (
            "coreai runs its bundled CPU runtime here, not macOS's Core AI framework "
            "(USE_LOCAL_COREAI is set, or coreai-core was not installed from a wheel)"
        )
    return None


def direct_reason(**_: Any) -> str | None:
    """Why the private ANE framework cannot run here (:mod:`anekit.backends.direct`'s
    check, which knows the framework), or None."""
    reason: str | None = attribute("anekit.backends.direct:unavailable_reason")()
    return reason


RUNTIMES: dict[str, Runtime] = {
    runtime.name: runtime
    for runtime in (
        Runtime(
            "coreai",
            "ANE (Core AI)",
            "Core AI on the Neural Engine where it places ops (macOS 27; unverified on hardware)",
            check="anekit.runtimes:coreai_ane_reason",
            backend="anekit.backends.coreai_os:CoreAIBackend",
            encoder="anekit.models.encoders:open_coreai",
            variants=("fp16", "int8"),
            fallback="coreml",
        ),
        Runtime(
            "coreml",
            "ANE (Core ML)",
            "Core ML on the Neural Engine where it places ops (macOS)",
            check="anekit.runtimes:core_ml_reason",
            backend="anekit.backends.coreml:CoreMLBackend",
            encoder="anekit.models.coreml_encoder:open_coreml",
            variants=("fp16", "int8"),
        ),
        Runtime(
            "sim",
            "ANE simulator (fp16 numerics; not an ANE)",
            "anekit's ANE simulator: the fp16 numerics on any OS (a check, not a speed path)",
            check=None,
            backend="anekit.backends.sim:SimBackend",
            encoder="anekit.models.encoders:open_sim",
            variants=("fp16", "int8"),
        ),
        Runtime(
            "onnx",
            "CPU or GPU (ONNX Runtime)",
            "ONNX Runtime on the CPU, or CUDA where onnxruntime-gpu has it",
            check="anekit.runtimes:onnx_runtime_reason",
            backend="anekit.backends.onnx:OnnxBackend",
            encoder="anekit.models.encoders:open_onnx",
            variants=("int8", "fp32"),
            lane_engine="anekit.lanes.engines:OnnxEngine",
        ),
        Runtime(
            "direct",
            "ANE (direct, private API; experimental)",
            "the private ANE framework without Core ML (macOS; experimental)",
            check="anekit.runtimes:direct_reason",
            backend="anekit.backends.direct:DirectBackend",
            encoder="anekit.models.encoders:open_direct",
            variants=("fp16", "int8"),
            by_name_only=True,
        ),
        Runtime(
            "coreai-cpu",
            "CPU (Core AI reference runtime; not an ANE)",
            "Apple's Core AI runtime on the CPU: the program as an .aimodel (docs/coreai.md)",
            check="anekit.runtimes:coreai_reason",
            backend="anekit.backends.coreai:CoreAICpuBackend",
            encoder="anekit.models.encoders:open_coreai_cpu",
            variants=("fp16", "int8"),
            by_name_only=True,
        ),
        Runtime(
            "numpy",
            "CPU (NumPy fp32)",
            "the fp32 reference, evaluated with NumPy on any OS",
            check=None,
            backend=None,
            encoder="anekit.models.encoders:open_reference",
            variants=("fp32",),
        ),
    )
}


def runtime(name: str) -> Runtime:
    """The runtime called ``name`` (:class:`~anekit.errors.ModelError` naming the known
    ones when there is none)."""
    if name not in RUNTIMES:
        raise ModelError(f"runtime must be one of {', '.join(RUNTIMES)}, got {name!r}")
    return RUNTIMES[name]


def program_runtimes() -> list[Runtime]:
    """The runtimes that run compiled programs, most preferred first."""
    return [item for item in RUNTIMES.values() if item.backend is not None]


def default_runtime() -> str:
    """The runtime an :class:`~anekit.Embedder` picks: Core AI on macOS 27, Core ML on an
    older Mac, else NumPy."""
    for name in ("coreai", "coreml"):
        if RUNTIMES[name].available():
            return name
    return "numpy"


__all__ = [
    "COREAI_EXTRA",
    "COREAI_MACOS",
    "RUNTIMES",
    "Runtime",
    "attribute",
    "core_ml_reason",
    "coreai_ane_reason",
    "coreai_reason",
    "default_runtime",
    "direct_reason",
    "macos_major",
    "onnx_runtime_reason",
    "program_runtimes",
    "runtime",
]
