"""Fault injection (ANEKIT_FAULT) against real worker processes: no fault loses a chunk.

The CPU lane (ONNX Runtime int8) and the NumPy fp32 lane do the work; the ``sim``
lane (the fp16 package in the simulator) stands in for the ANE lane.
"""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from anekit.embedder import Embedder
from anekit.errors import EmbeddingFailed, LaneError
from anekit.lanes import Scheduler
from anekit.lanes import lane as lane_module
from anekit.lanes import scheduler as scheduler_module
from anekit.lanes.protocol import ProtocolError, Result
from anekit.models import known_answers


@pytest.fixture(scope="module")
def work() -> tuple[list[list[int]], np.ndarray]:
    """48 tokenized chunks and their fp32 reference vectors: the known answers' stored
    ones (the NumPy path's, checked against sentence-transformers in
    tests/models/test_model_reference.py), not 16 s of NumPy embedding again."""
    known = known_answers.load()
    token_ids = Embedder(runtime="numpy").tokenize(known.texts + known.texts[:16])
    return token_ids, np.concatenate([known.vectors, known.vectors[:16]])


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
        # Each row says which lane made it; its numerics show it (numpy is fp32, the
        # reference's own path; cpu is int8).
        rows = list(scheduler.stream(token_ids))
        assert [index for index, *_ in rows] == list(range(len(token_ids)))
        made_by = {lane for *_, lane in rows}
        assert made_by and made_by <= {"cpu", "numpy"}
        for index, vector, why, lane in rows:
            assert why is None and vector is not None
            cosine = float(vector @ reference[index]) / float(np.linalg.norm(reference[index]))
            assert cosine >= (0.99999 if lane == "numpy" else 0.98)


def _kill_once(scheduler: Scheduler, lane_name: str, killed: list[int]) -> None:
    """Kill ``lane_name``'s worker with SIGKILL once, mid-batch, after a first result."""

    def kill(done: int, total: int) -> None:
        lane = scheduler.lanes[lane_name]
        if not killed and done > 0 and lane.process is not None and lane.in_flight:
            killed.append(lane.process.pid)
            os.kill(lane.process.pid, signal.SIGKILL)

    scheduler.progress = kill


def test_kill_9_mid_batch_with_one_lane_loses_no_chunk(work: Any) -> None:
    """The default Linux lane set is the CPU lane alone: its worker, killed mid-batch,
    is restarted for the same run and every vector comes back."""
    token_ids, reference = work
    killed: list[int] = []
    with Scheduler(["cpu"]) as scheduler:
        scheduler.start()
        _kill_once(scheduler, "cpu", killed)
        vectors = scheduler.embed(token_ids)
        (status,) = scheduler.status()
    assert killed and status["pid"] != killed[0]  # a new worker finished the run
    assert status["state"] == "ready" and status["restarts"] == 1
    assert status["reason"] == "worker exited (-9)"
    summary = scheduler.summary
    assert summary.embedded == len(token_ids) and not summary.failed
    assert summary.restarts == {"cpu": 1} and summary.retried > 0
    assert summary.fallback is None
    _check(vectors, reference, 0.98)


def test_a_worker_killed_while_starting_is_restarted_not_failed(work: Any) -> None:
    """kill -9 before the lane was ever admitted is a crash, not a model that cannot
    load: the lane restarts and finishes the run (no in-process fallback)."""
    token_ids, reference = work
    with Scheduler(["cpu"]) as scheduler:
        scheduler.start(wait=False)
        first = scheduler.lanes["cpu"].process
        assert first is not None
        os.kill(first.pid, signal.SIGKILL)
        vectors = scheduler.embed(token_ids[:16])
        (status,) = scheduler.status()
    assert status["state"] == "ready" and status["restarts"] == 1
    assert status["reason"] == "worker exited (-9)"
    assert scheduler.summary.fallback is None
    _check(vectors, reference[:16], 0.98)


@pytest.mark.slow  # 30-100 s of worker restarts
def test_a_worker_dying_on_every_second_batch_loses_no_chunk(work: Any, faults: Any) -> None:
    token_ids, reference = work
    faults("cpu:batch:2")
    with Scheduler(["cpu"]) as scheduler:
        scheduler.start()
        vectors = scheduler.embed(token_ids)
    assert scheduler.summary.restarts.get("cpu", 0) >= 1
    assert not scheduler.summary.failed
    _check(vectors, reference, 0.98)


