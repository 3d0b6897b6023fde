"""Fault injection (ANEKIT_FAULT) against real worker processes: no fault loses a chunk.

The CPU lane (ONNX Runtime int8) and the NumPy fp32 lane do the work; the ``sim``
lane (the fp16 package in the simulator) stands in for the ANE lane.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from anekit.errors import LaneError
from anekit.lanes import Scheduler
from anekit.models import Embedder, known_answers


@pytest.fixture(scope="module")
def work() -> tuple[list[list[int]], np.ndarray]:
    """48 tokenized chunks and their fp32 reference vectors."""
    embedder = Embedder(backend="numpy")
    texts = known_answers.load().texts
    token_ids = embedder.tokenize(texts + texts[:16])
    return token_ids, embedder.embed_ids(token_ids)


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    def set_faults(text: str) -> None:
        monkeypatch.setenv("ANEKIT_FAULT", text)

    return set_faults


def _check(vectors: np.ndarray, reference: np.ndarray, floor: float) -> None:
    assert vectors.shape == reference.shape
    assert np.isfinite(vectors).all()
    cosines = (vectors * reference).sum(1)
    assert cosines.min() >= floor, cosines.min()


def _states(scheduler: Scheduler) -> dict[str, tuple[str, str]]:
    return {item["lane"]: (item["state"], item["reason"]) for item in scheduler.status()}


def test_two_healthy_lanes_share_the_work(work: Any) -> None:
    token_ids, reference = work
    with Scheduler(["cpu", "numpy"]) as scheduler:
        scheduler.start()
        states = _states(scheduler)
        assert states["cpu"][0] == states["numpy"][0] == "ready"
        status = {item["lane"]: item for item in scheduler.status()}
        assert status["cpu"]["min_cosine"] >= 0.98 and status["numpy"]["min_cosine"] >= 0.999
        assert status["cpu"]["rate_tokens_per_s"] > 0
        _check(scheduler.embed(token_ids), reference, 0.98)


def test_kill_9_mid_run_loses_no_chunk(work: Any) -> None:
    token_ids, reference = work
    killed: list[int] = []
    with Scheduler(["cpu", "numpy"]) as scheduler:
        scheduler.start()

        def kill_cpu_once(done: int, total: int) -> None:
            lane = scheduler.lanes["cpu"]
            if not killed and done > 0 and lane.process is not None and lane.in_flight:
                killed.append(lane.process.pid)
                os.kill(lane.process.pid, signal.SIGKILL)

        scheduler.progress = kill_cpu_once
        vectors = scheduler.embed(token_ids)
        assert killed
        state, reason = _states(scheduler)["cpu"]
        assert state == "failed" and "worker exited (-9)" in reason
    _check(vectors, reference, 0.98)


def test_a_worker_dying_on_a_batch_loses_no_chunk(work: Any, faults: Any) -> None:
    token_ids, reference = work
    faults("cpu:batch:2")
    with Scheduler(["cpu", "numpy"]) as scheduler:
        scheduler.start()
        vectors = scheduler.embed(token_ids)
        assert _states(scheduler)["cpu"][0] == "failed"
    _check(vectors, reference, 0.98)


def test_a_hung_batch_is_requeued_after_its_deadline(work: Any, faults: Any) -> None:
    token_ids, reference = work
    faults("cpu:hang:60000")
    with Scheduler(["cpu", "numpy"], deadline=6.0) as scheduler:
        scheduler.start()
        vectors = scheduler.embed(token_ids)
        state, reason = _states(scheduler)["cpu"]
        assert state == "failed" and "missed its 6 s batch deadline" in reason
    _check(vectors, reference, 0.999)  # all of it done by the fp32 lane


def test_a_poisoned_lane_is_refused_at_admission(work: Any, faults: Any) -> None:
    token_ids, reference = work
    faults("cpu:poison:nan")
    with Scheduler(["cpu", "numpy"]) as scheduler:
        scheduler.start()
        state, reason = _states(scheduler)["cpu"]
        assert state == "refused"
        assert "32 known-answer chunk(s) under the floor 0.98" in reason
        assert "chunk 0 (-1.0000)" in reason
        (status,) = [item for item in scheduler.status() if item["lane"] == "cpu"]
        assert len(status["below_floor"]) == 32
        _check(scheduler.embed(token_ids[:8]), reference[:8], 0.999)


def test_nan_rows_from_a_lane_are_re_embedded_on_the_cpu(work: Any, faults: Any) -> None:
    """The sim lane (the ANE stand-in) passes admission, then returns NaN; its rows go
    to the CPU lane, started for them."""
    token_ids, reference = work
    faults("sim:nan-after:1")
    with Scheduler(["sim"]) as scheduler:
        scheduler.start()
        assert _states(scheduler)["sim"][0] == "ready"
        vectors = scheduler.embed(token_ids[:12])
        assert "cpu" in scheduler.lanes and _states(scheduler)["cpu"][0] == "ready"
    _check(vectors, reference[:12], 0.98)


def test_a_malformed_frame_drops_the_worker_with_a_reason(work: Any, faults: Any) -> None:
    token_ids, reference = work
    faults("cpu:malformed:1")
    with Scheduler(["cpu", "numpy"]) as scheduler:
        scheduler.start()
        vectors = scheduler.embed(token_ids)
        state, reason = _states(scheduler)["cpu"]
        assert state == "failed" and reason.startswith("malformed frame: result frame")
    _check(vectors, reference, 0.999)


def test_when_every_lane_fails_the_error_says_why(work: Any, faults: Any) -> None:
    token_ids, _ = work
    faults("cpu:load")
    with Scheduler(["cpu"]) as scheduler, pytest.raises(LaneError) as raised:
        scheduler.embed(token_ids[:4])
    assert "no lane can embed: cpu: worker exited (3)" in str(raised.value)


def test_an_idle_worker_exits_and_a_new_one_starts(
    work: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    token_ids, reference = work
    monkeypatch.setenv("ANEKIT_LANE_IDLE", "1")
    with Scheduler(["numpy"]) as scheduler:
        scheduler.start()
        first = scheduler.lanes["numpy"].process
        assert first is not None
        deadline = time.monotonic() + 30
        while first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert first.returncode == 0  # left on its own after a second of idleness
        vectors = scheduler.embed(token_ids[:4])
        assert scheduler.lanes["numpy"].state == "ready"
    _check(vectors, reference[:4], 0.999)


def test_embedder_with_lanes(work: Any) -> None:
    _, reference = work
    texts = known_answers.load().texts[:8]
    with Embedder(lanes=["cpu"]) as embedder:
        vectors = embedder.encode(texts)
        assert embedder.scheduler is not None
    _check(vectors, reference[:8], 0.98)


def test_lanes_longer_than_the_known_answers_are_admitted(work: Any) -> None:
    """The fixture is checked at its own 256 tokens whatever the lane's length."""
    token_ids, reference = work
    with Scheduler(["numpy"], max_length=512) as scheduler:
        scheduler.start()
        (status,) = scheduler.status()
        assert status["state"] == "ready", status["reason"]
        assert status["min_cosine"] >= 0.99999
        _check(scheduler.embed(token_ids[:4]), reference[:4], 0.99999)


