"""The scheduler: token ids in, vectors out in input order, over whichever lanes are
healthy, and never over none (docs/lanes.md: "The scheduler", "Faults").

**Batches.** Rows are released in input order, :data:`WINDOW` at a time, into buckets of
:data:`BUCKET_STEP` tokens, and go out in whole groups of :data:`GROUP` (a partial group
waits at most :data:`HOLD_WINDOWS` windows). Each lane gets batches of about
:data:`TARGET_BATCH_SECONDS` at its measured rate, :data:`IN_FLIGHT` at a time, the
bucket with the earliest row first, so that results come out in input order soon.

**Faults.** A dead or hung worker's batches are requeued as *suspects*, each embedded
alone on a worker that has proven itself (it embedded a batch since its lane's last
failure). A suspect group that kills a worker again is halved, down to single chunks; a
chunk that kills :data:`POISON_DEATHS` workers on its own is tried on the CPU lane unless
that killed it too, and otherwise reported as failed; it never runs in this process. A
worker that breaks the wire format (a malformed frame, a reply of the wrong size) is at
fault itself: it is charged and its batches go back to the queue as they were. A batch
answered with any NaN or zero vector keeps none of its vectors: its rows are embedded
by another engine (the CPU lane, or for the CPU lane's own rows this process), and a lane
that does it :data:`~anekit.lanes.lane.WRONG_ANSWERS` + 1 times in a row is failed.

**Never zero lanes.** When no lane is left, the CPU lane is started; when it cannot
serve either, an in-process CPU engine (what the CPU lane runs) finishes the run.
"""

from __future__ import annotations

import itertools
import os
import queue
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from anekit.errors import LaneError
from anekit.lanes import faults
from anekit.lanes.engines import unavailable_reason
from anekit.lanes.lane import Event, Lane
from anekit.lanes.pool import RunSummary, gathered
from anekit.lanes.protocol import Result

if TYPE_CHECKING:
    from anekit.models.encoders import LoadedModel

#: Rows released at a time, in input order.
WINDOW = 128
#: Tokens per bucket. The rows of a batch then differ by less than 32 tokens: with the
#: model's package buckets (128, 192, 256) the CPU lane ran 10 % more padded tokens and
#: took 6.9 s instead of 6.5 s for the 1000 benchmark chunks (in process: 6.2 s).
BUCKET_STEP = 32
#: Rows per group: a multiple of every engine's rows per call (ONNX fp32 8, int8 1, packages 4).
GROUP = 8
#: Windows a partial group waits for more rows of its bucket.
HOLD_WINDOWS = 2
TARGET_BATCH_SECONDS = 0.25
IN_FLIGHT = 2
FALLBACK = "cpu"
LANES_VARIABLE = "ANEKIT_LANES"
#: Padded tokens per second assumed for a lane before it has answered a batch.
DEFAULT_RATE = 2000.0
MAX_BATCH_ROWS = 256
#: Deaths of a worker embedding one chunk alone that mark the chunk as killing it.
POISON_DEATHS = 2
#: Rows the in-process fallback embeds at a time (results stream out in between).
LOCAL_BATCH = 32


def default_lanes() -> list[str]:
    """``ANEKIT_LANES`` (comma-separated) when set; else the ANE lane where there is
    one (the CPU lane stays off beside it: seed 000 measured 236 -> 79 chunks/s with
    both on), else the CPU lane."""
    configured = os.environ.get(LANES_VARIABLE, "").split(",")
    names = [name.strip() for name in configured if name.strip()]
    return names or (["ane"] if unavailable_reason("ane") is None else [FALLBACK])


@dataclass
class _Suspect:
    """Rows to embed alone: their batch was in flight when a worker failed."""

    rows: list[int]
    #: Lanes whose workers this group (a single row) killed on its own.
    excluded: set[str] = field(default_factory=set)


