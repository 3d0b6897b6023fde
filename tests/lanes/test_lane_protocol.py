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
from anekit.lanes.lane import RETRY_SECONDS, Event, Lane


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
