"""The scheduler: texts in, vectors out, over whichever lanes are healthy.

Chunks are taken in windows of 64, each window sorted by token count; each lane
gets batches sized to take about 0.2 s at its measured rate, with two batches in
flight. A lane that crashes, misses a batch deadline or breaks the protocol is
dropped and its batches go back to the front of the queue. Rows that come back as
NaN or zero vectors are embedded again on the CPU lane (started for it if needed).
Results come back in input order. When no lane is left, :class:`LaneError` says why
each one failed.
"""

from __future__ import annotations

import os
import queue
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anekit.errors import LaneError
from anekit.lanes.engines import unavailable_reason
from anekit.lanes.lane import Event, Lane

WINDOW = 64
TARGET_BATCH_SECONDS = 0.2
IN_FLIGHT = 2
FALLBACK = "cpu"
LANES_VARIABLE = "ANEKIT_LANES"
#: Tokens per second assumed for a lane before its hello reports a rate.
DEFAULT_RATE = 2000.0
MAX_BATCH_ROWS = 256


def default_lanes() -> list[str]:
    """``ANEKIT_LANES`` (comma-separated) when set; else the ANE lane where there is
    one (the CPU lane stays off beside it: seed 000 measured 236 -> 79 chunks/s with
    both on), else the CPU lane."""
    configured = os.environ.get(LANES_VARIABLE, "")
    names = [name.strip() for name in configured.split(",") if name.strip()]
    if names:
        return names
    return ["ane"] if unavailable_reason("ane") is None else [FALLBACK]