@dataclass
class _Batch:
    rows: list[int]
    lane: str
    sent: float
    padded_tokens: int
    suspect: _Suspect | None = None
    #: Sent to see whether a restarted worker works: rows already embedded, or the
    #: input's special tokens alone (:meth:`_Work.proof_ids`); its vectors are dropped.
    probe: bool = False
    #: Rows of a probe made of special tokens (no input row), else 0.
    synthetic: int = 0
    #: A single suspect row that killed a proven worker, sent as a fresh worker's
    #: first batch: dying there too, in another place in the worker's life, it is
    #: the chunk that kills workers (not a worker that dies on its N-th batch).
    confirming: bool = False


class _Work:
    """One call's rows: released by windows, grouped by bucket, and their results."""

    def __init__(self, token_ids: Sequence[Sequence[int]], buckets: Sequence[int]) -> None:
        self.token_ids = token_ids
        self.buckets = tuple(buckets)
        self.count = len(token_ids)
        self.released = 0
        self.window = 0
        self.ready: dict[int, deque[int]] = {size: deque() for size in self.buckets}
        #: Partial groups: bucket -> [(row, window it was released in)].
        self.held: dict[int, list[tuple[int, int]]] = {size: [] for size in self.buckets}
        self.suspects: deque[_Suspect] = deque()
        #: Rows for the CPU lane only (NaN or zero from another lane).
        self.again: deque[int] = deque()
        #: Rows for the in-process engine only (NaN or zero from the CPU lane).
        self.local: deque[int] = deque()
        self.batches: dict[int, _Batch] = {}
        self.results: dict[int, np.ndarray] = {}
        #: The lane whose engine made each result (FALLBACK for the in-process engine).
        self.made_by: dict[int, str] = {}
        self.failed: dict[int, str] = {}
        self.sends: defaultdict[int, int] = defaultdict(int)
        #: Deaths of workers while embedding this row alone, per lane.
        self.alone_deaths = defaultdict[int, defaultdict[str, int]](lambda: defaultdict(int))

    def proof_ids(self) -> list[list[int]]:
        """A harmless row to prove a worker with: the special tokens every row starts
        and ends with ([CLS] [SEP] for BERT), taken from the first row."""
        first = list(self.token_ids[0])
        return [first[:1] + first[-1:]] if len(first) > 1 else [first]

    def bucket(self, row: int) -> int:
        length = len(self.token_ids[row])
        return next((size for size in self.buckets if size >= length), self.buckets[-1])

    def done(self) -> int:
        return len(self.results) + len(self.failed)

    def waiting(self) -> int:
        return sum(len(rows) for rows in self.ready.values())

    def release(self) -> None:
        """Release the next window of rows; move whole groups (and rows held too
        long, and everything once the input is all released) to ``ready``."""
        end = min(self.released + WINDOW, self.count)
        for row in range(self.released, end):
            self.held[self.bucket(row)].append((row, self.window))
        self.released = end
        self.window += 1
        finished = self.released >= self.count
        for size, held in self.held.items():
            overdue = sum(1 for _, window in held if self.window - window > HOLD_WINDOWS)
            keep = 0 if finished else len(held) % GROUP
            moving = max(len(held) - keep, overdue)
            self.ready[size].extend(row for row, _ in held[:moving])
            del held[:moving]

    def fill(self, wanted: int) -> None:
        """Release windows until ``wanted`` rows are ready or the input is all out."""
        while self.waiting() < wanted and self.released < self.count:
            self.release()

    def take(self, rate: float | None, group: int, last: int | None = None) -> list[int]:
        """A batch for a lane of ``rate`` padded tokens/s running ``group`` rows per
        call (None: :data:`LOCAL_BATCH` rows): rows of bucket ``last`` while it has a
        group ready, else of the bucket whose first ready row comes first in the input,
        and always that one once the earliest ready row is over :data:`HOLD_WINDOWS`
        windows old (output in input order never stalls behind a rare bucket). Staying
        on one bucket keeps its function's weights in the caches where a lane runs a
        function per bucket (when the CPU lane did, switching every batch cost 20 %)."""
        heads = [(rows[0], size) for size, rows in self.ready.items() if rows]
        if not heads:
            return []
        earliest, size = min(heads)
        recent = self.window - earliest // WINDOW <= HOLD_WINDOWS
        if recent and last is not None and len(self.ready.get(last, ())) >= group:
            size = last
        if rate is None:
            wanted = LOCAL_BATCH
        else:
            wanted = int(rate * TARGET_BATCH_SECONDS / size) // group * group
            wanted = min(max(wanted, group), MAX_BATCH_ROWS)
        rows = self.ready[size]
        return [rows.popleft() for _ in range(min(wanted, len(rows)))]

    def put_back(self, rows: Sequence[int]) -> None:
        """Rows to the front of their buckets, in input order."""
        for row in sorted(rows, reverse=True):
            self.ready[self.bucket(row)].appendleft(row)

    def padded_tokens(self, rows: Sequence[int]) -> int:
        return len(rows) * max(self.bucket(row) for row in rows) if rows else 0


