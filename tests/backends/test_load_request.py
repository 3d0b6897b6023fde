"""Backends load a LoadRequest (the MIL program, its function and I/O contract, lowering
and saving as callables), never the CompiledProgram they run for."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import anekit
import anekit.backends
from anekit.backends import LoadRequest, RunReport
from anekit.backends.coreml import CoreMLBackend
from anekit.backends.sim import SimBackend
from anekit.specs import IOContract

X = np.arange(256, dtype=np.float16).reshape(4, 64) / 256


class RecordingSession:
    last_run: RunReport | None = None

    def __init__(self, request: LoadRequest) -> None:
        self.request = request

    def predict(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.last_run = RunReport("stand-in", "nowhere", simulated=True, seconds=0.0)
        (name,) = feeds
        (output,) = self.request.contract.package_outputs
        return {str(output.name): feeds[name][:, : output.shape[-1]] * 2}


class RecordingBackend:
    """A stand-in backend: keeps what it was asked to load."""

    name = "stand-in"

    def __init__(self) -> None:
        self.loaded: list[tuple[Any, str | None]] = []

    def load(self, request: LoadRequest, mode: str | None = None) -> RecordingSession:
        self.loaded.append((request, mode))
        return RecordingSession(request)


def test_a_backend_gets_a_load_request_and_no_compiled_program(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    program = anekit.compile(lambda x: x[:, :8] * 2, X)
    backend = RecordingBackend()
    monkeypatch.setattr(anekit.backends, "select_backend", lambda name=None: backend)
    np.testing.assert_array_equal(program(X, mode="ane"), X[:, :8] * 2)
    ((request, mode),) = backend.loaded
    assert isinstance(request, LoadRequest) and mode == "ane"
    values = [getattr(request, field.name) for field in dataclasses.fields(request)]
    assert not any(isinstance(value, anekit.CompiledProgram) for value in values)
    assert request.program is program.program and request.function == program.function_name
    assert request.contract == program.io and request.contract.widths == {"output": 8}
    assert request.package is None and request.compression is None
    assert not request.converted and request.source == program.source
    assert program._lowered is None  # lowering is the backend's to ask for, not done ahead
    assert program.last_run is not None and program.last_run.backend == "stand-in"


def test_the_request_says_how_the_weights_are_stored_and_lowers_on_demand() -> None:
    weight = (np.random.default_rng(1).standard_normal((64, 64)) / 8).astype(np.float16)
    program = anekit.compile(lambda x: x @ weight, X, compress="int8")
    request = program.load_request()
    assert request.compression == "int8"
    assert program._lowered is None
    lowered = request.lowered()
    assert list(lowered.functions) == ["main"] and request.lowered() is lowered
    session = SimBackend().load(request)
    assert session.program is lowered and session.function == "main"


def test_a_request_names_a_function_of_its_program() -> None:
    program = SimpleNamespace(functions={"main": None})
    with pytest.raises(ValueError, match="no function 'seq32'; it has main"):
        LoadRequest(program, "seq32", IOContract((), ()), lambda: program, Path)


def _request(saves: list[Path], package: Path | None = None, function: str = "main") -> LoadRequest:
    program = SimpleNamespace(functions={function: None})

    def save(path: Path) -> Path:
        saves.append(path)
        path.mkdir(parents=True)
        (path / "Manifest.json").write_text("{}")
        return path

    return LoadRequest(
        program,
        function,
        IOContract((), ()),
        lowered=lambda: program,
        save=save,
        package=package,
    )


def test_core_ml_saves_a_traced_program_and_loads_a_read_one_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from standins import CoreMLTools

    tools = CoreMLTools().install(monkeypatch)
    saves: list[Path] = []
    session = CoreMLBackend().load(_request(saves))
    ((saved,),) = [saves]
    assert saved.name == "model.mlpackage" and tools.compiles[0][0] == str(saved)
    assert session.package == saved and session.function_name is None

    package = tmp_path / "read.mlpackage"
    package.mkdir()
    (package / "Manifest.json").write_text("{}")
    session = CoreMLBackend().load(_request(saves, package, "seq32"))
    assert len(saves) == 1  # not saved again: the package on disk is what loads
    assert tools.compiles[1][0] == str(package)
    assert session.package == package and session.function_name == "seq32"
