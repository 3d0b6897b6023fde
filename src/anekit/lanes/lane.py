"""The parent's view of one lane: its worker process, its frames, its state.

A reader thread turns the worker's stdout frames into events on the scheduler's
queue, and a writer thread sends it batches (a worker that stops reading, hung
mid-batch, never blocks the scheduler, which would then miss its deadline); the
worker's stderr goes to a temporary file whose last lines explain a crash. A lane
is ``starting`` until its hello, then ``ready`` (admitted) or ``refused`` (below its
known-answer floor: never started again); a failed worker makes it ``restarting`` or
``failed`` (:meth:`Lane.crash`), and so do batches answered with NaN or zero vectors
(:meth:`Lane.wrong_answer`).
"""

from __future__ import annotations

import contextlib
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anekit.lanes import protocol

#: The module a worker runs (``python -m``).
WORKER_MODULE = "anekit.lanes.worker"

#: Seconds before a failed lane may start again.
RETRY_SECONDS = 600.0
#: Restarts a lane may spend in :data:`RESTART_WINDOW` seconds, or in a row without
#: answering a batch (a worker that misses every deadline fails once per deadline,
#: which may be less often than the window counts), before it is failed.
RESTARTS = 3
RESTART_WINDOW = 60.0
#: Batches in a row a lane may answer with NaN or zero vectors; the next one fails it.
WRONG_ANSWERS = 3
#: Seconds before the first restart; doubled for each restart in the window.
BACKOFF_SECONDS = 0.5
#: How long a starting worker may stay silent (progress frames reset it).
START_SILENCE_SECONDS = 300.0


@dataclass
class Event:
    """Something a lane's reader thread saw."""

    lane: str
    kind: str  # "progress", "hello", "result", "failed"
    message: dict[str, Any] = field(default_factory=dict)
    result: protocol.Result | None = None
    #: The worker process it came from (a lane's earlier worker may still be heard).
    pid: int = 0


