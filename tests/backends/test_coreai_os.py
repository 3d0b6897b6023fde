"""Core AI on the Neural Engine (macOS 27; the ``coreai`` runtime and its backend):
unverified on hardware here. On Linux the real coreai-core refuses to specialize, and
the reasons anekit gives are checked against it; on a simulated macOS 27 the stand-ins
of tests/standins_coreai.py (which refuse what the real API refuses, checked here too)
stand in for the OS framework, while the programs run on Core AI's real bundled CPU
runtime. The compute plan and ``anekit doctor``: tests/analysis/test_coreai_plan.py."""

from __future__ import annotations

import asyncio
import inspect
import platform
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import anekit
import anekit.nn as nn
from anekit import runtimes, sim
from anekit.backends import FallingBack, available_backends, select_backend
from anekit.backends.coreml import CoreMLBackend
from anekit.errors import BackendUnavailableError, ProgramError
from anekit.runtimes import COREAI_EXTRA, RUNTIMES

coreai = pytest.importorskip("coreai.authoring", reason="the coreai extra")

from anekit.backends import coreai_os  # noqa: E402
from anekit.package.coreai import LoadedFunction, save_coreai  # noqa: E402
from standins import CoreMLTools, simulated_device  # noqa: E402
from standins_coreai import (  # noqa: E402
    ComputeUnitKind,
    CoreAIOnMac,
    SpecializationOptions,
)

F32 = np.float32
RNG = np.random.default_rng(36)
W = (RNG.standard_normal((32, 48)) * 0.1).astype(F32)
X = RNG.standard_normal((4, 32)).astype(F32)
LINUX = platform.system() == "Linux"
ON_LINUX = pytest.mark.skipif(not LINUX, reason="the real coreai-core's Linux behaviour")


def _ffn(x: Any) -> Any:
    return nn.gelu(x @ W)


def _floored(x: Any) -> Any:
    """floor has no Core AI lowering: a program Core AI refuses."""
    return np.floor(x @ W)


@pytest.fixture
def ffn() -> anekit.CompiledProgram:
    return anekit.compile(_ffn, X)


@pytest.fixture
def floored() -> anekit.CompiledProgram:
    return anekit.compile(_floored, X)


@pytest.fixture
def asset(ffn: anekit.CompiledProgram, tmp_path: Path) -> Path:
    return save_coreai(ffn.program, tmp_path / "ffn.aimodel", ["main"])


@pytest.fixture
def mac27(monkeypatch: pytest.MonkeyPatch) -> CoreAIOnMac:
    """macOS 27 with the OS's Core AI (a wheel install)."""
    return CoreAIOnMac().install(monkeypatch)


def _fp32(program: anekit.CompiledProgram) -> Any:
    """The simulator's fp32 result of ``program`` on X, as a call returns it."""
    feeds = program.package_feeds({str(program.input_specs[0].name): X})
    return program.results_of(sim.run(program.program, feeds, mode="fp32").outputs)


# -- on Linux, the real coreai-core refuses to specialize: anekit's reason is right -------


@ON_LINUX
def test_off_macos_the_real_core_ai_refuses_every_device_choice() -> None:
    from coreai.runtime import SpecializationOptions as Real

    assert Real.is_supported() is False  # never raises
    makers: list[Any] = [
        lambda: Real.from_preferred_compute_unit_kind(None),  # type: ignore[arg-type]
        Real.default,
        Real.cpu_only,
    ]
    for make in makers:
        with pytest.raises(
            RuntimeError, match=r"only available on macOS\. Current platform: Linux"
        ):
            make()
    with pytest.raises(TypeError, match="from_preferred_compute_unit_kind"):
        Real()
    import coreai.runtime

    assert not hasattr(coreai.runtime, "ComputeUnitKind")  # macOS only
    reason = RUNTIMES["coreai"].unavailable_reason()
    assert reason == "Core AI on the Neural Engine needs macOS 27 (this is Linux)"
    with pytest.raises(BackendUnavailableError, match="needs macOS 27"):
        coreai_os.specialization()


@ON_LINUX
def test_off_macos_a_program_on_coreai_is_refused_in_one_line(ffn: anekit.CompiledProgram) -> None:
    with pytest.raises(BackendUnavailableError) as refused:
        ffn(X, backend="coreai")
    assert str(refused.value) == (
        "backend 'coreai' cannot run here: Core AI on the Neural Engine needs macOS 27 "
        "(this is Linux)"
    )
    assert select_backend().name == "sim" and "coreai" not in available_backends()


