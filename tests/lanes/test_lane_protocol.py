"""The lane wire format, fault parsing and retry timing (no worker processes)."""

from __future__ import annotations

import io
import queue
import struct
import sys
import threading

import numpy as np
import pytest

from anekit.errors import LaneError
from anekit.lanes import faults, protocol, unavailable_reason
from anekit.lanes.lane import RESTARTS, RETRY_SECONDS, WRONG_ANSWERS, Event, Lane


def test_batch_frames_round_trip() -> None:
    rows = [[101, 7, 102], [101, 102], list(range(101, 400))]
    batch_id, decoded = protocol.decode_batch(protocol.batch_frame(42, rows))
    assert batch_id == 42 and decoded == rows


def test_result_frames_round_trip() -> None:
    vectors = np.random.default_rng(0).standard_normal((3, 384)).astype(np.float32)
    result = protocol.decode_result(protocol.result_frame(7, vectors))
    assert result.batch_id == 7 and result.error is None
    assert result.vectors is not None
    np.testing.assert_array_equal(result.vectors, vectors)
    failed = protocol.decode_result(protocol.error_frame(8, "out of memory"))
    assert failed.batch_id == 8 and failed.vectors is None and failed.error == "out of memory"


def test_frames_over_the_limit_are_refused() -> None:
    with pytest.raises(protocol.ProtocolError, match="above the"):
        protocol.write_frame(io.BytesIO(), b"B" + bytes(protocol.MAX_FRAME))
    announced = io.BytesIO(struct.pack("<I", protocol.MAX_FRAME + 1) + b"B")
    with pytest.raises(protocol.ProtocolError, match="the limit is"):
        protocol.read_frame(announced)


def test_truncated_and_malformed_frames_are_refused() -> None:
    stream = io.BytesIO()
    protocol.write_frame(stream, protocol.batch_frame(1, [[1, 2, 3]]))
    stream.seek(0)
    assert protocol.read_frame(stream) is not None
    assert protocol.read_frame(stream) is None  # clean end
    with pytest.raises(protocol.ProtocolError, match="inside a frame"):
        protocol.read_frame(io.BytesIO(struct.pack("<I", 10) + b"B123"))
    with pytest.raises(protocol.ProtocolError, match="batch frame is malformed"):
        protocol.decode_batch(protocol.batch_frame(1, [[1, 2, 3]])[:-6])
    with pytest.raises(protocol.ProtocolError, match="batch frame is truncated"):
        protocol.decode_batch(protocol.BATCH + b"\x01")
    with pytest.raises(protocol.ProtocolError, match="need"):
        protocol.decode_result(protocol.result_frame(1, np.zeros((2, 4), np.float32))[:-4])
    with pytest.raises(protocol.ProtocolError, match="not JSON"):
        protocol.decode_json(b"H{oops")


def test_fault_specs_are_parsed_per_lane() -> None:
    text = "cpu:batch:3, sim:hang:250,cpu:poison:zero,numpy:nan-after:2,gpu:malformed:1,ane:load"
    assert faults.parse(text, "cpu") == faults.Faults(die_at=3, poison="zero")
    assert faults.parse(text, "sim").hang_ms == 250
    assert faults.parse(text, "numpy").nan_after == 2
    assert faults.parse(text, "gpu").malformed_at == 1
    assert faults.parse(text, "ane").load
    assert faults.parse(None, "cpu") == faults.Faults()
    with pytest.raises(LaneError, match="cannot read 'cpu:explode'"):
        faults.parse("cpu:explode", "cpu")


def test_a_failed_lane_retries_after_ten_minutes() -> None:
    now = [1000.0]
    lane = Lane("cpu", queue.Queue[Event](), clock=lambda: now[0])
    assert lane.can_start()
    lane.in_flight[5] = now[0] + 30
    assert lane.fail("worker exited (137)") == [5]
    assert lane.state == "failed" and not lane.can_start()
    now[0] += RETRY_SECONDS - 1
    assert not lane.can_start()
    now[0] += 1
    assert lane.can_start()
    lane.state = "refused"
    assert not lane.can_start()  # refused at admission: not retried


def test_a_lane_that_fails_every_batch_is_spent_however_slowly_it_fails() -> None:
    """A worker that hangs on every batch fails once per 30 s deadline plus a start:
    never 4 failures in 60 s. Failures in a row without a batch answered spend the
    budget all the same (before, the lane restarted forever)."""
    now = [0.0]
    lane = Lane("cpu", queue.Queue[Event](), deadline=30, clock=lambda: now[0])
    lane.admitted_once = True
    for _ in range(RESTARTS):
        lane.crash("missed its 30 s batch deadline")
        assert lane.state == "restarting"
        now[0] += 31.6
    lane.crash("missed its 30 s batch deadline")
    assert lane.state == "failed"
    assert lane.reason == (
        "missed its 30 s batch deadline (its 3 restarts are spent: 4 failures in a row, "
        "no batch answered)"
    )


