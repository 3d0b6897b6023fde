"""The direct ANE backend (issue 18, part 3) against a stand-in of its private runtime
(``anekit.backends.direct.PrivateANE``): the stand-in takes only what the sources say
the framework takes (MIL text that parses, its weight file, QoS 21, a compile before a
load before an evaluation, fp16 buffers of the right sizes) and plays the device with
anekit's simulator. The private classes themselves are unverified: no Mac here."""

from __future__ import annotations

import dataclasses
import functools
import platform
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import anekit
from anekit.backends import direct, select_backend
from anekit.errors import BackendUnavailableError
from miltext import parse
from standins import StandInANE, simulated_ane


@functools.cache
def _ffn() -> tuple[Any, np.ndarray]:
    """The seed-003 FFN block (D=64, H=192, T=32), traced once."""
    from anekit.bench import workloads

    ffn = workloads("small")[0]
    return anekit.compile(ffn.build(np.float16), *ffn.inputs), ffn.inputs[0]


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> StandInANE:
    program, _ = _ffn()
    simulator = select_backend("sim").load(program.load_request())

    def device(text: str, values: list[np.ndarray], function: str) -> list[np.ndarray]:
        """The FFN in the simulator, on the stored (padded) input buffers."""
        (x,) = values
        out = simulator.predict({program.io.inputs[0].name: x})
        return [out[spec.name] for spec in program.io.outputs]

    return StandInANE(device).install(monkeypatch)


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
    # the statistics mask set after the load, so the request reports the hardware time
    assert report.hardware_seconds == 41_000 / 1e9  # what the stand-in reports
    assert "hardware execution 0.041 ms" in report.describe()
    program(x, backend="direct")
    assert model.steps[-1] == "evaluate" and len(runtime.models) == 1  # loaded once


def test_a_run_report_gives_the_hardware_time_of_each_warm_call(runtime: StandInANE) -> None:
    from anekit.runs import measure

    program, x = _ffn()
    measured = measure(program, x, backend="direct", repeat=3)
    assert measured.hardware_ms == pytest.approx([0.041] * 3)
    assert measured.to_json()["hardware"]["p50_ms"] == pytest.approx(0.041)
    assert "hardware execution (3 calls, the framework's statistics): p50 0.041 ms" in (
        measured.describe()
    )
    runtime.hardware_ns_per_call = None  # a macOS that reports none
    measured = measure(program, x, backend="direct", repeat=2)
    assert measured.hardware_ms == () and measured.to_json()["hardware"] is None


def test_the_compile_budget_is_refused_then_falls_back_to_core_ml(
    runtime: StandInANE, monkeypatch: pytest.MonkeyPatch
) -> None:
    from standins import CoreMLTools, simulated_device

    CoreMLTools(compute=simulated_device()).install(monkeypatch)
    monkeypatch.setattr(direct, "_compiles", direct.COMPILE_BUDGET)
    program, _ = _ffn()
    with pytest.warns(RuntimeWarning, match=r"made 100 ANE compiles.*running it on Core ML"):
        session = direct.DirectBackend().load(program.load_request())
    assert type(session).__name__ == "CoreMLSession" and not runtime.models


def test_a_refused_compile_names_the_step_and_core_ml_keeps_working(
    runtime: StandInANE, monkeypatch: pytest.MonkeyPatch
) -> None:
    from standins import CoreMLTools, simulated_device

    tools = CoreMLTools(compute=simulated_device()).install(monkeypatch)
    runtime.refuse = "compile"
    program, x = _ffn()
    with pytest.warns(RuntimeWarning, match="refused to compile: ANECCompile"):
        session = direct.DirectBackend().load(program.load_request())
    spec = program.io.inputs[0]
    padded = np.zeros(spec.shape, np.float16)
    padded[..., : x.shape[-1]] = x
    outputs = session.predict({spec.name: padded})
    assert set(outputs) == {spec.name for spec in program.io.outputs}
    assert len(tools.compiles) == 1