def test_another_model_is_admitted_against_its_own_fp32_reference(tmp_path: Any) -> None:
    from tinybert import tiny_bert

    folder = tiny_bert(tmp_path / "tiny-bert")
    texts = known_answers.load().texts[:6]
    embedder = Embedder(folder, backend="numpy")
    with Scheduler(["cpu", "numpy"], model=folder) as scheduler:
        scheduler.start()
        status = {item["lane"]: item for item in scheduler.status()}
        assert status["numpy"]["state"] == "ready" and status["numpy"]["min_cosine"] > 0.99999
        assert status["cpu"]["state"] == "ready", status["cpu"]["reason"]
        vectors = scheduler.embed(embedder.tokenize(texts))
    assert vectors.shape == (6, 32)
    _check(vectors, embedder.encode(texts), 0.98)


@pytest.mark.gpu
def test_the_gpu_lane_is_admitted_with_cuda(work: Any) -> None:
    token_ids, reference = work
    with Scheduler(["gpu"]) as scheduler:
        scheduler.start()
        (status,) = scheduler.status()
        assert status["state"] == "ready", status["reason"]
        # what the worker's sessions report, not a label: CUDA runs them
        assert status["providers"][0] == "CUDAExecutionProvider", status
        assert status["device"] == "GPU (ONNX Runtime CUDA fp32)"
        _check(scheduler.embed(token_ids), reference, 0.999)


def test_a_worker_that_cannot_load_its_model_says_why_in_one_line(tmp_path: Any) -> None:
    from tinybert import tiny_bert

    folder = tiny_bert(tmp_path / "tiny-bert")
    (folder / "model.safetensors").write_bytes(b"not safetensors")
    with Scheduler(["numpy"], model=folder) as scheduler:
        scheduler.start()
        ((state, reason),) = _states(scheduler).values()
    assert state == "failed"
    assert reason.startswith("worker exited (2); stderr: ModelError: ")
    assert "model.safetensors" in reason and "Traceback" not in reason