@pytest.mark.slow  # 30-100 s of worker restarts
def test_a_hung_batch_is_requeued_after_its_deadline(work: Any, faults: Any) -> None:
    token_ids, reference = work
    faults("cpu:hang:600000")
    # The deadline leaves a loaded 2-core machine time for the fp32 lane's batches
    # (at 6 s its workers were killed too); the hang outlasts it by far.
    with Scheduler(["cpu", "numpy"], deadline=20.0) as scheduler:
        scheduler.start()
        vectors = scheduler.embed(token_ids)
        _, reason = _states(scheduler)["cpu"]
        assert reason.startswith("missed its 20 s batch deadline")
    _check(vectors, reference, 0.999)  # all of it done by the fp32 lane


def _token_of_one_row(token_ids: list[list[int]], row: int) -> int:
    """A token id found in ``row`` and in no other row."""
    counts = Counter(token for ids in token_ids for token in set(ids))
    return next(token for token in token_ids[row] if counts[token] == 1)


def test_a_chunk_that_kills_every_worker_is_reported_and_the_rest_embedded(
    work: Any, faults: Any
) -> None:
    token_ids, reference = work
    token_ids, reference = token_ids[:20], reference[:20]
    faults(f"cpu:kill-on:{_token_of_one_row(token_ids, 13)}")
    notes: list[str] = []
    with Scheduler(["cpu"]) as scheduler:
        scheduler.notify = notes.append
        with pytest.raises(EmbeddingFailed) as raised:
            scheduler.embed(token_ids)
    failed = raised.value.failed
    assert list(failed) == [13]
    assert failed[13] == "embedding this chunk alone killed the cpu lane's worker 2 time(s)"
    vectors = raised.value.vectors
    assert np.isnan(vectors[13]).all()
    others = [index for index in range(20) if index != 13]
    _check(vectors[others], reference[others], 0.98)
    assert scheduler.summary.failed == failed and scheduler.summary.embedded == 19
    # Reported once, with the results (the CLI names its line), not also as a note.
    assert not [note for note in notes if "chunk 13" in note]


@pytest.mark.slow  # 30-100 s of worker restarts
def test_a_chunk_that_kills_one_lane_is_embedded_by_the_cpu_lane(work: Any, faults: Any) -> None:
    """A chunk that kills the numpy lane's worker (standing in for an ANE driver crash)
    is isolated by bisection and embedded on the CPU lane, started for it."""
    token_ids, reference = work
    token_ids, reference = token_ids[:20], reference[:20]
    faults(f"numpy:kill-on:{_token_of_one_row(token_ids, 6)}")
    with Scheduler(["numpy"]) as scheduler:
        vectors = scheduler.embed(token_ids)
        assert _states(scheduler)["cpu"][0] == "ready"
    assert "chunk 6 killed the numpy lane's worker 2 times; trying it on the cpu lane" in (
        scheduler.summary.notes
    )
    _check(vectors, reference, 0.98)
    assert (vectors[6] * reference[6]).sum() < 0.9999  # int8 weights: the CPU lane's answer