def test_a_program_the_text_cannot_hold_runs_on_core_ml_unless_fallback_is_refused(
    runtime: StandInANE, monkeypatch: pytest.MonkeyPatch
) -> None:
    from anekit.errors import ProgramError
    from anekit.package import mil_text
    from standins import CoreMLTools, simulated_device

    CoreMLTools(compute=simulated_device()).install(monkeypatch)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise ProgramError("while_0 (while_loop): nested blocks have no MIL text form here")

    monkeypatch.setattr(mil_text, "to_mil_text", refuse)
    program, _ = _ffn()
    with direct.no_fallback(), pytest.raises(direct.DirectError, match=r"\(while_loop\)"):
        direct.DirectBackend().load(program.load_request())
    with pytest.warns(RuntimeWarning, match=r"\(while_loop\).*running it on Core ML"):
        session = direct.DirectBackend().load(program.load_request())
    assert type(session).__name__ == "CoreMLSession" and not runtime.models


def test_only_fp16_inputs_and_outputs(runtime: StandInANE) -> None:
    x = np.ones((1, 64, 1, 32), np.float32)
    program = anekit.compile(lambda a: a * 2, x)
    only = r"fp16 inputs and outputs only: main: \w+ \(fp32\)"
    with pytest.raises(direct.DirectError, match=only):
        direct.DirectSession(program.load_request(), runtime)


@pytest.mark.macos
def test_on_a_mac_the_ffn_matches_the_simulator() -> None:
    reason = direct.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    program, x = _ffn()
    with direct.no_fallback():  # a fallback to Core ML fails it
        got = program(x, backend="direct")
    np.testing.assert_allclose(got, program(x, backend="sim"), rtol=0, atol=2e-2)


@pytest.mark.macos
def test_on_a_mac_a_broken_descriptor_is_named_and_core_ml_keeps_working(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reason = direct.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    from anekit.package import mil_text

    write = mil_text.to_mil_text

    def broken(*args: Any, **kwargs: Any) -> Any:
        written = write(*args, **kwargs)
        return dataclasses.replace(written, text=written.text.replace(" = ", " == ", 1))

    monkeypatch.setattr(mil_text, "to_mil_text", broken)
    program, x = _ffn()
    program.unload()
    with pytest.warns(RuntimeWarning, match="the ANE framework refused .*running it on Core ML"):
        got = program(x, backend="direct")
    assert program.last_run is not None and program.last_run.backend == "coreml"
    np.testing.assert_allclose(got, program(x, backend="sim"), rtol=0, atol=2e-2)


def test_off_a_mac_the_direct_embedder_and_lane_say_why() -> None:
    if platform.system() == "Darwin":
        pytest.skip("a Mac")
    from anekit.embedder import Embedder
    from anekit.errors import LaneError
    from anekit.lanes import Scheduler

    with pytest.raises(BackendUnavailableError, match=r"direct runtime cannot run here: .*macOS"):
        Embedder(runtime="direct")
    with pytest.raises(LaneError, match="lane direct: the direct ANE path needs macOS"):
        Scheduler(["direct"])


def test_the_direct_encoder_and_lane_engine_run_the_package_buckets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Embedder(runtime="direct") and the direct lane's engine: the model's package
    compiled once by the (stand-in) framework, every bucket a procedure, the device
    running the procedure each request names."""
    from anekit.embedder import Embedder
    from anekit.lanes.engines import make_engine
    from anekit.models import known_answers
    from anekit.models.package import build_package
    from tinybert import tiny_bert

    folder = tiny_bert(tmp_path / "tiny-bert")
    package = build_package(folder, buckets=(128, 192), out=tmp_path / "tiny.mlpackage")
    simulated = Embedder(folder, runtime="sim", max_length=192, package=package.path)
    stand_in = simulated_ane(monkeypatch)
    # four short texts (the 128 bucket) and four long chunks (a longer bucket)
    texts = [
        "x = 1",
        "def add(a, b): return a + b",
        "README",
        "import os",
        *known_answers.load().texts[:4],
    ]
    on_ane = Embedder(folder, runtime="direct", package=package.path, max_length=192)
    assert on_ane.encoder.device == "ANE (direct, private API; experimental)"
    np.testing.assert_array_equal(on_ane.encode(texts), simulated.encode(texts))
    # one compile for both buckets, each a procedure of the model
    (model,) = stand_in.models
    assert model.steps[:2] == ["compile", "load"] and "compile" not in model.steps[2:]
    assert set(model.evaluated) == {"seq128", "seq192"}
    monkeypatch.setattr(
        "anekit.models.encoders.ensure_package", lambda *args, **kwargs: package
    )  # the lane's engine finds the package this test built
    engine = make_engine("direct", folder, 192, None)
    vectors = engine.embed(engine.tokenize(texts))
    np.testing.assert_allclose(vectors, simulated.encode(texts), rtol=0, atol=1e-6)