class Scheduler:
    """Runs lanes and spreads embedding work over them: a pool of lane workers, and
    an :class:`~anekit.models.encoders.Encoder` (unit vectors) to an Embedder."""

    #: Lane workers return unit vectors.
    normalized = True

    def __init__(
        self,
        lanes: Sequence[str] | None = None,
        *,
        model: str | Path | LoadedModel | None = None,
        max_length: int | None = None,
        deadline: float = 30.0,
        threads: int | None = None,
        progress: Callable[[int, int], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from anekit.models.batching import length_steps
        from anekit.models.encoders import load_model

        names = list(lanes) if lanes else default_lanes()
        if len(set(names)) != len(names):
            raise LaneError(f"lanes must be distinct, got {names}")
        for name in names:
            if (reason := unavailable_reason(name)) is not None:
                raise LaneError(f"lane {name}: {reason}")
            faults.from_environment(name)  # a bad ANEKIT_FAULT is named here, not in a worker
        #: The model, resolved here once (a missing one is named here, not by each
        #: worker); workers resolve its ``request`` for themselves.
        self.model = load_model(model, max_length)
        self.model_id, config = self.model.model_id, self.model.config
        self.buckets = length_steps(config.max_length, BUCKET_STEP)
        self.dimension = config.hidden_size
        #: Rows per call: the scheduler batches for its workers itself.
        self.batch = 1
        self.events: queue.Queue[Event] = queue.Queue()
        # The workers run the model at the length resolved here (a LoadedModel's own).
        length = self.model.config.max_length
        self._options = {"model": self.model.request, "max_length": length, "threads": threads}
        self.deadline = deadline
        self.clock = clock
        self.lanes: dict[str, Lane] = {name: self._lane(name) for name in names}
        self.progress = progress
        #: Called with a line for the user when something changes how the run goes
        #: (a lane spent, the in-process fallback taking over, a chunk retried on the
        #: CPU lane). Chunks given up are not announced: they come with the results.
        self.notify: Callable[[str], None] | None = None
        self.summary = RunSummary()
        #: The in-process CPU engine, made when first needed and kept.
        self._local: Any = None
        #: Whether the current run has no lane left and finishes in this process.
        self._local_only = False
        self._ids = itertools.count()

    def _lane(self, name: str) -> Lane:
        return Lane(name, self.events, deadline=self.deadline, clock=self.clock, **self._options)  # type: ignore[arg-type]

    def start(self, wait: bool = True, timeout: float = 600.0) -> None:
        """Start every lane that can start; with ``wait``, until each has said hello
        (a worker killed while starting is restarted within its lane's budget)."""
        for lane in self.lanes.values():
            if lane.can_start():
                lane.start()
        if not wait:
            return
        limit = self.clock() + timeout
        busy = ("starting", "restarting")
        while any(lane.state in busy for lane in self.lanes.values()) and self.clock() <= limit:
            for lane in self.lanes.values():
                if lane.state == "restarting" and lane.can_start():
                    lane.start()
            idle = _Work((), self.buckets)
            self._handle(self._next_event(0.1), idle)
            self._check_deadlines(idle)

    def close(self) -> None:
        for lane in self.lanes.values():
            lane.stop()

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def workers_gone_idle(self) -> bool:
        """True when no lane has a worker left but ones that exited on their own, idle,
        owing nothing (and at least one did): the lanes hold nothing worth keeping."""
        left = [lane for lane in self.lanes.values() if lane.process is not None]
        return bool(left) and all(lane.exited_idle() for lane in left)

    def status(self) -> list[dict[str, Any]]:
        return [lane.describe() for lane in self.lanes.values()]

    @property
    def device(self) -> str:
        """The lanes and, for each that said hello, its device."""
        return ", ".join(
            f"{d['lane']}: {d.get('device') or d.get('state', '?')}" for d in self.status()
        )

    def providers(self) -> list[str]:
        return []  # each lane's are in status()

    def release_memory(self) -> None:
        pass  # the workers hold the models, and leave when idle

    def embed(self, token_ids: Sequence[Sequence[int]]) -> np.ndarray:
        """Unit vectors for tokenized texts, in input order; :class:`EmbeddingFailed`
        (with every vector, NaN in the failed rows) when some rows failed."""
        return gathered(self.stream(token_ids), len(token_ids), self.dimension)

    def node_rates(self) -> list[dict[str, Any]]:
        """Per machine rates: none here (one machine; :meth:`status` has each lane's)."""
        return []

    def stream(
        self, token_ids: Sequence[Sequence[int]]
    ) -> Iterator[tuple[int, np.ndarray | None, str | None, str]]:
        """``(index, vector, None, lane)`` or ``(index, None, why, "")`` for every row, in
        input order, each as soon as it and all rows before it are done. ``lane`` names
        the lane that embedded the row (``cpu`` for the in-process engine, which runs the
        CPU lane's model): a row another lane took over may differ in numerics (int8 on
        the CPU, fp16 on the ANE)."""
        work = _Work(token_ids, self.buckets)
        restarts = {name: lane.restarts for name, lane in self.lanes.items()}
        self.summary = RunSummary(chunks=work.count)
        self._local_only = False
        emitted = 0
        try:
            while emitted < work.count:
                if work.done() < work.count:
                    self._step(work)
                while emitted < work.count and (emitted in work.results or emitted in work.failed):
                    vector = work.results.get(emitted)
                    yield emitted, vector, work.failed.get(emitted), work.made_by.get(emitted, "")
                    emitted += 1
        finally:
            self.summary.embedded = len(work.results)
            self.summary.failed = dict(sorted(work.failed.items()))
            self.summary.retried = sum(1 for count in work.sends.values() if count > 1)
            self.summary.restarts = {
                name: count
                for name, lane in self.lanes.items()
                if (count := lane.restarts - restarts.get(name, 0))
            }

    def _step(self, work: _Work) -> None:
        """Send what the lanes can take, then handle one event (or wait briefly)."""
        self._keep_lanes_going(work)
        if self._local_only:
            self._embed_locally(work)
        else:
            for lane in self.lanes.values():
                self._feed(lane, work)
            if work.local or (work.again and not self._can_use(FALLBACK)):
                self._embed_locally(work, again_only=True)  # NaN rows no lane may take
        self._handle(self._next_event(0.0 if self._local_only else 0.05), work)
        self._check_deadlines(work)
        if self.progress is not None:
            self.progress(work.done(), work.count)

    def _feed(self, lane: Lane, work: _Work) -> None:
        if lane.state == "ready" and lane.served == lane.served_at_failure:
            self._prove(lane, work)
            return
        while lane.state == "ready" and len(lane.in_flight) < IN_FLIGHT:
            suspect = next((s for s in work.suspects if lane.name not in s.excluded), None)
            if suspect is not None:
                if lane.in_flight:
                    return  # drain first: a suspect runs alone
                work.suspects.remove(suspect)
                rows = suspect.rows
            elif any(b.suspect is not None for b in work.batches.values() if b.lane == lane.name):
                return  # a suspect runs alone
            elif lane.name == FALLBACK and work.again:
                rows = [work.again.popleft() for _ in range(min(len(work.again), GROUP))]
            else:
                work.fill(GROUP * IN_FLIGHT * max(len(self.lanes), 1) * 4)
                rows = work.take(lane.rate or DEFAULT_RATE, lane.group, lane.last_bucket)
                if rows:
                    lane.last_bucket = work.bucket(rows[-1])
            if not rows:
                return
            self._send(lane, work, rows, suspect)
            if suspect is not None:
                return

    def _prove(self, lane: Lane, work: _Work) -> None:
        """A worker that has not answered since its lane's last failure gets one batch
        of ordinary rows (or rows already embedded) before any suspect: whether it
        can embed anything tells a chunk that kills workers from a broken lane."""
        if lane.in_flight:
            return
        for suspect in work.suspects:
            (row, *more) = suspect.rows
            if not more and lane.name not in suspect.excluded and work.alone_deaths[row][lane.name]:
                work.suspects.remove(suspect)
                self._send(lane, work, suspect.rows, suspect, confirming=True)
                return
        work.fill(lane.group)
        rows = work.take(lane.rate or DEFAULT_RATE, lane.group, lane.last_bucket)
        if rows:
            self._send(lane, work, rows, None)
        elif work.results:
            self._send(lane, work, sorted(work.results)[: lane.group], None, probe=True)
        elif work.count:
            # Nothing harmless left to prove it with (a small input, all of it suspect):
            # never a suspect on an unproven worker, whose death would tell nothing.
            self._send(lane, work, [], None, probe=True, ids=work.proof_ids())

    def _send(
        self,
        lane: Lane,
        work: _Work,
        rows: list[int],
        suspect: _Suspect | None,
        probe: bool = False,
        confirming: bool = False,
        ids: list[list[int]] | None = None,
    ) -> None:
        """Send ``rows`` (or, for a synthetic probe, ``ids``) to ``lane``'s worker."""
        batch_id = next(self._ids)
        work.batches[batch_id] = _Batch(
            rows,
            lane.name,
            self.clock(),
            work.padded_tokens(rows),
            suspect,
            probe=probe,
            confirming=confirming,
            synthetic=len(ids) if ids is not None else 0,
        )
        for row in rows if not probe else ():
            work.sends[row] += 1
        try:
            lane.submit(batch_id, ids if ids is not None else [work.token_ids[i] for i in rows])
        except (OSError, LaneError) as error:
            # Owed even when refused before the lane recorded it: requeued with the rest.
            lane.in_flight.setdefault(batch_id, self.clock())
            self._worker_failed(lane, f"could not send a batch: {error}", work)

    def _worker_failed(
        self,
        lane: Lane,
        reason: str,
        work: _Work,
        signalled: bool = False,
        its_own: bool = False,
    ) -> None:
        """``lane``'s worker failed with its batches in flight: restart it (or fail the
        lane) and requeue those batches as suspects, bisecting a suspect that failed
        again. ``signalled``: it was killed by a signal (restarted even before its
        lane was ever admitted: a kill is not a model that cannot load). ``its_own``:
        the worker broke the wire format, which no input can make it do: charged to the
        lane, and its batches requeued as they were (no suspects, no bisection)."""
        owed = self._owed(lane, work)
        if its_own:
            lane.served_at_failure = lane.served
            lane.crash(reason, signalled=signalled)
            if lane.state == "failed":
                self._say(f"lane {lane.name} is out: {lane.reason}")
            self._requeue(owed, work)
            return
        alone = len(owed) == 1 and owed[0].suspect is not None
        # Killed by one suspect group embedded alone, by a lane that has answered
        # since its previous failure, or by a row confirmed as a fresh worker's first
        # batch: the data's fault, not the lane's.
        data = alone and (lane.served > lane.served_at_failure or owed[0].confirming)
        lane.served_at_failure = lane.served
        lane.crash(reason, charge=not data, signalled=signalled)
        if lane.state == "failed":
            self._say(f"lane {lane.name} is out: {lane.reason}")
        for batch in owed:
            if batch.probe:
                continue  # rows already embedded
            suspect = batch.suspect
            if not alone or suspect is None:
                work.suspects.append(_Suspect(batch.rows))
                continue
            if len(batch.rows) > 1:
                half = len(batch.rows) // 2
                work.suspects.appendleft(_Suspect(batch.rows[half:], set(suspect.excluded)))
                work.suspects.appendleft(_Suspect(batch.rows[:half], set(suspect.excluded)))
                continue
            (row,) = batch.rows
            deaths = work.alone_deaths[row]
            if data:
                deaths[lane.name] += 1
            if not data or deaths[lane.name] < POISON_DEATHS:
                work.suspects.appendleft(suspect)
                continue
            suspect.excluded.add(lane.name)
            if FALLBACK not in suspect.excluded and self._can_use(FALLBACK):
                work.suspects.append(suspect)  # another engine may embed it
                self._say(
                    f"chunk {row} killed the {lane.name} lane's worker {deaths[lane.name]} "
                    f"times; trying it on the {FALLBACK} lane"
                )
            else:
                work.failed[row] = _killed(deaths)

    def _requeue(self, owed: Sequence[_Batch], work: _Work) -> None:
        """Batches a worker owed, back as they were: suspects stay suspects, ordinary
        rows go back to their buckets, probes are dropped (their rows are embedded)."""
        for batch in owed:
            if batch.suspect is not None:
                work.suspects.appendleft(batch.suspect)
            elif not batch.probe:
                work.put_back(batch.rows)

    def _owed(self, lane: Lane, work: _Work) -> list[_Batch]:
        """The batches ``lane``'s worker owed, taken off the books (none owed now)."""
        owed = [work.batches.pop(i) for i in lane.in_flight if i in work.batches]
        lane.in_flight.clear()
        return owed

    def _can_use(self, name: str) -> bool:
        lane = self.lanes.get(name)
        if lane is None:
            return unavailable_reason(name) is None
        return lane.usable() or lane.can_start()

    def _say(self, line: str) -> None:
        self.summary.notes.append(line)
        if self.notify is not None:
            self.notify(line)

    def _next_event(self, timeout: float) -> Event | None:
        try:
            return self.events.get(block=timeout > 0, timeout=timeout)  # timeout <= 0: no wait
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
                self._requeue(self._owed(lane, work), work)
                lane.stop()
            elif lane.state in ("starting", "ready"):
                reason = str(event.message.get("reason", "failed"))
                if tail := lane.stderr_tail():
                    reason += f"; stderr: {tail}"
                code = event.message.get("code")
                signalled = isinstance(code, int) and code < 0
                its_own = bool(event.message.get("malformed"))
                self._worker_failed(lane, reason, work, signalled, its_own)
        elif event.kind == "result" and event.result is not None:
            self._result(lane, event.result, work)

    def _hello(self, lane: Lane, message: dict[str, Any]) -> None:
        lane.hello = message
        if message.get("admitted"):
            lane.state = "ready"
            lane.admitted_once = True
            lane.group = int(message.get("batch") or GROUP)
            lane.rate = lane.rate or float(message.get("rate_tokens_per_s") or 0.0)
            return
        if message.get("refused"):
            reason = str(message["refused"])
        else:
            below = message.get("below_floor", [])
            listed = ", ".join(f"chunk {c['chunk']} ({c['cosine']:.4f})" for c in below[:8])
            reason = (
                f"refused at admission: {len(below)} known-answer chunk(s) under the "
                f"floor {message.get('floor')}: {listed}"
            )
        lane.stop()
        lane.state, lane.reason = "refused", reason

    def _result(self, lane: Lane, result: Result, work: _Work) -> None:
        lane.in_flight.pop(result.batch_id, None)
        # The worker starts on its next batch now: its deadline counts from here, not
        # from when it was queued behind this one.
        restart = self.clock() + lane.deadline
        for queued in lane.in_flight:
            lane.in_flight[queued] = max(lane.in_flight[queued], restart)
        batch = work.batches.get(result.batch_id)
        if batch is None:
            return  # from a lane already dropped: its rows were requeued
        vectors = result.vectors
        shape = (batch.synthetic or len(batch.rows), self.dimension)
        if result.error is not None or vectors is None:
            lane.in_flight[result.batch_id] = 0.0  # owed with the others
            self._worker_failed(lane, f"batch error: {result.error}", work)
            return
        if vectors.shape != shape:
            lane.in_flight[result.batch_id] = 0.0
            answered = "x".join(map(str, vectors.shape))
            self._worker_failed(
                lane, f"answered {answered} values for {shape[0]}x{shape[1]}", work, its_own=True
            )
            return
        del work.batches[result.batch_id]
        if _bad_rows(vectors).any():
            self._wrong_answer(lane, batch, work)
            return
        lane.answered()
        if batch.probe:
            return
        self._record(work, batch.rows, vectors, lane.name)
        elapsed = max(self.clock() - batch.sent, 1e-6)
        observed = batch.padded_tokens / elapsed * min(len(lane.in_flight) + 1, IN_FLIGHT)
        lane.rate = 0.7 * lane.rate + 0.3 * observed if lane.rate else observed

    def _wrong_answer(self, lane: Lane, batch: _Batch, work: _Work) -> None:
        """``lane`` answered ``batch`` with NaN or zero vectors. None of its
        vectors is kept (the others are no more trustworthy): its rows go to another
        engine, the CPU lane, or this process when the CPU lane made them. A lane that
        answers more than :data:`~anekit.lanes.lane.WRONG_ANSWERS` batches in a row so
        is failed, and what it still owed goes back to the queue as it was."""
        if not batch.probe:  # a probe's rows are embedded already
            (work.local if lane.name == FALLBACK else work.again).extend(batch.rows)
        if lane.wrong_answer():
            owed = self._owed(lane, work)
            lane.fail(f"answered {lane.wrong_in_a_row} batches in a row with NaN or zero vectors")
            self._say(f"lane {lane.name} is out: {lane.reason}")
            self._requeue(owed, work)

    def _record(self, work: _Work, rows: Sequence[int], vectors: np.ndarray, lane: str) -> None:
        """Keep ``rows``' vectors (all finite and nonzero), made by ``lane``."""
        for row, vector in zip(rows, vectors, strict=True):
            work.results[row] = vector
            work.made_by[row] = lane

    def _check_deadlines(self, work: _Work) -> None:
        for lane in self.lanes.values():
            if lane.state == "starting" and lane.overdue():
                self._worker_failed(lane, "said nothing while starting", work)
            elif lane.state == "ready" and lane.overdue():
                self._worker_failed(lane, f"missed its {lane.deadline:g} s batch deadline", work)

    def _keep_lanes_going(self, work: _Work) -> None:
        if work.again or any(
            FALLBACK not in s.excluded and self._stranded(s) for s in work.suspects
        ):
            self._add_fallback()
        for lane in self.lanes.values():
            if lane.state == "ready" and lane.exited_idle():
                lane.stop()  # it left while idle; a new worker starts below
            needed = (
                work.released < work.count
                or work.waiting()
                or any(lane.name not in suspect.excluded for suspect in work.suspects)
                or (work.again and lane.name == FALLBACK)
            )
            if needed and lane.can_start():
                lane.start()
        usable = any(lane.usable() for lane in self.lanes.values())
        # With no lane usable every suspect is stranded: the in-process fallback decides.
        for suspect in list(work.suspects) if usable else ():
            if self._stranded(suspect):
                work.suspects.remove(suspect)
                for row in suspect.rows:
                    work.failed[row] = _killed(work.alone_deaths[row])
        if usable or self._local_only:
            return
        if (fallback := self._add_fallback()) is not None:
            fallback.start()
            return
        lanes = self.lanes.values()
        reasons = "; ".join(f"{lane.name}: {lane.reason or lane.state}" for lane in lanes)
        self._local_engine(f"no lane can embed: {reasons}")
        self._local_only = True
        self._say(f"no lane can embed ({reasons}); finishing in this process on the CPU")

    def _stranded(self, suspect: _Suspect) -> bool:
        """Whether ``suspect`` killed the workers of every usable lane on its own."""
        return all(name in suspect.excluded for name, lane in self.lanes.items() if lane.usable())

    def _add_fallback(self) -> Lane | None:
        """The CPU lane, added when it is not among the lanes and can run here."""
        if FALLBACK in self.lanes or unavailable_reason(FALLBACK) is not None:
            return None
        self.lanes[FALLBACK] = self._lane(FALLBACK)
        return self.lanes[FALLBACK]

    def _local_engine(self, why: str) -> Any:
        """The in-process CPU engine (what the CPU lane runs), made once."""
        if self._local is None:
            from anekit.lanes.engines import make_engine

            options: dict[str, Any] = self._options
            try:
                self._local = make_engine(
                    FALLBACK, self.model, options["max_length"], options["threads"]
                )
            except Exception as error:
                raise LaneError(
                    f"{why}; and the in-process CPU engine could not start: "
                    f"{type(error).__name__}: {error}"
                ) from error
        return self._local

    def _embed_locally(self, work: _Work, again_only: bool = False) -> None:
        """Embed the next rows here: NaN rows (those of another lane only when the CPU
        lane cannot take them), suspects that never killed a worker of the CPU's engine
        on their own, then the rest (``again_only``: NaN rows only)."""
        rows: list[int] = []
        queues = [work.local]
        if self._local_only or not self._can_use(FALLBACK):
            queues.append(work.again)
        for waiting in queues:
            while waiting and len(rows) < LOCAL_BATCH:
                row = waiting.popleft()
                if work.alone_deaths[row].get(FALLBACK):
                    # It killed the CPU lane's worker: here it could kill this process.
                    work.failed[row] = _killed(work.alone_deaths[row])
                else:
                    rows.append(row)
        while not again_only and work.suspects and len(rows) < LOCAL_BATCH:
            suspect = work.suspects.popleft()
            for row in suspect.rows:
                if FALLBACK in suspect.excluded or work.alone_deaths[row].get(FALLBACK):
                    # It killed the CPU lane's worker: here it could kill this process.
                    work.failed[row] = _killed(work.alone_deaths[row])
                else:
                    rows.append(row)
        if not rows and not again_only:
            work.fill(LOCAL_BATCH)
            rows = work.take(None, GROUP)
        if not rows:
            return
        for row in rows:
            work.sends[row] += 1
        engine = self._local_engine(f"the {FALLBACK} lane cannot embed the NaN rows")
        if not again_only:
            self.summary.fallback = f"in process: {engine.device}"
        try:
            self._keep_local(work, rows, engine.embed([work.token_ids[r] for r in rows]))
        except Exception as error:  # one bad row must not end the run: try each alone
            if len(rows) == 1:
                work.failed[rows[0]] = f"in-process engine: {type(error).__name__}: {error}"
                return
            for row in rows:
                try:
                    vector = engine.embed([work.token_ids[row]])
                except Exception as alone:
                    work.failed[row] = f"in-process engine: {type(alone).__name__}: {alone}"
                else:
                    self._keep_local(work, [row], vector)

    def _keep_local(self, work: _Work, rows: Sequence[int], vectors: np.ndarray) -> None:
        """The in-process engine's vectors: the last engine there is, so a NaN or zero
        vector from it fails its row (the others are kept)."""
        bad = _bad_rows(vectors)
        for row, vector, wrong in zip(rows, vectors, bad, strict=True):
            if wrong:
                work.failed[row] = f"the in-process {FALLBACK} engine returned NaN or zero"
            else:
                self._record(work, [row], vector[None], FALLBACK)


def _bad_rows(vectors: np.ndarray) -> np.ndarray:
    """Per row, whether its vector holds a NaN or an infinity, or is all zeros."""
    bad: np.ndarray = ~np.isfinite(vectors).all(axis=1) | ~np.any(vectors, axis=1)
    return bad


def _killed(deaths: dict[str, int]) -> str:
    lanes = ", ".join(f"the {name} lane's worker {count} time(s)" for name, count in deaths.items())
    return f"embedding this chunk alone killed {lanes or 'a worker'}"
