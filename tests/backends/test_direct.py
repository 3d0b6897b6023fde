"""The direct ANE backend (issue 18, part 3) against a stand-in of its private runtime
(``anekit.backends.direct.PrivateANE``): the stand-in takes only what the sources say
the framework takes (MIL text that parses, its weight file, QoS 21, a compile before a
load before an evaluation, fp16 buffers of the right sizes) and plays the device with
anekit's simulator. The private classes themselves are unverified: no Mac here."""

from __future__ import annotations

import functools
import platform
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import anekit
from anekit._milblob import read_blob_file
from anekit.backends import direct, select_backend
from anekit.errors import BackendUnavailableError
from miltext import parse


@dataclass
class _Model:
    runtime: StandInANE
    text: str
    steps: list[str] = field(default_factory=list)

    def _checked(self, qos: int, error: Any) -> None:
        if qos != direct.QOS or error is not None:
            raise TypeError(f"QoS {qos} (21 expected), error out-argument {error!r} (None)")

    def compileWithQoS_options_error_(self, qos: int, options: dict[str, Any], error: Any) -> Any:
        self._checked(qos, error)
        self.steps.append("compile")
        refused = self.runtime.refuse == "compile"
        return (not refused, "ANECCompile() FAILED" if refused else None)

    def loadWithQoS_options_error_(self, qos: int, options: dict[str, Any], error: Any) -> Any:
        self._checked(qos, error)
        if self.steps[-1:] != ["compile"]:
            return (False, "load before compile")
        self.steps.append("load")
        return (True, None)

    def evaluateWithQoS_options_request_error_(
        self, qos: int, options: dict[str, Any], request: Any, error: Any
    ) -> Any:
        self._checked(qos, error)
        if "load" not in self.steps or "unload" in self.steps:
            return (False, "evaluate on a model not loaded")
        inputs, outputs, procedure = request
        if procedure != 0:  # one function: procedure 0 (AppleNeuralEngine.jl, AIF)
            return (False, f"no procedure {procedure}")
        values = [np.frombuffer(self.runtime.memory[pointer], np.float16) for pointer in inputs]
        results = self.runtime.device(values)
        for pointer, result in zip(outputs, results, strict=True):
            data = np.asarray(result, np.float16).tobytes()
            assert len(data) == len(self.runtime.memory[pointer]), "output buffer size"
            self.runtime.memory[pointer] = data
        self.steps.append("evaluate")
        return (True, None)

    def unloadWithQoS_error_(self, qos: int, error: Any) -> Any:
        self._checked(qos, error)
        self.steps.append("unload")
        return (True, None)


@dataclass
class StandInANE:
    """:class:`anekit.backends.direct.PrivateANE`'s interface, as its framework behaves."""

    device: Any
    refuse: str | None = None
    models: list[_Model] = field(default_factory=list)
    memory: dict[int, bytes] = field(default_factory=dict)

    def model(self, text: str, weights: bytes, weight_path: str) -> _Model:
        parse(text)  # the MIL text must parse
        read_blob_file(weights)  # and the weight file must be one
        assert weight_path == "@model_path/weights/weight.bin"
        self.models.append(_Model(self, text))
        return self.models[-1]

    def call(self, step: str, method: Any, *arguments: Any) -> None:
        ok, error = method(*arguments, None)
        if not ok:
            raise direct.DirectError(f"the ANE framework refused to {step}: {error}")

    def surface(self, size: int) -> tuple[int, Any]:
        pointer = len(self.memory) + 1
        self.memory[pointer] = bytes(size)
        return pointer, pointer

    def write(self, pointer: int, data: bytes) -> None:
        assert len(data) == len(self.memory[pointer]), "input buffer size"
        self.memory[pointer] = data

    def read(self, pointer: int, size: int) -> bytes:
        return self.memory[pointer][:size]

    def request(self, inputs: list[Any], outputs: list[Any], procedure: int) -> Any:
        return (inputs, outputs, procedure)


