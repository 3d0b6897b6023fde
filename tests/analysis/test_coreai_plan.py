"""Core AI's compute plan (macOS 27; coreai-torch's ``ComputePlan``) and ``anekit doctor``
reading it: unverified on hardware here. On a simulated macOS 27, tests/standins_coreai.py's
stand-ins (which refuse what the real API refuses) stand in for the OS framework and
coreai-torch, over the real Core AI builder; off macOS, doctor says why there is no plan."""

from __future__ import annotations

import asyncio
import platform
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result

import anekit
import anekit.nn as nn
from anekit.errors import PlacementError

coreai = pytest.importorskip("coreai.authoring", reason="the coreai extra")

from anekit.backends import coreai_plan  # noqa: E402
from anekit.package.coreai import to_coreai  # noqa: E402
from standins_coreai import CoreAIComputePlan, CoreAIOnMac  # noqa: E402

RNG = np.random.default_rng(36)
W = (RNG.standard_normal((32, 48)) * 0.1).astype(np.float32)
X = RNG.standard_normal((4, 32)).astype(np.float32)


def _ffn(x: Any) -> Any:
    return nn.gelu(x @ W)


@pytest.fixture
def ffn() -> anekit.CompiledProgram:
    return anekit.compile(_ffn, X)


@pytest.fixture
def mac27(monkeypatch: pytest.MonkeyPatch) -> CoreAIOnMac:
    """macOS 27 with the OS's Core AI (a wheel install)."""
    return CoreAIOnMac().install(monkeypatch)


def test_the_stand_in_compute_plan_refuses_what_coreai_torch_refuses(
    ffn: anekit.CompiledProgram, monkeypatch: pytest.MonkeyPatch
) -> None:
    """coreai_torch/debugging/compute_plan.py: ``from_program`` turns debugging on in the
    options first (``SpecializationOptions.default()`` when None: macOS only), then
    saves the program (an AIProgram)."""
    CoreAIComputePlan().install(monkeypatch)
    from coreai_torch.debugging.compute_plan import ComputePlan

    built = to_coreai(ffn.program, ["main"])
    with pytest.raises(RuntimeError, match=r"SpecializationOptions\.default\(\) is only available"):
        asyncio.run(ComputePlan.from_program(built))  # what the real one raised on this Linux
    CoreAIOnMac().install(monkeypatch)
    with pytest.raises(AttributeError, match="with_debug"):
        asyncio.run(ComputePlan.from_program(built, object()))
    with pytest.raises(AttributeError, match="save_asset"):
        asyncio.run(ComputePlan.from_program("main", None))
    plan = asyncio.run(ComputePlan.from_program(built))
    data = plan.to_dict(built)
    assert data["entry_count"] == len(data["entries"]) > 0
    assert {data["operation_names"][entry["operation_id"]] for entry in data["entries"]} >= {
        "coreai.conv2d",
        "coreai.gelu",
    }


# -- anekit doctor reads Core AI's compute plan -----------------------------------------


MODEL = """
import numpy as np
import anekit.nn as nn

W = np.linspace(-0.1, 0.1, 32 * 48, dtype=np.float32).reshape(32, 48)


def ffn(x):
    return nn.gelu(x @ W)


def floored(x):
    return np.floor(x @ W)
"""


def _doctor(tmp_path: Path, function: str, *args: str) -> Result:
    from anekit.cli import cli

    model = tmp_path / "model.py"
    model.write_text(MODEL)
    return CliRunner().invoke(
        cli, ["doctor", f"{model}:{function}", "--shape", "x=4,32", *args], catch_exceptions=False
    )


def _gelu_on_the_cpu(name: str, preferred: str | None) -> tuple[str, str] | None:
    return (
        ("CPU", "gelu: not supported by the Neural Engine here") if name == "coreai.gelu" else None
    )