@ON_LINUX
def test_the_loaded_function_hands_the_options_to_the_real_executable(asset: Path) -> None:
    """LoadedFunction passes ``specialization`` to ``executable``: the real one refuses
    options off macOS (so they do reach it; its refusal named as anekit's one-line error),
    and runs without them."""
    refused = "Core AI could not load it: specialization_options is only available on macOS"
    with pytest.raises(ProgramError, match=refused):
        LoadedFunction(asset, "main", specialization=object())
    loaded = LoadedFunction(asset, "main")
    loaded.close()


# -- the stand-ins refuse what the real API refuses --------------------------------------


@ON_LINUX
def test_the_stand_in_options_fail_off_macos_with_the_real_messages() -> None:
    from coreai.runtime import SpecializationOptions as Real

    for name in ("default", "cpu_only"):
        with pytest.raises(RuntimeError) as real:
            getattr(Real, name)()
        with pytest.raises(RuntimeError) as stand_in:
            getattr(SpecializationOptions, name)()
        assert str(stand_in.value) == str(real.value)
    with pytest.raises(RuntimeError) as real:
        Real.from_preferred_compute_unit_kind(None)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError) as stand_in:
        SpecializationOptions.from_preferred_compute_unit_kind(None)
    assert str(stand_in.value) == str(real.value)
    with pytest.raises(TypeError) as real_init:
        Real()
    with pytest.raises(TypeError) as stand_in_init:
        SpecializationOptions()
    assert str(stand_in_init.value) == str(real_init.value)
    assert SpecializationOptions.is_supported() is Real.is_supported() is False


def test_the_stand_ins_have_the_real_signatures() -> None:
    from coreai.authoring import AIModelAsset
    from coreai.runtime import SpecializationOptions as Real

    for name in ("from_preferred_compute_unit_kind", "with_debug", "default", "cpu_only"):
        real = inspect.signature(getattr(Real, name))
        stand_in = inspect.signature(getattr(SpecializationOptions, name))
        assert [(p.name, p.kind) for p in stand_in.parameters.values()] == [
            (p.name, p.kind) for p in real.parameters.values()
        ], name
    assert "specialization_options" in inspect.signature(AIModelAsset.executable).parameters
    stub = Path(sys.modules["coreai.runtime"].__file__ or "").with_suffix(".pyi").read_text()
    for kind in ("cpu", "gpu", "neural_engine", "available_kinds"):
        assert f"def {kind}(cls) -> " in stub
        assert callable(getattr(ComputeUnitKind, kind))


def test_on_the_stand_in_mac_the_options_take_only_a_compute_unit_kind(
    mac27: CoreAIOnMac,
) -> None:
    with pytest.raises(TypeError, match="ComputeUnitKind"):
        SpecializationOptions.from_preferred_compute_unit_kind("neural_engine")
    with pytest.raises(TypeError, match="no constructor"):
        ComputeUnitKind()
    options = SpecializationOptions.from_preferred_compute_unit_kind(
        ComputeUnitKind.neural_engine()
    )
    assert options.preferred_compute_unit_kind == ComputeUnitKind.neural_engine()
    with pytest.raises(TypeError):
        options.with_debug(True)  # type: ignore[call-arg]  # keyword-only, as the real one
    assert options.with_debug(enabled=True).is_debug_enabled


