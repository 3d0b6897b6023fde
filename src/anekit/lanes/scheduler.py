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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from anekit.errors import LaneError
from anekit.lanes import faults
from anekit.lanes.engines import unavailable_reason
from anekit.lanes.lane import Event, Lane
from anekit.lanes.protocol import Result

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


@dataclass
class _Work:
    """One :meth:`Scheduler.embed` call's state."""

    token_ids: Sequence[Sequence[int]]
    #: Rows waiting for a lane, in the order they go out.
    pending: deque[int] = field(default_factory=deque)
    #: Rows that came back NaN or zero, to embed once more on the CPU lane.
    again: deque[int] = field(default_factory=deque)
    #: Batch id -> its rows and when it was sent.
    batches: dict[int, tuple[list[int], float]] = field(default_factory=dict)
    results: dict[int, np.ndarray] = field(default_factory=dict)

    def requeue(self, batch_ids: list[int]) -> None:
        """Put these batches' rows back at the front of the queue, in order."""
        for batch_id in sorted(batch_ids, reverse=True):
            entry = self.batches.pop(batch_id, None)
            if entry is not None:
                self.pending.extendleft(reversed(entry[0]))


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
            faults.from_environment(name)  # a bad ANEKIT_FAULT is named here, not in a worker
        if model is not None:
            from anekit.models.registry import resolve

            resolve(model)  # a missing model is named here, not by each worker
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
            idle = _Work(())
            self._handle(self._next_event(0.1), idle)
            self._check_deadlines(idle)

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
        work = _Work(token_ids)
        count = len(token_ids)
        for start in range(0, count, WINDOW):
            window = range(start, min(start + WINDOW, count))
            work.pending.extend(sorted(window, key=lambda index: len(token_ids[index])))
        while len(work.results) < count:
            self._keep_lanes_going(work)
            for lane in self.lanes.values():
                while lane.state == "ready" and len(lane.in_flight) < IN_FLIGHT:
                    source = work.again if lane.name == FALLBACK and work.again else work.pending
                    rows = self._take(source, token_ids, lane)
                    if not rows:
                        break
                    batch_id = self._next_id
                    self._next_id += 1
                    work.batches[batch_id] = (rows, self.clock())
                    try:
                        lane.submit(batch_id, [token_ids[index] for index in rows])
                    except (OSError, LaneError) as error:
                        work.requeue(lane.fail(f"could not send a batch: {error}"))
            self._handle(self._next_event(0.05), work)
            self._check_deadlines(work)
            if self.progress is not None:
                self.progress(len(work.results), count)
        if count == 0:
            return np.zeros((0, 0), np.float32)
        return np.stack([work.results[index] for index in range(count)])

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

    def _handle(self, event: Event | None, work: _Work) -> None:
        if event is None:
            return
        lane = self.lanes.get(event.lane)
        if lane is None or not lane.current(event.pid):
            return  # from a worker the lane has already replaced
        if event.kind == "hello":
            self._hello(lane, event.message)
        elif event.kind == "failed":
            if lane.state == "ready" and event.message.get("code") == 0:
                # An idle worker left on its own (perhaps as a batch was on its way):
                # requeue what it owed, and start a new one when there is work.
                work.requeue(list(lane.in_flight))
                lane.in_flight.clear()
                lane.stop()
            elif lane.state in ("starting", "ready"):
                tail = lane.stderr_tail()
                reason = str(event.message.get("reason", "failed"))
                work.requeue(lane.fail(reason + (f"; stderr: {tail}" if tail else "")))
        elif event.kind == "result" and event.result is not None:
            self._result(lane, event.result, work)

    def _hello(self, lane: Lane, message: dict[str, Any]) -> None:
        lane.hello = message
        if message.get("admitted"):
            lane.state = "ready"
            lane.rate = float(message.get("rate_tokens_per_s") or 0.0)
            return
        if message.get("refused"):
            lane.stop()
            lane.state, lane.reason = "refused", str(message["refused"])
            return
        below = message.get("below_floor", [])
        listed = ", ".join(f"chunk {item['chunk']} ({item['cosine']:.4f})" for item in below[:8])
        lane.stop()
        lane.state = "refused"
        lane.reason = (
            f"refused at admission: {len(below)} known-answer chunk(s) under the "
            f"floor {message.get('floor')}: {listed}"
        )

    def _result(self, lane: Lane, result: Result, work: _Work) -> None:
        entry = work.batches.pop(result.batch_id, None)
        lane.in_flight.pop(result.batch_id, None)
        # The worker starts on its next batch now: its deadline counts from here, not
        # from when it was queued behind this one.
        restart = self.clock() + lane.deadline
        for queued in lane.in_flight:
            lane.in_flight[queued] = max(lane.in_flight[queued], restart)
        if entry is None:
            return  # from a lane already dropped: its rows were requeued
        rows, sent = entry
        vectors = result.vectors
        problem = None
        if result.error is not None or vectors is None:
            problem = f"batch error: {result.error}"
        elif vectors.shape[0] != len(rows):
            problem = f"answered {vectors.shape[0]} rows for {len(rows)}"
        if problem is not None or vectors is None:
            work.pending.extendleft(reversed(rows))
            work.requeue(lane.fail(problem or "no vectors"))
            return
        bad = ~np.isfinite(vectors).all(axis=1) | (np.abs(vectors).sum(axis=1) == 0)
        for row, index in enumerate(rows):
            if not bad[row]:
                work.results[index] = vectors[row]
            elif lane.name == FALLBACK:
                raise LaneError(f"the {FALLBACK} lane returned NaN or zero for row {index}")
            else:
                work.again.append(index)
        elapsed = max(self.clock() - sent, 1e-6)
        tokens = sum(len(work.token_ids[index]) for index in rows)
        observed = tokens / elapsed * min(len(lane.in_flight) + 1, IN_FLIGHT)
        lane.rate = 0.7 * lane.rate + 0.3 * observed if lane.rate else observed

    def _check_deadlines(self, work: _Work) -> None:
        for lane in self.lanes.values():
            if lane.state in ("starting", "ready") and lane.overdue():
                what = (
                    "said nothing while starting"
                    if lane.state == "starting"
                    else (f"missed its {lane.deadline:g} s batch deadline")
                )
                work.requeue(lane.fail(what))

    def _keep_lanes_going(self, work: _Work) -> None:
        if work.again and FALLBACK not in self.lanes:
            self.lanes[FALLBACK] = self._lane(FALLBACK)
        for lane in self.lanes.values():
            if lane.state == "ready" and lane.exited_idle():
                lane.stop()  # it left while idle; a new worker starts below
            needed = work.pending or (work.again and lane.name == FALLBACK)
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