class Lane:
    """One worker process serving one lane."""

    def __init__(
        self,
        name: str,
        events: queue.Queue[Event],
        *,
        model: str | Path | None = None,
        max_length: int | None = None,
        threads: int | None = None,
        deadline: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.events = events
        self.model, self.max_length, self.threads = model, max_length, threads
        self.deadline = deadline
        self.clock = clock
        self.state = "stopped"
        self.reason = ""
        self.hello: dict[str, Any] = {}
        self.failed_at: float | None = None
        #: Whether any of this lane's workers has been admitted.
        self.admitted_once = False
        #: When workers failed after admission (the restart budget's window).
        self.crashes: deque[float] = deque()
        #: Charged failures, and batches answered with NaN or zero vectors, since the
        #: lane last answered a batch well.
        self.failures_in_a_row = 0
        self.wrong_in_a_row = 0
        self.restarts = 0
        self.restart_at = 0.0
        #: Rows per engine call in its worker (the hello's ``batch``).
        self.group = 8
        #: The bucket of the last batch the scheduler sent it.
        self.last_bucket: int | None = None
        #: Batches its workers answered, and that count at its last failure (a worker
        #: that has answered since has shown that the lane works).
        self.served = 0
        self.served_at_failure = -1
        self.in_flight: dict[int, float] = {}  # batch id -> deadline (clock time)
        #: Padded tokens per second, a running average (seeded by its hello's rate).
        self.rate = 0.0
        self.process: subprocess.Popen[bytes] | None = None
        self._stderr: Any = None
        #: Frames for the writer thread; None ends it.
        self._outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.last_heard = 0.0

    def current(self, pid: int) -> bool:
        """True when ``pid`` is this lane's running worker (not an earlier one)."""
        return self.process is not None and self.process.pid == pid

    def exited_idle(self) -> bool:
        """True when the worker left on its own (idle) with nothing owed."""
        return self.process is not None and self.process.poll() == 0 and not self.in_flight

    def usable(self) -> bool:
        """Serving, or about to: starting, ready or waiting to restart."""
        return self.state in ("starting", "ready", "restarting")

    def can_start(self) -> bool:
        if self.state in ("starting", "ready", "refused"):
            return False
        if self.state == "restarting":
            return self.clock() >= self.restart_at
        return self.failed_at is None or self.clock() - self.failed_at >= RETRY_SECONDS

    def command(self) -> list[str]:
        """The worker's command line."""
        command = [sys.executable, "-m", WORKER_MODULE, self.name]
        flags = ("--model", "--max-length", "--threads")
        for flag, value in zip(flags, (self.model, self.max_length, self.threads), strict=True):
            if value is not None:
                command += [flag, str(value)]
        return command

    def start(self) -> None:
        if self._stderr is not None:
            self._stderr.close()  # the previous worker's (its tail was read when it failed)
        self._stderr = tempfile.TemporaryFile(prefix=f"anekit-lane-{self.name}-")  # noqa: SIM115 - lives as long as the worker
        self.process = subprocess.Popen(
            self.command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr
        )
        if self.state == "restarting":
            self.restarts += 1  # its reason stays: why it last restarted
        else:
            self.reason = ""
        if self.state == "failed":  # retried after RETRY_SECONDS: a fresh budget
            self.failures_in_a_row = self.wrong_in_a_row = 0
        self.state, self.hello = "starting", {}
        self.in_flight.clear()
        self.last_heard = self.clock()
        threading.Thread(target=self._read, args=(self.process,), daemon=True).start()
        self._outbox = queue.SimpleQueue()
        threading.Thread(target=_write, args=(self.process, self._outbox), daemon=True).start()

    def stop(self) -> None:
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            self._outbox.put(protocol.encode_frame(protocol.QUIT))
        self._outbox.put(None)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)  # else it did not leave politely: killed below
        self._kill()
        if self.state in ("starting", "ready"):
            self.state = "stopped"

    def fail(self, reason: str) -> list[int]:
        """Mark the lane failed, kill its worker; the batch ids it still owed."""
        if self.state != "failed":
            self.state, self.reason, self.failed_at = "failed", reason, self.clock()
        return self._kill()

    def answered(self) -> None:
        """A worker answered a batch with good vectors: the lane works, and its
        failures and wrong answers in a row count from zero again."""
        self.served += 1
        self.failures_in_a_row = self.wrong_in_a_row = 0

    def wrong_answer(self) -> bool:
        """A batch came back with NaN or zero vectors; True when that was the lane's
        last chance (more than :data:`WRONG_ANSWERS` in a row): the scheduler then
        fails it. The worker is kept otherwise (a chunk that overflows fp16 is not a
        broken lane)."""
        self.wrong_in_a_row += 1
        return self.wrong_in_a_row > WRONG_ANSWERS

    def crash(self, reason: str, charge: bool = True, signalled: bool = False) -> list[int]:
        """Its worker failed: kill it; the batch ids it still owed. A lane never admitted
        whose worker exited on its own is failed (it cannot load). Otherwise (admitted
        before, or ``signalled``: killed by a signal) it restarts after a backoff,
        ``charge`` counting the failure against its budget: :data:`RESTARTS` restarts
        in :data:`RESTART_WINDOW` seconds, and as many in a row without a batch
        answered; past either, the lane is failed. An uncharged failure is the data's,
        not the lane's (a chunk that kills every worker)."""
        if not self.admitted_once and not signalled:
            return self.fail(reason)
        now = self.clock()
        if charge:
            self.crashes.append(now)
            self.failures_in_a_row += 1
        while self.crashes and now - self.crashes[0] > RESTART_WINDOW:
            self.crashes.popleft()
        if len(self.crashes) > RESTARTS:
            return self.fail(
                f"{reason} (its {RESTARTS} restarts in {RESTART_WINDOW:g} s are spent)"
            )
        if self.failures_in_a_row > RESTARTS:
            return self.fail(
                f"{reason} (its {RESTARTS} restarts are spent: {self.failures_in_a_row} "
                "failures in a row, no batch answered)"
            )
        self.state, self.reason = "restarting", reason
        self.restart_at = now + BACKOFF_SECONDS * 2 ** max(len(self.crashes) - 1, 0)
        return self._kill()

    def _kill(self) -> list[int]:
        """Kill the worker if it still runs; the batch ids it owed (none owed now)."""
        owed = list(self.in_flight)
        self.in_flight.clear()
        process = self.process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        self._outbox.put(None)
        self.process = None
        return owed

    def stderr_tail(self, lines: int = 5) -> str:
        if self._stderr is None:
            return ""
        try:
            self._stderr.seek(0)
            text = self._stderr.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""
        return " | ".join(text.strip().splitlines()[-lines:])

    def submit(self, batch_id: int, rows: Sequence[Sequence[int]]) -> None:
        if self.process is None or self.process.stdin is None:
            raise protocol.ProtocolError(f"lane {self.name} has no worker")
        frame = protocol.encode_frame(protocol.batch_frame(batch_id, rows))
        self.in_flight[batch_id] = self.clock() + self.deadline
        self._outbox.put(frame)

    def overdue(self) -> bool:
        now = self.clock()
        if self.state == "starting":
            return now - self.last_heard > START_SILENCE_SECONDS
        return any(now > deadline for deadline in self.in_flight.values())

    def _read(self, process: subprocess.Popen[bytes]) -> None:
        stream = process.stdout
        assert stream is not None

        def emit(kind: str, message: dict[str, Any] | None = None, **extra: Any) -> None:
            self.events.put(Event(self.name, kind, message or {}, pid=process.pid, **extra))

        try:
            while (payload := protocol.read_frame(stream)) is not None:
                self.last_heard = self.clock()
                kind = payload[:1]
                if kind == protocol.PROGRESS:
                    emit("progress", protocol.decode_json(payload))
                elif kind == protocol.HELLO:
                    emit("hello", protocol.decode_json(payload))
                elif kind == protocol.RESULT:
                    emit("result", result=protocol.decode_result(payload))
                else:
                    raise protocol.ProtocolError(f"unknown frame kind {kind!r}")
            code = process.wait()
            emit("failed", {"reason": f"worker exited ({code})", "code": code})
        except protocol.TruncatedFrame as error:
            # Its output ended mid-frame: it died while writing, a death like any other.
            try:
                code = process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                code = process.wait()
            emit("failed", {"reason": f"worker exited ({code}): {error}", "code": code})
        except (protocol.ProtocolError, OSError, ValueError) as error:
            # The worker broke the wire format: its fault, never its batch's.
            emit("failed", {"reason": f"malformed frame: {error}", "malformed": True})
            if process.poll() is None:
                process.kill()

    def describe(self) -> dict[str, Any]:
        return {
            "lane": self.name,
            "state": self.state,
            "reason": self.reason,
            "device": self.hello.get("device"),
            "providers": self.hello.get("providers"),
            "rate_tokens_per_s": round(self.rate, 1) if self.rate else None,
            "chunks_per_s": self.hello.get("chunks_per_s"),
            "min_cosine": self.hello.get("min_cosine"),
            "floor": self.hello.get("floor"),
            "below_floor": self.hello.get("below_floor", []),
            "pid": self.hello.get("pid"),
            "restarts": self.restarts,
        }


__all__ = ["RESTARTS", "RESTART_WINDOW", "RETRY_SECONDS", "WRONG_ANSWERS", "Event", "Lane"]


def _write(process: subprocess.Popen[bytes], outbox: queue.SimpleQueue[bytes | None]) -> None:
    """Send ``outbox``'s frames to the worker until None, then close its stdin. A pipe
    that breaks ends it quietly: the reader thread reports the worker's exit."""
    stream = process.stdin
    assert stream is not None
    with contextlib.suppress(OSError, ValueError):
        while (frame := outbox.get()) is not None:
            stream.write(frame)
            stream.flush()
    with contextlib.suppress(OSError, ValueError):
        stream.close()
