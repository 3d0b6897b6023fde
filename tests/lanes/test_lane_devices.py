"""Lanes tell the truth about their device: the ``cpu`` lane asks ONNX Runtime for the
CPU provider only, and the ``gpu`` lane reads back the providers its sessions really
use, refusing itself when ONNX Runtime quietly put them on the CPU.

ONNX Runtime is the real one (this machine's has no CUDA: asked for CUDA it falls
back to the CPU, as an onnxruntime-gpu without its CUDA libraries does) or the
contract-enforcing stand-in of tests/standins.py, as a build where CUDA works or not.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import onnxruntime
import pytest

from anekit._runtime import core_ml_runtime_available
from anekit.lanes import Scheduler
from anekit.lanes.engines import LaneRefused, make_engine
from anekit.lanes.worker import refusal_hello
from anekit.models import known_answers
from conftest import gpu_skip_reason
from standins import CPU, CUDA, OnnxRuntime

onnx_gpu_lane = pytest.mark.skipif(
    core_ml_runtime_available(), reason="on a Mac the gpu lane is Core ML's"
)

REAL_CUDA = gpu_skip_reason() is None  # ONNX Runtime really runs a session on CUDA


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tinybert import tiny_bert

    return tiny_bert(tmp_path_factory.mktemp("models") / "tiny-bert")


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return known_answers.load().texts[:6]


def _claim_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """onnxruntime-gpu installed, CUDA not loadable: the build lists CUDA, the real
    InferenceSession (which has none here) falls back to the CPU without an error."""
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: [CUDA, CPU])


def test_the_cpu_lane_asks_for_the_cpu_only_where_cuda_works(
    monkeypatch: pytest.MonkeyPatch, tiny: Path, texts: list[str]
) -> None:
    ort = OnnxRuntime(available=(CUDA, CPU), working=(CUDA, CPU)).install(monkeypatch)
    engine = make_engine("cpu", tiny, None, 1)
    vectors = engine.embed(engine.tokenize(texts))
    assert vectors.shape == (len(texts), 32)
    assert ort.sessions, "no ONNX Runtime session was built"
    assert ort.requested() == [[CPU]] * len(ort.sessions)
    assert {tuple(session.get_providers()) for session in ort.sessions} == {(CPU,)}
    assert engine.providers() == [CPU]
    assert engine.device == "CPU (ONNX Runtime int8)"


@onnx_gpu_lane
@pytest.mark.parametrize("runtime", ["real", "stand-in"])
def test_the_gpu_lane_refuses_itself_when_its_sessions_would_run_on_the_cpu(
    monkeypatch: pytest.MonkeyPatch, tiny: Path, runtime: str
) -> None:
    if runtime == "real":
        if REAL_CUDA:
            pytest.skip("CUDA really works here")
        _claim_cuda(monkeypatch)
    else:
        OnnxRuntime(available=(CUDA, CPU), working=(CPU,)).install(monkeypatch)
    with (
        pytest.warns(UserWarning, match="not in available provider names")
        if runtime == "real"
        else contextlib.nullcontext(),
        pytest.raises(LaneRefused, match=r"^the gpu lane would run on the CPU: ") as raised,
    ):
        make_engine("gpu", tiny, None, 1)
    assert f"built the session on {CPU}, not {CUDA}" in str(raised.value)
    assert raised.value.device == "CPU (ONNX Runtime fp32)"
    assert raised.value.providers == [CPU]


@onnx_gpu_lane
def test_the_gpu_lane_reports_cuda_from_its_one_session(
    monkeypatch: pytest.MonkeyPatch, tiny: Path, texts: list[str]
) -> None:
    ort = OnnxRuntime(available=(CUDA, CPU), working=(CUDA, CPU)).install(monkeypatch)
    engine = make_engine("gpu", tiny, 256, 1)
    token_ids = engine.tokenize(texts)
    engine.embed(token_ids[:2])
    assert ort.requested() == [[CUDA, CPU]] * len(ort.sessions)
    assert engine.providers() == [CUDA, CPU]
    assert engine.device == "GPU (ONNX Runtime CUDA fp32)"
    # One model serves every length: a longer text needs no new session, so CUDA
    # that stops loading later cannot put part of the work on the CPU unnoticed.
    sessions = len(ort.sessions)
    ort.working = (CPU,)
    engine.embed([ids[:1] + [1000] * 150 + ids[-1:] for ids in token_ids[:1]])
    assert len(ort.sessions) == sessions
    assert engine.device == "GPU (ONNX Runtime CUDA fp32)"


@onnx_gpu_lane
@pytest.mark.skipif(REAL_CUDA, reason="CUDA really works here")
def test_a_gpu_lane_on_the_cpu_is_refused_with_the_reason_and_its_real_device(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tiny: Path
) -> None:
    """End to end, through a real worker process whose onnxruntime lists CUDA but
    cannot load it (a sitecustomize makes the worker's build claim CUDA)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        f"import onnxruntime\nonnxruntime.get_available_providers = lambda: [{CUDA!r}, {CPU!r}]\n"
    )
    paths = [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    _claim_cuda(monkeypatch)  # the parent's check that a gpu lane can run here
    with Scheduler(["gpu"], model=tiny) as scheduler:
        scheduler.start()
        (status,) = scheduler.status()
    assert status["state"] == "refused", status
    assert status["reason"].startswith("the gpu lane would run on the CPU: ")
    assert status["device"] == "CPU (ONNX Runtime fp32)"
    assert status["providers"] == [CPU]


def test_a_refusing_hello_refuses_the_lane_with_its_reason() -> None:
    refusal = LaneRefused("the gpu lane would run on the CPU: why", "CPU (x)", [CPU])
    hello = refusal_hello("gpu", refusal)
    assert hello["admitted"] is False and hello["refused"] == str(refusal)
    with Scheduler(["numpy"]) as scheduler:
        lane = scheduler.lanes["numpy"]
        scheduler._hello(lane, hello)
        assert lane.state == "refused" and not lane.can_start()
        assert lane.reason == "the gpu lane would run on the CPU: why"
        assert lane.describe()["device"] == "CPU (x)"
        assert lane.describe()["providers"] == [CPU]