def test_the_stand_in_executable_refuses_what_the_real_one_refuses(
    asset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mac = CoreAIOnMac().install(monkeypatch)

    async def enter(options: Any) -> None:
        async with coreai.AIModelAsset.load(asset).executable(specialization_options=options):
            pass

    with pytest.raises(AttributeError, match="_options"):
        asyncio.run(enter(object()))  # AIModel.load reads specialization_options._options
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    with pytest.raises(RuntimeError, match="only available on macOS, but current platform"):
        asyncio.run(enter(SpecializationOptions._wrap(None)))  # type: ignore[arg-type]
    assert mac.loads == []


# -- the runtime's reason, Mac by Mac ---------------------------------------------------


@pytest.mark.parametrize(
    ("macos", "os_framework", "reason"),
    [
        ("15.5", True, "Core AI is part of macOS 27 and later (this Mac runs macOS 15.5)"),
        ("26.4", True, "Core AI is part of macOS 27 and later (this Mac runs macOS 26.4)"),
        ("27.0", False, "coreai runs its bundled CPU runtime here, not macOS's Core AI"),
        ("27.0", True, None),
    ],
)
def test_core_ai_runs_on_the_neural_engine_only_on_macos_27_with_the_os_framework(
    macos: str, os_framework: bool, reason: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    CoreAIOnMac(macos, os_framework).install(monkeypatch)
    got = RUNTIMES["coreai"].unavailable_reason()
    assert got == reason if reason is None else (got or "").startswith(reason)


def test_on_macos_27_without_the_extra_the_reason_names_it(
    mac27: CoreAIOnMac, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "coreai" else real(name, *a)
    )
    assert RUNTIMES["coreai"].unavailable_reason() == f"needs the coreai extra: {COREAI_EXTRA}"


# -- the backend prefers the Neural Engine ----------------------------------------------


def test_the_backend_loads_with_the_neural_engine_preferred(
    ffn: anekit.CompiledProgram, mac27: CoreAIOnMac
) -> None:
    got = ffn(X, backend="coreai")
    np.testing.assert_allclose(got, _fp32(ffn), atol=1e-5)  # run by Core AI's CPU runtime
    assert mac27.preferred == ["neural_engine"]
    report = ffn.last_run
    assert report is not None and report.backend == "coreai" and not report.simulated
    assert (report.device, report.requested) == ("ANE (Core AI)", "neural_engine")
    ffn(X, backend="coreai")
    assert len(mac27.loads) == 1  # loaded once


def test_the_mode_is_the_preferred_compute_unit(
    ffn: anekit.CompiledProgram, mac27: CoreAIOnMac
) -> None:
    ffn(X, backend="coreai", mode="gpu")
    assert mac27.preferred[-1] == "gpu"
    assert ffn.last_run is not None and ffn.last_run.device == "Core AI (gpu preferred)"
    with pytest.raises(ProgramError, match="one of neural_engine, gpu, cpu; got 'CPU_AND_NE'"):
        ffn(X, backend="coreai", mode="CPU_AND_NE")


def test_named_the_backend_refuses_a_program_it_cannot_take_before_loading(
    floored: anekit.CompiledProgram, mac27: CoreAIOnMac
) -> None:
    with pytest.raises(ProgramError, match=r"no Core AI lowering for these ops: floor \(1\)"):
        floored(X, backend="coreai")
    assert mac27.loads == []


# -- selection: Core AI where the OS has it, Core ML otherwise --------------------------


@pytest.fixture
def core_ml(monkeypatch: pytest.MonkeyPatch) -> CoreMLTools:
    """Core ML as on a Mac: its check passes, and coremltools' compiler and loader are
    tests/standins.py's, the compiled model computing with the simulator."""
    monkeypatch.setattr(runtimes, "core_ml_reason", lambda **_: None)
    return CoreMLTools(compute=simulated_device()).install(monkeypatch)


def test_with_core_ai_in_the_os_it_is_picked_first_and_hands_core_ml_what_it_refuses(
    ffn: anekit.CompiledProgram,
    floored: anekit.CompiledProgram,
    mac27: CoreAIOnMac,
    core_ml: CoreMLTools,
) -> None:
    assert available_backends()[:2] == ["coreai", "coreml"]
    chosen = select_backend()
    assert isinstance(chosen, FallingBack) and chosen.name == "coreai"
    assert isinstance(chosen.fallback, CoreMLBackend)

    ffn(X)
    assert ffn.last_run is not None and ffn.last_run.backend == "coreai"
    assert mac27.preferred == ["neural_engine"] and core_ml.compiles == []

    got = floored(X)  # floor has no Core AI lowering: Core ML runs it
    assert floored.last_run is not None and floored.last_run.backend == "coreml"
    assert len(mac27.loads) == 1 and len(core_ml.compiles) == 1
    np.testing.assert_array_equal(got, floored(X, backend="sim"))  # the stand-in's device


@pytest.mark.parametrize(("macos", "os_framework"), [("15.5", True), ("27.0", False)])
def test_without_core_ai_in_the_os_core_ml_is_picked(
    macos: str,
    os_framework: bool,
    ffn: anekit.CompiledProgram,
    core_ml: CoreMLTools,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mac = CoreAIOnMac(macos, os_framework).install(monkeypatch)
    assert isinstance(select_backend(), CoreMLBackend)
    assert available_backends()[0] == "coreml"
    ffn(X)
    assert ffn.last_run is not None and ffn.last_run.backend == "coreml"
    assert mac.loads == []


def test_a_default_pick_without_core_ml_has_no_fallback(mac27: CoreAIOnMac) -> None:
    assert RUNTIMES["coreml"].unavailable_reason() is not None  # no coremltools bindings here
    assert isinstance(select_backend(), coreai_os.CoreAIBackend)


# -- on a Mac with macOS 27 (unverified in CI) -------------------------------------------


@pytest.mark.macos
def test_on_macos_27_core_ai_runs_the_program_with_the_neural_engine_preferred(
    ffn: anekit.CompiledProgram,
) -> None:
    if (reason := RUNTIMES["coreai"].unavailable_reason()) is not None:
        pytest.skip(reason)
    got = ffn(X, backend="coreai")
    np.testing.assert_allclose(got, _fp32(ffn), atol=2e-2)  # the ANE computes in fp16
    assert ffn.last_run is not None and ffn.last_run.device == "ANE (Core AI)"
