"""Contract-enforcing stand-ins for Core AI on macOS 27, where this machine cannot run
it: the device choice at load ("specialization"), the OS framework's loader, and
coreai-torch's compute plan. The rule of tests/standins.py holds here: each refuses what
the real API refuses, as its source states it, and behaves as the real one does where
that is the point. tests/backends/test_coreai_os.py shows each refusing what the real
one refuses, checked against the real messages where the real code runs here (Linux).

Sources (the versions this project pins):

- coreai-core 1.0.0b3, ``coreai/runtime/_specialization_options.py``:
  ``SpecializationOptions.__init__`` raises TypeError ("Use
  `SpecializationOptions.from_preferred_compute_unit_kind(compute_kind)` ..."); the
  class methods ``from_preferred_compute_unit_kind(compute_unit_kind)``,
  ``cpu_only()``, ``default()``, the keyword-only ``with_debug(*, enabled)`` and the
  properties each call ``_check_macos_availability``, which raises RuntimeError
  "<feature> is only available on macOS. Current platform: <system>" off macOS;
  ``is_supported()`` never raises and is ``_IS_MACOS and _use_os_coreai``.
- coreai-core 1.0.0b3, ``coreai/runtime/__init__.py``: ``_use_os_framework_backing``
  (the OS framework from macOS 27 on, for a wheel install; ``USE_LOCAL_COREAI``
  overrides); ``ComputeUnitKind`` and ``_SpecializationOptions`` are imported only on
  macOS; ``coreai/runtime/__init__.pyi``: ``ComputeUnitKind.cpu()``, ``gpu()``,
  ``neural_engine()``, ``available_kinds()``, no constructor. The native bindings
  (SwiftPython) refuse an argument of the wrong type with a TypeError ("init() can't
  convert argument 'backing' (position 1) to String", seen here from ``_NDArray``).
- coreai-core 1.0.0b3, ``coreai/authoring/asset.py``, ``AIModelAsset.executable(
  specialization_options=None)``: an async context manager; options off macOS raise
  RuntimeError "specialization_options is only available on macOS, but current
  platform is '<sys.platform>'" on entry; on macOS with the OS framework it is
  ``AIModel.load(path=self.path, specialization_options=...)``
  (``coreai/runtime/_aimodel.py``), which reads ``specialization_options._options``.
  The stand-in then runs the asset on Core AI's bundled CPU runtime (the real one),
  so outputs and function names are real.
- coreai-torch 0.4.3, ``coreai_torch/debugging/compute_plan.py``: ``ComputePlan.
  from_program(program: AIProgram, specialization_options=None)`` (async, a class
  method) calls ``_with_debug`` (``coreai_torch/debugging/utils.py``:
  ``SpecializationOptions.default()`` when None, then ``.with_debug(enabled=True)``),
  then ``program.save_asset(Path)`` and ``AIModel.load``; ``to_dict(program=None, *,
  module=None)`` returns ``entries`` (``operation_id``, ``devices``, ``residency``,
  ``validation``), ``entry_count``, ``device_histogram`` and, given the program,
  ``operation_names`` and ``operations_without_entry``. Op ids are read from each
  operation's debug location (``debug_info.get_operation_id``), walking the program's
  module (``utils._walk_operations``), as the stand-in does too.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import platform
import sys
import tempfile
import types
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

#: ``ComputeUnitKind``'s constructors (coreai/runtime/__init__.pyi).
KINDS = ("cpu", "gpu", "neural_engine")
#: ``ComputeDevice`` values (coreai_torch/debugging/compute_plan.py) per preferred kind.
PLACED = {"neural_engine": "NEURAL_ENGINE", "gpu": "GPU", "cpu": "CPU"}
#: Operations the stand-in plan holds no entry for: structure, constants (Residency.
#: NO_ENTRY: "usual for constants, layout operations and anything fused") and the
#: graph's terminator.
NO_ENTRY = ("builtin.module", "coreai.graph", "coreai.constant", "coreai.output")


def _check_macos_availability(feature_name: str) -> None:
    """coreai/runtime/_specialization_options.py, ``_check_macos_availability``."""
    if platform.system() != "Darwin":
        raise RuntimeError(
            f"{feature_name} is only available on macOS. Current platform: {platform.system()}"
        )


class ComputeUnitKind:
    """coreai.runtime.ComputeUnitKind (macOS only; native: no constructor)."""

    name: str

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("ComputeUnitKind has no constructor: use cpu(), gpu() or neural_engine()")

    @classmethod
    def _make(cls, name: str) -> ComputeUnitKind:
        kind = object.__new__(cls)
        kind.name = name
        return kind

    @classmethod
    def cpu(cls) -> ComputeUnitKind:
        return cls._make("cpu")

    @classmethod
    def gpu(cls) -> ComputeUnitKind:
        return cls._make("gpu")

    @classmethod
    def neural_engine(cls) -> ComputeUnitKind:
        return cls._make("neural_engine")

    @classmethod
    def available_kinds(cls) -> list[ComputeUnitKind]:
        return [cls._make(name) for name in KINDS]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ComputeUnitKind) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"ComputeUnitKind.{self.name}()"


@dataclass(frozen=True)
class _NativeOptions:
    """``_SpecializationOptions``: the preferred kind (None: default), allowed kinds, debug."""

    preferred: ComputeUnitKind | None
    allowed: tuple[ComputeUnitKind, ...]
    debug: bool = False


def _native_options(preferred_compute_unit_kind: Any) -> _NativeOptions:
    """``_SpecializationOptions(preferred_compute_unit_kind=...)``: a native init that
    refuses anything but a ComputeUnitKind."""
    if not isinstance(preferred_compute_unit_kind, ComputeUnitKind):
        raise TypeError(
            "init() can't convert argument 'preferred_compute_unit_kind' (position 1) "
            "to ComputeUnitKind"
        )
    return _NativeOptions(preferred_compute_unit_kind, tuple(ComputeUnitKind.available_kinds()))


class SpecializationOptions:
    """coreai.runtime.SpecializationOptions (coreai/runtime/_specialization_options.py),
    its native options replaced; ``supported`` is what ``is_supported()`` answers
    (set by :class:`CoreAIOnMac`)."""

    supported = False
    _options: _NativeOptions

    def __init__(self) -> None:
        raise TypeError(
            "Use `SpecializationOptions.from_preferred_compute_unit_kind("
            "compute_kind)` to construct a SpecializationOptions instance."
        )

    @staticmethod
    def is_supported() -> bool:
        return platform.system() == "Darwin" and SpecializationOptions.supported

    @classmethod
    def _wrap(cls, options: _NativeOptions) -> SpecializationOptions:
        instance = object.__new__(cls)
        instance._options = options
        return instance

    @classmethod
    def cpu_only(cls) -> SpecializationOptions:
        _check_macos_availability("SpecializationOptions.cpu_only()")
        return cls._wrap(_NativeOptions(ComputeUnitKind.cpu(), (ComputeUnitKind.cpu(),)))

    @classmethod
    def default(cls) -> SpecializationOptions:
        _check_macos_availability("SpecializationOptions.default()")
        return cls._wrap(_NativeOptions(None, tuple(ComputeUnitKind.available_kinds())))

    @classmethod
    def from_preferred_compute_unit_kind(cls, compute_unit_kind: Any) -> SpecializationOptions:
        _check_macos_availability("SpecializationOptions.from_preferred_compute_unit_kind()")
        return cls._wrap(_native_options(preferred_compute_unit_kind=compute_unit_kind))

    def with_debug(self, *, enabled: bool) -> SpecializationOptions:
        _check_macos_availability("SpecializationOptions.with_debug()")
        options = self._options
        return type(self)._wrap(_NativeOptions(options.preferred, options.allowed, enabled))

    @property
    def preferred_compute_unit_kind(self) -> ComputeUnitKind | None:
        _check_macos_availability("SpecializationOptions.preferred_compute_unit_kind")
        return self._options.preferred

    @property
    def allowed_compute_unit_kinds(self) -> list[ComputeUnitKind]:
        _check_macos_availability("SpecializationOptions.allowed_compute_unit_kinds")
        return list(self._options.allowed)

    @property
    def is_debug_enabled(self) -> bool:
        _check_macos_availability("SpecializationOptions.is_debug_enabled")
        return self._options.debug


def _options_of(specialization_options: Any) -> _NativeOptions:
    """``AIModel.load`` reads ``specialization_options._options`` and hands it to the
    native ``load_with_specialization(options=...)``."""
    options = specialization_options._options  # AttributeError for anything else
    if not isinstance(options, _NativeOptions):
        raise TypeError(
            "load_with_specialization() can't convert argument 'options' (position 2) "
            "to _SpecializationOptions"
        )
    return options


@dataclass
class CoreAIOnMac:
    """Core AI as coreai-core 1.0.0b3 reaches it on a Mac running ``macos``: the platform,
    ``SpecializationOptions``/``ComputeUnitKind`` and ``AIModelAsset.executable`` on the
    OS framework path (``os_framework``: ``_use_os_coreai``, True from macOS 27 for a
    wheel install). Each load is recorded as (asset path, the options' native record or
    None); the asset then runs on Core AI's real bundled CPU runtime."""

    macos: str = "27.0"
    os_framework: bool = True
    loads: list[tuple[Path, _NativeOptions | None]] = field(default_factory=list)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> CoreAIOnMac:
        import coreai.runtime
        from coreai.authoring import AIModelAsset

        major = int(self.macos.split(".")[0])
        monkeypatch.setattr(platform, "system", lambda: "Darwin")
        monkeypatch.setattr(platform, "mac_ver", lambda *args: (self.macos, ("", "", ""), "arm64"))
        monkeypatch.setattr(SpecializationOptions, "supported", self.os_framework and major >= 27)
        monkeypatch.setattr(coreai.runtime, "SpecializationOptions", SpecializationOptions)
        monkeypatch.setattr(coreai.runtime, "ComputeUnitKind", ComputeUnitKind, raising=False)
        real = AIModelAsset.executable
        mac = self

        @contextlib.asynccontextmanager
        async def executable(asset: Any, specialization_options: Any = None) -> AsyncIterator[Any]:
            if specialization_options is not None and platform.system() != "Darwin":
                raise RuntimeError(
                    "specialization_options is only available on macOS, "
                    f"but current platform is '{sys.platform}'"
                )
            options = None
            if specialization_options is not None:
                options = _options_of(specialization_options)
                if not SpecializationOptions.is_supported():
                    # the bundled runtime's path: the options would be dropped, not obeyed
                    raise AssertionError("options passed where Core AI cannot specialize")
            mac.loads.append((Path(asset.path), options))
            async with real(asset) as model:  # Apple's CPU runtime runs it
                yield model

        monkeypatch.setattr(AIModelAsset, "executable", executable)
        return self

    @property
    def preferred(self) -> list[str | None]:
        """The preferred kind of each load, in order (None: no options)."""
        return [
            None if options is None or options.preferred is None else options.preferred.name
            for _, options in self.loads
        ]