class Scheduler:
    """Runs lanes and spreads embedding work over them."""

    def __init__(
        self,
        lanes: Sequence[str] | None = None,
        *,
        model: str | Path | None = None,
        max_length: int | None = None,
        deadline: float = 30.0,
        threads: int | None = None,
        progress: Callable[[int, int], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        names = list(lanes) if lanes else default_lanes()
        if len(set(names)) != len(names):
            raise LaneError(f"lanes must be distinct, got {names}")
        for name in names:
            reason = unavailable_reason(name)
            if reason is not None:
                raise LaneError(f"lane {name}: {reason}")
        self.events: queue.Queue[Event] = queue.Queue()
        self._options = {"model": model, "max_length": max_length, "threads": threads}
        self.deadline = deadline
        self.clock = clock
        self.lanes: dict[str, Lane] = {name: self._lane(name) for name in names}
        self.progress = progress
        self._next_id = 0

    def _lane(self, name: str) -> Lane:
        return Lane(name, self.events, deadline=self.deadline, clock=self.clock, **self._options)  # type: ignore[arg-type]

    # -- lifecycle -------------------------------------------------------------------

    def start(self, wait: bool = True, timeout: float = 600.0) -> None:
        """Start every lane that can start; with ``wait``, until each has said hello."""
        for lane in self.lanes.values():
            if lane.can_start():
                lane.start()
        if not wait:
            return
        limit = self.clock() + timeout
        while any(lane.state == "starting" for lane in self.lanes.values()):
            if self.clock() > limit:
                break
            self._handle(self._next_event(0.1), {}, deque(), deque(), {})
            self._check_deadlines({}, deque())

    def close(self) -> None:
        for lane in self.lanes.values():
            lane.stop()

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def status(self) -> list[dict[str, Any]]:
        return [lane.describe() for lane in self.lanes.values()]

    # -- work ------------------------------------------------------------------------

    def embed(self, token_ids: Sequence[Sequence[int]]) -> np.ndarray:
        """Unit vectors for tokenized texts, in input order."""
        count = len(token_ids)
        results: dict[int, np.ndarray] = {}
        pending: deque[int] = deque()
        for start in range(0, count, WINDOW):
            window = range(start, min(start + WINDOW, count))
            pending.extend(sorted(window, key=lambda index: len(token_ids[index])))
        again: deque[int] = deque()  # rows to embed once more, on the CPU lane
        batches: dict[int, tuple[str, list[int], float]] = {}
        while len(results) < count:
            self._keep_lanes_going(pending, again)
            for lane in self.lanes.values():
                while lane.state == "ready" and len(lane.in_flight) < IN_FLIGHT:
                    source = again if lane.name == FALLBACK and again else pending
                    rows = self._take(source, token_ids, lane)
                    if not rows:
                        break
                    batch_id = self._next_id
                    self._next_id += 1
                    batches[batch_id] = (lane.name, rows, self.clock())
                    try:
                        lane.submit(batch_id, [token_ids[index] for index in rows])
                    except (OSError, LaneError) as error:
                        self._requeue(
                            lane.fail(f"could not send a batch: {error}"), batches, pending
                        )
            event = self._next_event(0.05)
            self._handle(event, batches, pending, again, results, token_ids)
            self._check_deadlines(batches, pending)
            if self.progress is not None:
                self.progress(len(results), count)
        if count == 0:
            return np.zeros((0, 0), np.float32)
        return np.stack([results[index] for index in range(count)])

    def _take(
        self, source: deque[int], token_ids: Sequence[Sequence[int]], lane: Lane
    ) -> list[int]:
        budget = (lane.rate or DEFAULT_RATE) * TARGET_BATCH_SECONDS
        rows: list[int] = []
        tokens = 0
        while source and len(rows) < MAX_BATCH_ROWS:
            length = len(token_ids[source[0]])
            if rows and tokens + length > budget:
                break
            rows.append(source.popleft())
            tokens += length
        return rows

    def _next_event(self, timeout: float) -> Event | None:
        try:
            return self.events.get(timeout=timeout)
        except queue.Empty:
            return None

    def _requeue(
        self, owed: list[int], batches: dict[int, tuple[str, list[int], float]], pending: deque[int]
    ) -> None:
        for batch_id in sorted(owed, reverse=True):
            entry = batches.pop(batch_id, None)
            if entry is not None:
                pending.extendleft(reversed(entry[1]))

    def _handle(
        self,
        event: Event | None,
        batches: dict[int, tuple[str, list[int], float]],
        pending: deque[int],
        again: deque[int],
        results: dict[int, np.ndarray],
        token_ids: Sequence[Sequence[int]] = (),
    ) -> None:
        if event is None:
            return
        lane = self.lanes.get(event.lane)
        if lane is None or not lane.current(event.pid):
            return  # from a worker the lane has already replaced
        if event.kind == "hello":
            lane.hello = event.message
            if event.message.get("admitted"):
                lane.state = "ready"
                lane.rate = float(event.message.get("rate_tokens_per_s") or 0.0)
            else:
                below = event.message.get("below_floor", [])
                listed = ", ".join(
                    f"chunk {item['chunk']} ({item['cosine']:.4f})" for item in below[:8]
                )
                lane.state = "refused"
                lane.reason = (
                    f"refused at admission: {len(below)} known-answer chunk(s) under the "
                    f"floor {event.message.get('floor')}: {listed}"
                )
                lane.stop()
                lane.state = "refused"
        elif event.kind == "failed":
            if lane.state == "ready" and event.message.get("code") == 0:
                # An idle worker left on its own (perhaps as a batch was on its way):
                # requeue what it owed, and start a new one when there is work.
                self._requeue(list(lane.in_flight), batches, pending)
                lane.in_flight.clear()
                lane.stop()
            elif lane.state in ("starting", "ready"):
                tail = lane.stderr_tail()
                reason = str(event.message.get("reason", "failed"))
                self._requeue(
                    lane.fail(reason + (f"; stderr: {tail}" if tail else "")), batches, pending
                )
        elif event.kind == "result" and event.result is not None:
            batch_id = event.result.batch_id
            entry = batches.pop(batch_id, None)
            lane.in_flight.pop(batch_id, None)
            # The worker starts on its next batch now: its deadline counts from here,
            # not from when it was queued behind this one.
            restart = self.clock() + lane.deadline
            for queued in lane.in_flight:
                lane.in_flight[queued] = max(lane.in_flight[queued], restart)
            if entry is None:
                return  # from a lane already dropped: its rows were requeued
            _, rows, sent = entry
            if event.result.error is not None or event.result.vectors is None:
                pending.extendleft(reversed(rows))
                self._requeue(lane.fail(f"batch error: {event.result.error}"), batches, pending)
                return
            vectors = event.result.vectors
            if vectors.shape[0] != len(rows):
                pending.extendleft(reversed(rows))
                self._requeue(
                    lane.fail(f"answered {vectors.shape[0]} rows for {len(rows)}"), batches, pending
                )
                return
            bad = ~np.isfinite(vectors).all(axis=1) | (np.abs(vectors).sum(axis=1) == 0)
            for row, index in enumerate(rows):
                if bad[row]:
                    if lane.name == FALLBACK:
                        raise LaneError(f"the {FALLBACK} lane returned NaN or zero for row {index}")
                    again.append(index)
                else:
                    results[index] = vectors[row]
            elapsed = max(self.clock() - sent, 1e-6)
            tokens = sum(len(token_ids[index]) for index in rows) if token_ids else 0
            if tokens:
                observed = tokens / elapsed * min(len(lane.in_flight) + 1, IN_FLIGHT)
                lane.rate = 0.7 * lane.rate + 0.3 * observed if lane.rate else observed

    def _check_deadlines(
        self, batches: dict[int, tuple[str, list[int], float]], pending: deque[int]
    ) -> None:
        for lane in self.lanes.values():
            if lane.state in ("starting", "ready") and lane.overdue():
                what = (
                    "said nothing while starting"
                    if lane.state == "starting"
                    else (f"missed its {lane.deadline:g} s batch deadline")
                )
                self._requeue(lane.fail(what), batches, pending)

    def _keep_lanes_going(self, pending: deque[int], again: deque[int]) -> None:
        if again and FALLBACK not in self.lanes:
            self.lanes[FALLBACK] = self._lane(FALLBACK)
        for lane in self.lanes.values():
            if lane.state == "ready" and lane.exited_idle():
                lane.stop()  # it left while idle; a new worker starts below
            needed = pending or (again and lane.name == FALLBACK)
            if needed and lane.can_start():
                lane.start()
        usable = [lane for lane in self.lanes.values() if lane.state in ("starting", "ready")]
        if usable:
            return
        if FALLBACK not in self.lanes and unavailable_reason(FALLBACK) is None:
            self.lanes[FALLBACK] = self._lane(FALLBACK)
            self.lanes[FALLBACK].start()
            return
        reasons = "; ".join(
            f"{lane.name}: {lane.reason or lane.state}" for lane in self.lanes.values()
        )
        raise LaneError(f"no lane can embed: {reasons}")