@pytest.mark.slow  # 30-100 s of worker restarts
def test_a_lane_that_keeps_failing_spends_its_restarts_and_the_run_finishes(
    work: Any, faults: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every worker dies on its first batch: 3 restarts, then the lane is failed and
    the in-process CPU engine finishes the run."""
    monkeypatch.setattr(lane_module, "BACKOFF_SECONDS", 0.05)
    token_ids, reference = work
    faults("cpu:batch:1")
    with Scheduler(["cpu"]) as scheduler:
        vectors = scheduler.embed(token_ids[:16])
        (status,) = scheduler.status()
    assert status["state"] == "failed" and status["restarts"] == lane_module.RESTARTS
    assert status["reason"].endswith("(its 3 restarts in 60 s are spent)")
    assert scheduler.summary.fallback == "in process: CPU (ONNX Runtime int8)"
    with Scheduler(["cpu"]) as again:  # the in-process engine's rows: the CPU lane's model
        assert {lane for *_, lane in again.stream(token_ids[:4])} == {"cpu"}
    _check(vectors, reference[:16], 0.98)


@pytest.fixture
def small_budget(monkeypatch: pytest.MonkeyPatch) -> int:
    """One restart and a short backoff, so that spending a lane takes two workers."""
    monkeypatch.setattr(lane_module, "RESTARTS", 1)
    monkeypatch.setattr(lane_module, "BACKOFF_SECONDS", 0.05)
    return 1


def _stop_past(scheduler: Scheduler, lane_name: str, restarts: int) -> None:
    """Make the run raise once ``lane_name`` restarts more than ``restarts`` times (a
    lane whose restarts are never spent would otherwise run for minutes, or forever)."""

    def check(done: int, total: int) -> None:
        lane = scheduler.lanes.get(lane_name)
        assert lane is None or lane.restarts <= restarts, (
            f"{lane_name} restarted {lane.restarts} times: {lane.reason}"
        )

    scheduler.progress = check


def test_nan_from_the_cpu_lane_is_embedded_in_process_and_the_lane_retired(
    work: Any, faults: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CPU lane passes admission, answers its first batch, then answers NaN. No row
    is lost and no NaN is kept: the NaN batches are embedded in this process, and after
    WRONG_ANSWERS + 1 of them in a row the lane is failed and this process finishes
    the run (before, the CPU lane's NaN rows were failed: 40 of 48 lost)."""
    token_ids, reference = work
    monkeypatch.setattr(scheduler_module, "MAX_BATCH_ROWS", 8)  # batches enough for 4 NaN
    faults("cpu:nan-after:2")
    with Scheduler(["cpu"]) as scheduler:
        vectors = scheduler.embed(token_ids)
        (status,) = scheduler.status()
    _check(vectors, reference, 0.98)
    assert status["state"] == "failed" and status["restarts"] == 0  # no worker spent
    assert status["reason"] == "answered 4 batches in a row with NaN or zero vectors"
    summary = scheduler.summary
    assert summary.embedded == len(token_ids) and not summary.failed
    assert summary.fallback == "in process: CPU (ONNX Runtime int8)"


@pytest.mark.parametrize(("lane_name", "queue_name"), [("numpy", "again"), ("cpu", "local")])
@pytest.mark.parametrize("bad", [0.0, np.inf, np.nan])
def test_a_batch_with_one_bad_vector_keeps_none_and_goes_to_another_engine(
    lane_name: str, queue_name: str, bad: float
) -> None:
    """One zero, infinite or NaN row in a batch: none of the batch's vectors is kept,
    and its rows go to the CPU lane (from another lane) or to this process (from the
    CPU lane, never back to it). The worker is kept; the lane counts a wrong answer."""
    from anekit.lanes.scheduler import _Work

    scheduler = Scheduler(["numpy", "cpu"])  # no worker is started
    lane = scheduler.lanes[lane_name]
    lane.state, lane.admitted_once = "ready", True

    def submit(batch_id: int, rows: Any) -> None:  # the worker's stdin, skipped
        lane.in_flight[batch_id] = float("inf")

    lane.submit = submit  # type: ignore[method-assign]
    job = _Work([[101, 2000 + row, 102] for row in range(8)], scheduler.buckets)
    job.fill(8)
    rows = job.take(None, 8)
    scheduler._send(lane, job, rows, None)
    (batch_id,) = lane.in_flight
    vectors = np.ones((8, 384), np.float32)
    vectors[3, : 1 if bad else None] = bad
    scheduler._result(lane, Result(batch_id, vectors, None), job)
    assert not job.results and not job.failed
    assert sorted(getattr(job, queue_name)) == sorted(rows) == list(range(8))
    assert not getattr(job, "local" if queue_name == "again" else "again")
    assert lane.state == "ready" and lane.wrong_in_a_row == 1 and lane.served == 0


def test_a_worker_that_hangs_on_every_batch_is_spent_and_the_run_finishes(
    work: Any, faults: Any, small_budget: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every batch outlasts the deadline. With the default 30 s deadline a worker fails
    every 31.6 s, never 4 times in 60 s; here the window is shrunk below the time
    between failures in the same way. Failures in a row without a batch answered spend
    the lane, and this process finishes the run (before, a new worker every deadline,
    forever)."""
    token_ids, reference = work
    monkeypatch.setattr(lane_module, "RESTART_WINDOW", 0.01)
    faults("cpu:hang:5000")
    with Scheduler(["cpu"], deadline=1.0) as scheduler:
        _stop_past(scheduler, "cpu", small_budget)
        vectors = scheduler.embed(token_ids[:16])
        (status,) = scheduler.status()
    assert status["state"] == "failed" and status["restarts"] == small_budget
    assert status["reason"] == (
        "missed its 1 s batch deadline (its 1 restarts are spent: 2 failures in a row, "
        "no batch answered)"
    )
    assert scheduler.summary.fallback == "in process: CPU (ONNX Runtime int8)"
    assert not scheduler.summary.failed
    _check(vectors, reference[:16], 0.98)


def test_malformed_frames_cost_workers_not_bisection(
    work: Any, faults: Any, small_budget: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every worker's second reply is malformed. That is the worker's fault, never its
    batch's: each costs one charged restart, the batches go back as they were, and
    once the budget is spent this process finishes the run. Before, a malformed reply
    to a suspect batch counted against the data: the batch was halved down to single
    chunks, a fresh worker for every step, uncharged (300 short texts: 409 s)."""
    token_ids, reference = work
    monkeypatch.setattr(scheduler_module, "MAX_BATCH_ROWS", 8)
    faults("cpu:malformed:2")
    with Scheduler(["cpu"]) as scheduler:
        _stop_past(scheduler, "cpu", small_budget)
        vectors = scheduler.embed(token_ids)
        (status,) = scheduler.status()
    assert status["state"] == "failed" and status["restarts"] == small_budget
    assert status["reason"].startswith("malformed frame: result frame is truncated")
    assert status["reason"].endswith("(its 1 restarts in 60 s are spent)")
    assert scheduler.summary.fallback == "in process: CPU (ONNX Runtime int8)"
    assert not scheduler.summary.failed
    _check(vectors, reference, 0.98)


# ~115 s (a NumPy lane's admission on every known answer); in `make test`, the refusal of
# a poisoned lane is tests/lanes/test_lane_cli.py::test_lanes_json_reports_state_rate_and_cosine
@pytest.mark.slow
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


@pytest.mark.slow  # ~50 s: the sim lane simulates the package, then a CPU lane starts
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


@pytest.mark.slow  # 30-100 s of worker restarts
def test_a_malformed_frame_costs_a_worker_with_a_reason(work: Any, faults: Any) -> None:
    token_ids, reference = work
    faults("cpu:malformed:1")
    with Scheduler(["cpu", "numpy"]) as scheduler:
        scheduler.start()
        vectors = scheduler.embed(token_ids)
        _, reason = _states(scheduler)["cpu"]
        assert reason.startswith("malformed frame: result frame")
    _check(vectors, reference, 0.999)


def test_when_every_worker_start_fails_the_run_finishes_in_process(work: Any, faults: Any) -> None:
    token_ids, reference = work
    faults("cpu:load")
    notes: list[str] = []
    with Scheduler(["cpu"]) as scheduler:
        scheduler.notify = notes.append
        vectors = scheduler.embed(token_ids[:12])
        assert _states(scheduler)["cpu"] == ("failed", "worker exited (3)")
    assert scheduler.summary.fallback == "in process: CPU (ONNX Runtime int8)"
    with Scheduler(["cpu"]) as again:  # the in-process engine's rows: the CPU lane's model
        assert {lane for *_, lane in again.stream(token_ids[:4])} == {"cpu"}
    assert notes[-1] == (
        "no lane can embed (cpu: worker exited (3)); finishing in this process on the CPU"
    )
    _check(vectors, reference[:12], 0.98)


def test_when_nothing_can_embed_the_error_says_why(
    work: Any, faults: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from anekit.lanes import engines

    def no_engine(*args: Any) -> Any:
        raise ImportError("no onnxruntime here")

    monkeypatch.setattr(engines, "make_engine", no_engine)
    token_ids, _ = work
    faults("cpu:load")
    with Scheduler(["cpu"]) as scheduler, pytest.raises(LaneError) as raised:
        scheduler.embed(token_ids[:4])
    assert str(raised.value) == (
        "no lane can embed: cpu: worker exited (3); and the in-process CPU engine could "
        "not start: ImportError: no onnxruntime here"
    )


@pytest.mark.slow  # 30-100 s of worker restarts
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


@pytest.mark.slow  # 30-100 s of worker restarts
def test_embedder_with_lanes_raises_with_the_failed_chunks(work: Any, faults: Any) -> None:
    texts = known_answers.load().texts[:10]
    with Embedder(lanes=["cpu"]) as embedder:
        token_ids = embedder.tokenize(texts)
        faults(f"cpu:kill-on:{_token_of_one_row(token_ids, 4)}")
        with pytest.raises(EmbeddingFailed) as raised:
            embedder.encode(texts)
    assert list(raised.value.failed) == [4]
    assert raised.value.vectors.shape == (10, 384)
    kept = [index for index in range(10) if index != 4]
    _check(raised.value.vectors[kept], work[1][kept], 0.98)


@pytest.mark.slow  # 30-100 s of worker restarts
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
    embedder = Embedder(folder, runtime="numpy")
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


@pytest.mark.slow  # 30-100 s of worker restarts
def test_a_small_input_whose_chunk_kills_workers_never_reaches_the_parent(
    work: Any, faults: Any
) -> None:
    """All 8 rows are in the batch that kills the first worker, so nothing harmless is
    left to prove a fresh worker with: it is proven with the special tokens alone, and
    the chunk is then isolated on workers (not run in this process, where it could kill
    the parent)."""
    token_ids, reference = work
    same = [index for index, ids in enumerate(token_ids) if len(ids) == len(token_ids[0])][:8]
    assert len(same) == 8  # one bucket, so all 8 go out in the first batch
    token_ids, reference = [token_ids[index] for index in same], reference[same]
    faults(f"cpu:kill-on:{_token_of_one_row(token_ids, 1)}")
    with Scheduler(["cpu"]) as scheduler, pytest.raises(EmbeddingFailed) as raised:
        scheduler.embed(token_ids)
    assert list(raised.value.failed) == [1]
    assert scheduler.summary.fallback is None  # finished on lanes, not in process
    others = [index for index in range(8) if index != 1]
    _check(raised.value.vectors[others], reference[others], 0.98)


def test_an_unproven_worker_with_only_nan_rows_left_is_proven_not_starved(work: Any) -> None:
    """The CPU lane's worker failed and was replaced; the only rows left came back NaN
    from another lane and nothing is embedded yet. The fresh worker, which must prove
    itself before it gets rows that killed workers, is sent the special tokens alone,
    then the rows (before: it was sent nothing, and the run waited forever)."""
    from anekit.lanes.scheduler import _Work

    token_ids, _ = work
    scheduler = Scheduler(["cpu"])
    lane = scheduler.lanes["cpu"]
    sent: list[list[list[int]]] = []

    def submit(batch_id: int, rows: Any) -> None:  # the worker's stdin, recorded
        sent.append([list(row) for row in rows])
        lane.in_flight[batch_id] = float("inf")

    lane.submit = submit  # type: ignore[method-assign]
    lane.state, lane.served, lane.served_at_failure = "ready", 3, 3  # replaced, unproven
    job = _Work(token_ids[:8], scheduler.buckets)
    job.fill(8)
    while rows := job.take(None, 8):
        job.again.extend(rows)  # every row came back NaN elsewhere
    scheduler._feed(lane, job)
    assert sent == [[[token_ids[0][0], token_ids[0][-1]]]]  # [CLS] [SEP]: proof only
    (batch_id,) = lane.in_flight
    vectors = np.ones((1, 384), np.float32)
    scheduler._result(lane, Result(batch_id, vectors, None), job)
    scheduler._feed(lane, job)
    assert sorted(sent[1]) == sorted(list(token_ids[row]) for row in range(8))  # the NaN rows


def test_a_batch_that_could_not_be_sent_is_requeued(
    work: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A send that fails before the lane took the batch (no worker, a frame over the
    size limit) costs the worker, and the batch's rows go out again: the run finishes
    with every row (before the fix they were never requeued and the run waited forever)."""
    token_ids, reference = work
    real_submit = lane_module.Lane.submit
    refused: list[int] = []

    def submit_once_refused(self: Any, batch_id: int, rows: Any) -> None:
        if not refused and self.state == "ready":
            refused.append(batch_id)
            raise ProtocolError(f"lane {self.name}: refused before it was recorded")
        real_submit(self, batch_id, rows)

    monkeypatch.setattr(lane_module.Lane, "submit", submit_once_refused)
    result: list[np.ndarray] = []
    with Scheduler(["cpu"]) as scheduler:
        scheduler.start()
        runner = threading.Thread(
            target=lambda: result.append(scheduler.embed(token_ids)), daemon=True
        )
        runner.start()
        runner.join(timeout=60)
        hung = runner.is_alive()
    assert not hung, "the run never finished: the refused batch's rows were lost"
    assert refused
    _check(result[0], reference, 0.98)
    assert scheduler.summary.embedded == len(token_ids) and not scheduler.summary.failed