def _walk(program: Any) -> list[Any]:
    """Every operation of an AIProgram, parents first (coreai_torch/debugging/utils.py,
    ``_walk_operations``)."""

    def walk(operation: Any) -> Any:
        resolved = getattr(operation, "operation", operation)
        yield resolved
        for region in resolved.regions:
            for block in region.blocks:
                for child in block.operations:
                    yield from walk(child)

    return list(walk(program._module._mlir_module.operation))


def _operation_id(operation: Any) -> int | None:
    """coreai_torch/debugging/debug_info.py, ``get_operation_id``."""
    import coreai._compiler._mlir_libs._coreaiIR._bindings.mlir as mlir

    found = getattr(mlir, "get_operation_id")(operation.location, "coreai")  # noqa: B009
    return None if found is None else getattr(found, "value", None)


@dataclass
class CoreAIComputePlan:
    """coreai-torch 0.4.3's ``ComputePlan`` (``coreai_torch.debugging.compute_plan``)
    with the loaded model's debug records replaced: each operation of the program (but
    :data:`NO_ENTRY`) is placed on the preferred kind's device, or where
    ``place(op_name, preferred)`` says: a ``ComputeDevice`` value, or (value, the Neural
    Engine's validation message). Installed as an importable ``coreai_torch``."""

    place: Callable[[str, str | None], str | tuple[str, str] | None] | None = None
    #: (asset saved, preferred kind, debug on) per plan built.
    built: list[tuple[Path, str | None, bool]] = field(default_factory=list)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> CoreAIComputePlan:
        module = types.ModuleType("coreai_torch.debugging.compute_plan")
        module.ComputePlan = self._plan_class()  # type: ignore[attr-defined]
        for name, value in (
            ("coreai_torch", types.ModuleType("coreai_torch")),
            ("coreai_torch.debugging", types.ModuleType("coreai_torch.debugging")),
            ("coreai_torch.debugging.compute_plan", module),
        ):
            value.__spec__ = importlib.machinery.ModuleSpec(name, None)
            monkeypatch.setitem(sys.modules, name, value)
        return self

    def _device(self, name: str, preferred: str | None) -> tuple[str, str | None]:
        default = PLACED.get(preferred or "neural_engine", "UNKNOWN")
        chosen = self.place(name, preferred) if self.place is not None else None
        if chosen is None:
            return default, None
        return chosen if isinstance(chosen, tuple) else (chosen, None)

    def _plan_class(self) -> type:
        stand_in = self

        class ComputePlan:
            def __init__(self, entries: dict[int, tuple[str, str | None]]) -> None:
                self._entries = entries

            @classmethod
            async def from_program(
                cls, program: Any, specialization_options: Any = None
            ) -> ComputePlan:
                from coreai.runtime import SpecializationOptions as Options

                if specialization_options is None:
                    specialization_options = Options.default()
                options = specialization_options.with_debug(enabled=True)
                native = _options_of(options)
                with tempfile.TemporaryDirectory() as folder:
                    asset = program.save_asset(Path(folder) / "model.aimodel")
                    preferred = None if native.preferred is None else native.preferred.name
                    stand_in.built.append((Path(asset.path), preferred, native.debug))
                entries = {}
                for operation in _walk(program):
                    op_id = _operation_id(operation)
                    if op_id is not None and operation.name not in NO_ENTRY:
                        entries[op_id] = stand_in._device(operation.name, preferred)
                return cls(entries)

            def to_dict(self, program: Any = None, *, module: Any = None) -> dict[str, Any]:
                entries: list[dict[str, Any]] = [
                    {
                        "operation_id": op_id,
                        "devices": [device],
                        "residency": "NO DEVICE" if device == "UNKNOWN" else "PLACED",
                        "validation": [] if message is None else [message],
                    }
                    for op_id, (device, message) in sorted(self._entries.items())
                ]
                histogram = Counter(device for entry in entries for device in entry["devices"])
                data: dict[str, Any] = {
                    "entries": entries,
                    "entry_count": len(entries),
                    "device_histogram": dict(sorted(histogram.items())),
                }
                if program is None:
                    return data
                names = {
                    op_id: operation.name
                    for operation in _walk(program)
                    if (op_id := _operation_id(operation)) is not None
                }
                data["operation_names"] = names
                data["operations_without_entry"] = sorted(set(names) - set(self._entries))
                return data

        return ComputePlan


__all__ = [
    "KINDS",
    "NO_ENTRY",
    "PLACED",
    "ComputeUnitKind",
    "CoreAIComputePlan",
    "CoreAIOnMac",
    "SpecializationOptions",
]