def test_a_batch_answered_between_slow_failures_keeps_the_lane() -> None:
    """Failures far apart with batches answered between them are a lane that works."""
    now = [0.0]
    lane = Lane("cpu", queue.Queue[Event](), clock=lambda: now[0])
    lane.admitted_once = True
    for _ in range(3 * RESTARTS):
        lane.crash("worker exited (-9)")
        assert lane.state == "restarting"
        lane.answered()
        now[0] += 31.6
    # An uncharged failure (the data's: a chunk that kills workers) is not counted.
    for _ in range(3 * RESTARTS):
        lane.crash("worker exited (-9)", charge=False)
    assert lane.state == "restarting" and lane.failures_in_a_row == 0


def test_wrong_answers_in_a_row_are_counted_until_a_good_one() -> None:
    lane = Lane("ane", queue.Queue[Event]())
    for _ in range(WRONG_ANSWERS):
        assert not lane.wrong_answer()
    lane.answered()  # a good batch: the count starts again
    for _ in range(WRONG_ANSWERS):
        assert not lane.wrong_answer()
    assert lane.wrong_answer()  # one more in a row: the scheduler fails the lane


def test_deadlines_and_silent_starts_are_overdue() -> None:
    now = [0.0]
    lane = Lane("cpu", queue.Queue[Event](), deadline=30, clock=lambda: now[0])
    lane.state = "ready"
    lane.in_flight[1] = 30.0
    now[0] = 29.0
    assert not lane.overdue()
    now[0] = 31.0
    assert lane.overdue()


def test_default_lanes_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from anekit.lanes import default_lanes

    monkeypatch.setenv("ANEKIT_LANES", "numpy, cpu")
    assert default_lanes() == ["numpy", "cpu"]
    monkeypatch.delenv("ANEKIT_LANES")
    assert default_lanes() == (["ane"] if unavailable_reason("ane") is None else ["cpu"])


def test_a_worker_that_stops_reading_never_blocks_the_scheduler(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Frames larger than the pipe's buffer (64 KiB on Linux) for a worker hung
    mid-batch: submit returns at once (a writer thread blocks instead), so the
    scheduler still sees the deadline pass and kills the worker."""
    hung = [sys.executable, "-c", "import time; time.sleep(120)"]  # never reads stdin
    monkeypatch.setattr(Lane, "command", lambda self: hung)
    now = [0.0]
    lane = Lane("cpu", queue.Queue(), deadline=5.0, clock=lambda: now[0])
    lane.start()
    lane.state = "ready"  # as if admitted
    rows = [[101] * 256] * 256  # a 256 KiB frame
    finished = threading.Event()

    def submit_three() -> None:
        for batch_id in range(3):
            lane.submit(batch_id, rows)
        finished.set()

    threading.Thread(target=submit_three, daemon=True).start()
    try:
        assert finished.wait(timeout=20), "submit blocked on a worker that does not read"
        now[0] = 6.0
        assert lane.overdue()
    finally:
        lane.stop()
    assert lane.process is None


@pytest.mark.parametrize(
    ("output", "exit_code", "expected"),
    [
        # Died while writing a result: a death (its batch may have killed it).
        (b"\x10\x00\x00\x00R\x00", 5, {"reason": "worker exited (5): ", "code": 5}),
        # A whole frame that is not a result: the worker's own fault.
        (b"\x02\x00\x00\x00R\x00", 0, {"reason": "malformed frame: ", "malformed": True}),
    ],
)
def test_a_truncated_frame_is_a_death_and_a_malformed_one_the_workers_fault(
    monkeypatch: pytest.MonkeyPatch, output: bytes, exit_code: int, expected: dict[str, object]
) -> None:
    """The scheduler charges a malformed frame to the lane and never bisects its batch,
    so a frame cut short by the worker's death must not be taken for one."""
    script = (
        f"import sys, time; sys.stdout.buffer.write({output!r}); sys.stdout.flush(); "
        f"sys.exit({exit_code}) if {exit_code} else time.sleep(60)"
    )
    monkeypatch.setattr(Lane, "command", lambda self: [sys.executable, "-c", script])
    events: queue.Queue[Event] = queue.Queue()
    lane = Lane("cpu", events)
    lane.start()
    try:
        event = events.get(timeout=30)
    finally:
        lane.stop()
    assert event.kind == "failed"
    assert event.message["reason"].startswith(str(expected["reason"]))
    assert event.message.get("code") == expected.get("code")
    assert event.message.get("malformed", False) == expected.get("malformed", False)