@functools.cache
def _ffn() -> tuple[Any, np.ndarray]:
    """The seed-003 FFN block (D=64, H=192, T=32), traced once."""
    from anekit.bench import workloads

    ffn = workloads("small")[0]
    return anekit.compile(ffn.build(np.float16), *ffn.inputs), ffn.inputs[0]


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> StandInANE:
    program, _ = _ffn()
    simulator = select_backend("sim").load(program)

    def device(values: list[np.ndarray]) -> list[np.ndarray]:
        """The FFN in the simulator, on the stored (padded) input buffers."""
        (x,) = values
        spec = program.io.inputs[0]
        out = simulator.predict({spec.name: x.reshape(spec.shape)})
        return [out[spec.name] for spec in program.io.outputs]

    stand_in = StandInANE(device)
    monkeypatch.setattr(direct, "unavailable_reason", lambda: None)
    monkeypatch.setattr(direct, "PrivateANE", lambda: stand_in)
    return stand_in


def test_off_a_mac_the_direct_backend_is_unavailable_and_never_chosen() -> None:
    if platform.system() == "Darwin":
        pytest.skip("a Mac")
    assert direct.unavailable_reason() == "the direct ANE path needs macOS"
    program, x = _ffn()
    with pytest.raises(BackendUnavailableError, match="backend 'direct' cannot run here"):
        program(x, backend="direct")
    assert select_backend().name != "direct"


def test_a_program_runs_compiled_loaded_and_evaluated_in_order(runtime: StandInANE) -> None:
    program, x = _ffn()
    want = program(x, backend="sim")
    got = program(x, backend="direct")
    np.testing.assert_array_equal(got, want)
    (model,) = runtime.models
    assert model.steps == ["compile", "load", "evaluate"]
    assert parse(model.text).version == "1.3"
    report = program.last_run
    assert report is not None
    assert (report.backend, report.simulated, report.requested) == ("direct", False, "MIL text 1.3")
    assert "private API" in report.device
    program(x, backend="direct")
    assert model.steps[-1] == "evaluate" and len(runtime.models) == 1  # loaded once


def test_the_compile_budget_is_refused_then_falls_back_to_core_ml(
    runtime: StandInANE, monkeypatch: pytest.MonkeyPatch
) -> None:
    from standins import CoreMLTools, simulated_device

    CoreMLTools(compute=simulated_device()).install(monkeypatch)
    monkeypatch.setattr(direct, "_compiles", direct.COMPILE_BUDGET)
    program, _ = _ffn()
    with pytest.warns(RuntimeWarning, match=r"made 100 ANE compiles.*running it on Core ML"):
        session = direct.DirectBackend().load(program)
    assert type(session).__name__ == "CoreMLSession" and not runtime.models


def test_a_refused_compile_names_the_step_and_core_ml_keeps_working(
    runtime: StandInANE, monkeypatch: pytest.MonkeyPatch
) -> None:
    from standins import CoreMLTools, simulated_device

    tools = CoreMLTools(compute=simulated_device()).install(monkeypatch)
    runtime.refuse = "compile"
    program, x = _ffn()
    with pytest.warns(RuntimeWarning, match="refused to compile: ANECCompile"):
        session = direct.DirectBackend().load(program)
    spec = program.io.inputs[0]
    padded = np.zeros(spec.shape, np.float16)
    padded[..., : x.shape[-1]] = x
    outputs = session.predict({spec.name: padded})
    assert set(outputs) == {spec.name for spec in program.io.outputs}
    assert len(tools.compiles) == 1


def test_only_fp16_inputs_and_outputs(runtime: StandInANE) -> None:
    x = np.ones((1, 64, 1, 32), np.float32)
    program = anekit.compile(lambda a: a * 2, x)
    with pytest.raises(direct.DirectError, match=r"fp16 inputs and outputs only: \w+ \(float32\)"):
        direct.DirectSession(program, runtime)


@pytest.mark.macos
def test_on_a_mac_the_ffn_matches_the_simulator() -> None:
    program, x = _ffn()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a fallback to Core ML fails it
        got = program(x, backend="direct")
    np.testing.assert_allclose(got, program(x, backend="sim"), rtol=0, atol=2e-2)