def test_doctor_shows_core_ai_s_plan_per_op(
    tmp_path: Path, mac27: CoreAIOnMac, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = CoreAIComputePlan(place=_gelu_on_the_cpu).install(monkeypatch)
    result = _doctor(tmp_path, "ffn")
    assert "Core AI compute plan, function main" in result.output
    [row] = [line for line in result.output.splitlines() if "coreai.gelu" in line]
    assert "cpu" in row and "not supported by the Neural Engine" in row
    assert "coreai.conv2d" not in result.output  # on the ANE: listed with --all only
    assert "coreai.conv2d" in _doctor(tmp_path, "ffn", "--all").output
    assert [(preferred, debug) for _, preferred, debug in plan.built] == [
        ("neural_engine", True)
    ] * 2
    notes = [
        note for note in _doctor(tmp_path, "ffn", "--json").output.splitlines() if "Core AI" in note
    ]
    assert len(notes) == 1 and "function main: " in notes[0] and "1 on cpu" in notes[0]
    assert "Neural Engine preferred" in notes[0]


def test_doctor_reads_each_function_of_a_package(
    tmp_path: Path, mac27: CoreAIOnMac, ffn: anekit.CompiledProgram, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = ffn.save(tmp_path / "ffn.mlpackage")
    plan = CoreAIComputePlan().install(monkeypatch)
    planned = coreai_plan.actual_devices(anekit.load(package).program)
    assert list(planned) == ["main"] and {op.device for op in planned["main"]} == {"ane"}
    assert {op.op for op in planned["main"]} >= {"coreai.conv2d", "coreai.gelu"}
    assert not {op.op for op in planned["main"]} & {"coreai.constant", "coreai.graph"}
    from anekit.cli import cli

    result = CliRunner().invoke(cli, ["doctor", str(package), "--json"])
    assert "Core AI compute plan" in result.output and len(plan.built) == 2


def test_doctor_without_coreai_torch_says_what_to_install(
    tmp_path: Path, mac27: CoreAIOnMac
) -> None:
    assert "coreai_torch" not in sys.modules
    result = _doctor(tmp_path, "ffn", "--json")
    assert "Core AI compute plan not read" in result.output
    assert "pip install 'anekit[coreai-plan]'" in result.output
    required = _doctor(tmp_path, "ffn", "--coreai-plan")
    assert required.exit_code == 2 and "coreai-torch" in required.output


def test_doctor_on_a_program_core_ai_cannot_take_says_why(
    tmp_path: Path, mac27: CoreAIOnMac, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = CoreAIComputePlan().install(monkeypatch)
    result = _doctor(tmp_path, "floored", "--json")
    assert "no Core AI lowering for these ops: floor (1)" in result.output
    assert _doctor(tmp_path, "floored", "--coreai-plan").exit_code == 2
    assert plan.built == []


def test_off_macos_doctor_is_silent_about_core_ai_unless_asked(tmp_path: Path) -> None:
    if platform.system() == "Darwin":
        pytest.skip("off macOS only")
    result = _doctor(tmp_path, "ffn", "--json")
    assert result.exit_code in (0, 1) and "Core AI" not in result.output  # 1: fallbacks predicted
    asked = _doctor(tmp_path, "ffn", "--coreai-plan")
    assert asked.exit_code == 2
    assert "Core AI on the Neural Engine needs macOS 27" in asked.output
    with pytest.raises(PlacementError, match="needs macOS 27"):
        coreai_plan.actual_devices(anekit.compile(_ffn, X).program)


# -- on a Mac with macOS 27 (unverified in CI) -------------------------------------------


@pytest.mark.macos
def test_on_macos_27_the_compute_plan_places_every_op(ffn: anekit.CompiledProgram) -> None:
    if (reason := coreai_plan.unavailable_reason()) is not None:
        pytest.skip(reason)
    planned = coreai_plan.actual_devices(ffn.program)
    assert planned["main"] and all(op.devices for op in planned["main"])
