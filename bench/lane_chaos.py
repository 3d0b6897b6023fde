"""Chaos benchmark of the lanes (issue 12): SIGKILL lane workers at random moments during
``anekit embed`` runs and check that no chunk is lost, shifted or duplicated.

The corpus is ``code_chunks(N)`` from ``bench/embed_throughput.py`` (real code cut from
the standard library), written one per line as JSON lines (``{"text": ...}``, since the
chunks hold newlines). The fp32 reference is ``Embedder(runtime="numpy").encode`` of the
same chunks, computed once and cached as a ``.npy`` in the temporary directory.

What it runs, each ``anekit embed FILE`` a subprocess with the default lanes (no
``--lane``, ``ANEKIT_LANES`` unset; on Linux one CPU-lane worker, ONNX Runtime int8),
``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1``:

1. a calibration: a lane worker (``python -m anekit.lanes.worker cpu``) started three
   times by hand, timing its frames (``loading``, ``admission``, hello) from its start,
   and noting its write count (``wchar`` in ``/proc/PID/io``) at each, so that a kill's
   moment can be told from the worker's own writes;
2. a baseline run without faults (its time sizes the kill windows);
3. kill runs until ``--kills`` kills have landed: 1 to 3 per run, each aimed at a
   category chosen first, then at a moment of it:

   - ``start``: 0.05 s to 80 % of the quickest calibrated time to the admission frame
     (at most 0.3 s) after a new worker's pid appears (it is still loading);
   - ``admission``: once the worker's write count shows its admission frame, 10 % to
     90 % of the quickest calibrated admission (admission frame to hello) later;
   - ``mid-batch``: a random time into the serving worker's life, then the first moment
     at least 40 ms after its last write (a result frame): it is computing a batch;
   - ``between batches``: a random time into its serving life, then the first moment its
     write count moves (a result frame just went out), killed within a poll (~1 ms).

   A ``start`` or ``admission`` kill of a run's first worker is that run's only kill
   (the lane restarts the worker, counting against its restart budget). Later
   ``start`` and ``admission`` kills aim at the worker the lane restarts. Each kill is
   recorded with its run, aimed category, time since the run started, the worker's age,
   ms since its last write, and the stage its write count shows (loading, admission,
   serving);
4. a hung-worker run: ``ANEKIT_FAULT=cpu:hang:60000`` and ``--deadline 5``;
5. a poisoned-batch run: ``ANEKIT_FAULT=cpu:kill-on:ID``, ID a token id found in exactly
   one chunk (chosen with ``--seed``): that chunk's line should be null, the others there.

Every run's output is checked: exit status 0 (the poisoned run: what it is), one line
per input line, each a 384-float vector at cosine >= 0.98 to its reference row (a line
that is missing, null, not a vector or below 0.98 is a lost chunk; for a wrong vector the
reference row it matches best is noted, which names a shift or a duplicate). Peak RSS
(``VmHWM``, polled every 50 ms while each process lives) of the anekit parent and of
every worker is compared with the targets: worker <= 250 MB, parent <= 150 MB (runs that
finished in the parent process, which then loads ONNX Runtime, are shown apart).

    .venv/bin/python bench/lane_chaos.py [--kills 50] [--chunks 1000] [--seed 0]
        [--json PATH]

The seed fixes the token id, the kills' categories and the aimed delays; the moments
themselves depend on the workers' timing, so two runs with one seed differ a little.

The anekit that runs is the one this Python imports: to measure one commit while its
tree is being edited, run it from a copy (``git archive HEAD src | tar -x -C DIR`` and
``PYTHONPATH=DIR/src``); the record names where anekit came from, its commit and any
changed files under ``src``.

Writes a Markdown summary to stdout, progress to stderr, and a JSON record (machine,
date, command, calibration, every run and kill) to ``--json`` (default
``bench/results/lane_chaos-<date>.json``). Linux only (it reads ``/proc``).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import random
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from benchmachine import machine, redacted, source_state
from embed_throughput import code_chunks

from anekit.lanes.lane import WORKER_MODULE

RESULTS = Path(__file__).resolve().parent / "results"
ANEKIT = Path(sys.executable).parent / "anekit"
DIMENSION = 384
MIN_COSINE = 0.98
WORKER_TARGET_MB = 250.0
PARENT_TARGET_MB = 150.0
CATEGORIES = ("start", "admission", "mid-batch", "between batches")
#: A mid-batch kill waits until the worker has written nothing for this long.
MID_BATCH_GAP = 0.040
#: Seconds between memory samples, and between polls when no kill is close.
MEMORY_POLL = 0.050
COARSE_POLL = 0.010
FINE_POLL = 0.001
HANG_FAULT = "cpu:hang:60000"
HANG_DEADLINE = 5.0
CALIBRATIONS = 3


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- /proc ----------------------------------------------------------------------------


def children(pid: int) -> set[int]:
    """Child pids of every thread of ``pid``."""
    found: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            found.update(
                int(item) for item in Path(f"/proc/{pid}/task/{task}/children").read_text().split()
            )
        except (OSError, ValueError):
            continue
    return found


def is_worker(pid: int) -> bool:
    try:
        return WORKER_MODULE in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


def state(pid: int) -> str | None:
    """The main thread's state letter (R, S, Z ...), or None when it is gone."""
    try:
        return Path(f"/proc/{pid}/task/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def peak_mb(pid: int) -> float | None:
    """``VmHWM`` in MB, or None (gone, or a zombie)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return None


def wchar(pid: int) -> int | None:
    """Bytes the process has written so far (every write(2): frames, stderr)."""
    try:
        for line in Path(f"/proc/{pid}/io").read_text().splitlines():
            if line.startswith("wchar:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def maps_onnxruntime(pid: int) -> bool:
    """Whether ONNX Runtime is loaded in ``pid`` (the parent only loads it to embed in
    process, when no lane is left)."""
    try:
        return "onnxruntime" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


# --- inputs ---------------------------------------------------------------------------


def environment(fault: str | None = None) -> dict[str, str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    for name in ("ANEKIT_LANES", "ANEKIT_FAULT"):
        env.pop(name, None)
    if fault:
        env["ANEKIT_FAULT"] = fault
    return env


def reference_vectors(chunks: list[str]) -> tuple[np.ndarray, str]:
    """fp32 unit vectors of ``chunks`` (NumPy backend), cached by count and content."""
    digest = hashlib.sha256("\0".join(chunks).encode()).hexdigest()[:16]
    cache = (
        Path(tempfile.gettempdir()) / "anekit-lane-chaos" / f"reference-{len(chunks)}-{digest}.npy"
    )
    if cache.is_file():
        return np.load(cache), str(cache)
    from anekit.embedder import Embedder

    log(f"computing the fp32 reference of {len(chunks)} chunks (once; cached in {cache})...")
    started = time.perf_counter()
    vectors = np.asarray(Embedder(runtime="numpy").encode(chunks), np.float32)
    log(f"  {time.perf_counter() - started:.0f} s")
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.save(cache, vectors)
    return vectors, str(cache)


def poison_token(chunks: list[str], rng: random.Random) -> tuple[int, int, int]:
    """(token id, chunk index, candidates): a token id found in exactly one chunk."""
    from anekit.embedder import Embedder

    token_ids = Embedder(runtime="numpy").tokenize(chunks)
    holders: dict[int, set[int]] = {}
    for index, ids in enumerate(token_ids):
        for token in set(ids):
            holders.setdefault(token, set()).add(index)
    candidates = sorted(token for token, where in holders.items() if len(where) == 1)
    if not candidates:
        raise SystemExit("no token id is found in exactly one chunk")
    token = rng.choice(candidates)
    (index,) = holders[token]
    return token, index, len(candidates)


def calibrate() -> dict[str, Any]:
    """Time a lane worker's frames from its start (median of a few starts), and its
    write count at each, to aim the start and admission kills."""
    from anekit.lanes import protocol

    samples: list[dict[str, float]] = []
    for _ in range(CALIBRATIONS):
        started = time.monotonic()
        process = subprocess.Popen(
            [sys.executable, "-m", WORKER_MODULE, "cpu"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=environment(),
        )
        assert process.stdout is not None and process.stdin is not None
        sample: dict[str, float] = {}
        while True:
            payload = protocol.read_frame(process.stdout)
            if payload is None:
                raise SystemExit("calibration: the lane worker exited before its hello")
            now = time.monotonic() - started
            written = float(wchar(process.pid) or 0)
            if payload[:1] == protocol.PROGRESS:
                stage = protocol.decode_json(payload).get("stage", "?")
                sample[f"{stage}_s"], sample[f"{stage}_wchar"] = now, written
            elif payload[:1] == protocol.HELLO:
                sample["hello_s"], sample["hello_wchar"] = now, written
                break
        protocol.write_frame(process.stdin, protocol.QUIT)
        process.stdin.close()
        process.wait(timeout=30)
        samples.append(sample)
    keys = sorted({key for sample in samples for key in sample})
    median = {
        key: statistics.median(sample[key] for sample in samples if key in sample) for key in keys
    }
    # The quickest start's figures: a kill aimed inside them lands in its stage even
    # when a worker starts faster than the median.
    admission = min(sample["admission_s"] for sample in samples)
    admitting = min(sample["hello_s"] - sample["admission_s"] for sample in samples)
    return {
        "samples": samples,
        "median": median,
        "start_window_s": [0.05, max(0.06, min(0.3, 0.8 * admission))],
        "admission_offset_s": [0.1 * admitting, 0.9 * admitting],
        # Write counts that separate the stages: below the admission frame's, loading.
        "admission_wchar": min(sample["admission_wchar"] for sample in samples),
        "hello_wchar": min(sample["hello_wchar"] for sample in samples),
    }


# --- one run --------------------------------------------------------------------------


@dataclass
class Worker:
    pid: int
    seen: float  # seconds since the run started
    peak_mb: float = 0.0
    written: int = 0
    #: When its write count last moved (seconds since the run started).
    wrote_at: float = 0.0
    #: When its writes passed the admission frame's, and the hello's.
    admitting_at: float | None = None
    served_at: float | None = None
    killed: bool = False
    gone: bool = False


@dataclass
class Aim:
    """The kill being aimed: its category, the worker and the moment."""

    category: str
    pid: int | None = None
    fire_at: float | None = None
    written: int | None = None  # between batches: the write count when armed


@dataclass
class Run:
    number: int
    kind: str  # baseline, kills, hang, poison
    command: list[str]
    fault: str | None = None
    plan: list[str] = field(default_factory=list)
    kills: list[dict[str, Any]] = field(default_factory=list)
    workers: dict[int, Worker] = field(default_factory=dict)
    parent_peak_mb: float = 0.0
    in_process: bool = False
    returncode: int | None = None
    wall_s: float = 0.0
    lines: list[str] = field(default_factory=list)
    stderr: str = ""
    timed_out: bool = False


class Runner:
    def __init__(
        self,
        source: Path,
        calibration: dict[str, Any],
        rng: random.Random,
        timeout: float,
    ) -> None:
        self.source = source
        self.calibration = calibration
        self.rng = rng
        self.timeout = timeout
        #: Seconds into a serving worker's life the mid/between kills are spread over.
        self.serving_window = 2.0

    def stage(self, written: int) -> str:
        if written < self.calibration["admission_wchar"]:
            return "loading"
        if written < self.calibration["hello_wchar"]:
            return "admission"
        return "serving"

    def run(
        self,
        number: int,
        kind: str,
        plan: list[str] | None = None,
        fault: str | None = None,
        extra: list[str] | None = None,
    ) -> Run:
        command = [str(ANEKIT), "embed", str(self.source), *(extra or [])]
        record = Run(number, kind, command, fault, list(plan or []))
        started = time.monotonic()
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=environment(fault),
            start_new_session=True,
        )
        out_times: list[float] = []

        def read_stdout() -> None:
            assert process.stdout is not None
            for raw in process.stdout:
                record.lines.append(raw.decode("utf-8", "replace"))
                out_times.append(time.monotonic() - started)

        def read_stderr() -> None:
            assert process.stderr is not None
            record.stderr = process.stderr.read().decode("utf-8", "replace")

        readers = [
            threading.Thread(target=read, daemon=True) for read in (read_stdout, read_stderr)
        ]
        for reader in readers:
            reader.start()
        aim = Aim(record.plan[0]) if record.plan else None
        last_kill = -1.0
        next_memory = 0.0
        next_maps = 0.0
        while process.poll() is None:
            now = time.monotonic() - started
            if now > self.timeout:
                record.timed_out = True
                os.killpg(process.pid, signal.SIGKILL)
                break
            self._track(process.pid, record, now)
            if now >= next_memory:
                next_memory = now + MEMORY_POLL
                self._memory(process.pid, record)
            if not record.in_process and now >= next_maps:
                next_maps = now + 0.5
                record.in_process = maps_onnxruntime(process.pid)
            fine = False
            if aim is not None:
                fine = self._aim(aim, record, now, last_kill)
                if record.kills and record.kills[-1].get("_fresh"):
                    record.kills[-1].pop("_fresh")
                    last_kill = record.kills[-1]["t_s"]
                    record.kills[-1]["stdout_lines"] = len(out_times)
                    index = len(record.kills)
                    aim = Aim(record.plan[index]) if index < len(record.plan) else None
            time.sleep(FINE_POLL if fine else COARSE_POLL)
        record.returncode = process.wait()
        record.wall_s = time.monotonic() - started
        for reader in readers:
            reader.join(timeout=30)
        if aim is not None:
            missed = record.plan[len(record.kills) :]
            log(f"  run {number}: {len(missed)} planned kill(s) did not land: {missed}")
            record.plan = record.plan[: len(record.kills)]
        return record

    def _track(self, parent: int, record: Run, now: float) -> None:
        alive = {
            pid
            for pid in children(parent)
            if (pid in record.workers or is_worker(pid)) and state(pid) not in (None, "Z")
        }
        for pid in alive:
            worker = record.workers.get(pid)
            if worker is None:
                worker = record.workers[pid] = Worker(pid, now, wrote_at=now)
            written = wchar(pid)
            if written is not None and written != worker.written:
                worker.written, worker.wrote_at = written, now
                if worker.admitting_at is None and written >= self.calibration["admission_wchar"]:
                    worker.admitting_at = now
                if worker.served_at is None and written >= self.calibration["hello_wchar"]:
                    worker.served_at = now
        for pid, worker in record.workers.items():
            if pid not in alive:
                worker.gone = True

    def _memory(self, parent: int, record: Run) -> None:
        peak = peak_mb(parent)
        if peak is not None:
            record.parent_peak_mb = max(record.parent_peak_mb, peak)
        for worker in record.workers.values():
            if not worker.gone:
                peak = peak_mb(worker.pid)
                if peak is not None:
                    worker.peak_mb = max(worker.peak_mb, peak)

    def _aim(self, aim: Aim, record: Run, now: float, last_kill: float) -> bool:
        """Advance the aim; kill when its moment has come. True while a kill is close
        (poll finely)."""
        fresh = [
            worker
            for worker in record.workers.values()
            if not worker.gone and not worker.killed and worker.seen > last_kill
        ]
        if aim.category in ("start", "admission"):
            if aim.pid is None:
                if not fresh:
                    return False
                target = min(fresh, key=lambda worker: worker.seen)
                aim.pid = target.pid
                if aim.category == "start":
                    low, high = self.calibration["start_window_s"]
                    aim.fire_at = target.seen + self.rng.uniform(low, high)
            worker = record.workers[aim.pid]
            if worker.gone:
                aim.pid = aim.fire_at = None  # it died on its own: aim at the next one
                return False
            if aim.fire_at is None:  # admission: from its admission frame on
                if worker.admitting_at is None:
                    return True
                low, high = self.calibration["admission_offset_s"]
                aim.fire_at = worker.admitting_at + self.rng.uniform(low, high)
            if now >= aim.fire_at:
                self._kill(worker, aim, record, now)
            return aim.fire_at - now < 0.02
        serving = [
            worker
            for worker in record.workers.values()
            if not worker.gone and not worker.killed and worker.served_at is not None
        ]
        if aim.pid is None or record.workers[aim.pid].gone:
            if not serving:
                aim.pid = aim.fire_at = None
                return False
            target = max(serving, key=lambda worker: worker.seen)
            aim.pid = target.pid
            aim.fire_at = now + self.rng.uniform(0.0, self.serving_window)
            aim.written = None
        worker = record.workers[aim.pid]
        assert aim.fire_at is not None
        if now < aim.fire_at:
            return aim.fire_at - now < 0.02
        if aim.category == "mid-batch":
            if now - worker.wrote_at >= MID_BATCH_GAP:
                self._kill(worker, aim, record, now)
            return True
        if aim.written is None:
            aim.written = worker.written
        elif worker.written != aim.written:
            self._kill(worker, aim, record, now)
        return True

    def _kill(self, worker: Worker, aim: Aim, record: Run, now: float) -> None:
        written = wchar(worker.pid)
        main_state = state(worker.pid)
        try:
            os.kill(worker.pid, signal.SIGKILL)
        except ProcessLookupError:
            worker.gone = True
            aim.pid = aim.fire_at = None  # gone already: aim again
            return
        worker.killed = True
        seen_written = worker.written if written is None else written
        record.kills.append(
            {
                "_fresh": True,
                "run": record.number,
                "category": aim.category,
                "t_s": round(now, 4),
                "worker_pid": worker.pid,
                "worker_age_s": round(now - worker.seen, 4),
                "since_last_write_ms": round((now - worker.wrote_at) * 1000, 1),
                "worker_wchar": seen_written,
                "stage_seen": self.stage(seen_written),
                "main_thread_state": main_state,
            }
        )
        log(
            f"  run {record.number}: kill {len(record.kills)} ({aim.category}) at "
            f"{now:.2f} s, worker age {now - worker.seen:.2f} s, "
            f"{(now - worker.wrote_at) * 1000:.0f} ms since its last write, "
            f"stage {self.stage(seen_written)}"
        )


# --- checks ---------------------------------------------------------------------------


def check(lines: list[str], reference: np.ndarray) -> dict[str, Any]:
    """Lost chunks (missing, null, not a vector, cosine < MIN_COSINE) and extra lines."""
    count = len(reference)
    lost: list[dict[str, Any]] = []
    cosines: list[float] = []
    for index in range(count):
        if index >= len(lines):
            lost.append({"chunk": index, "why": "missing"})
            continue
        try:
            value = json.loads(lines[index])
        except ValueError:
            lost.append({"chunk": index, "why": f"not JSON: {lines[index][:60]!r}"})
            continue
        if value is None:
            lost.append({"chunk": index, "why": "null"})
            continue
        if not isinstance(value, list) or len(value) != DIMENSION:
            size = len(value) if isinstance(value, list) else type(value).__name__
            lost.append({"chunk": index, "why": f"not a {DIMENSION}-vector ({size})"})
            continue
        vector = np.asarray(value, np.float64)
        norm = float(np.linalg.norm(vector))
        if not np.isfinite(vector).all() or norm == 0:
            lost.append({"chunk": index, "why": "NaN, inf or zero"})
            continue
        cosine = float(vector @ reference[index] / norm)
        cosines.append(cosine)
        if cosine < MIN_COSINE:
            scores = reference @ (vector / norm)
            best = int(np.argmax(scores))
            lost.append(
                {
                    "chunk": index,
                    "why": f"cosine {cosine:.4f}; best match chunk {best} ({scores[best]:.4f})",
                }
            )
    return {
        "lines": len(lines),
        "extra_lines": max(len(lines) - count, 0),
        "lost": lost,
        "min_cosine": min(cosines) if cosines else None,
    }


def summarize(record: Run, reference: np.ndarray) -> dict[str, Any]:
    checked = check(record.lines, reference)
    tail = record.stderr.strip().splitlines()[-15:]
    workers = [
        {
            "pid": worker.pid,
            "seen_s": round(worker.seen, 3),
            "served_at_s": None if worker.served_at is None else round(worker.served_at, 3),
            "peak_rss_mb": round(worker.peak_mb, 1),
            "killed_by_bench": worker.killed,
        }
        for worker in record.workers.values()
    ]
    ok = (
        record.returncode == 0
        and not record.timed_out
        and not checked["lost"]
        and not checked["extra_lines"]
    )
    return {
        "run": record.number,
        "kind": record.kind,
        "command": shlex.join(record.command),
        "fault": record.fault,
        "returncode": record.returncode,
        "timed_out": record.timed_out,
        "wall_s": round(record.wall_s, 2),
        "ok": ok,
        **checked,
        "kills": record.kills,
        "workers": workers,
        "parent_peak_rss_mb": round(record.parent_peak_mb, 1),
        "worker_peak_rss_mb": round(
            max((w.peak_mb for w in record.workers.values()), default=0), 1
        ),
        "finished_in_process": record.in_process,
        "stderr_tail": tail,
    }


def plan_run(rng: random.Random, left: int) -> list[str]:
    """1 to 3 kill categories; a start or admission kill of the first worker alone."""
    first = rng.choice(CATEGORIES)
    if first in ("start", "admission"):
        return [first]
    more = rng.randint(0, 2)
    return [first, *(rng.choice(CATEGORIES) for _ in range(more))][:left]


# --- main -----------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--kills", type=int, default=50, help="worker kills in all")
    parser.add_argument("--chunks", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="where to write the JSON record")
    parser.add_argument(
        "--run-timeout", type=float, default=900.0, help="seconds before a run is killed"
    )
    args = parser.parse_args()
    if not Path("/proc/self/io").exists():
        raise SystemExit("bench/lane_chaos.py reads /proc: Linux only")
    if not ANEKIT.is_file():
        raise SystemExit(f"no anekit command beside this Python: {ANEKIT}")
    began = time.monotonic()
    source_before = source_state()
    rng = random.Random(args.seed)
    chunks = code_chunks(args.chunks)
    reference, reference_path = reference_vectors(chunks)
    token, poisoned, candidates = poison_token(chunks, rng)
    log("calibrating a lane worker's start...")
    calibration = calibrate()
    median = calibration["median"]
    log(
        f"  admission frame at {median['admission_s']:.2f} s, hello at "
        f"{median['hello_s']:.2f} s after the worker starts"
    )
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="anekit-lane-chaos-") as directory:
        source = Path(directory) / "chunks.jsonl"
        source.write_text("".join(json.dumps({"text": text}) + "\n" for text in chunks))
        runner = Runner(source, calibration, rng, args.run_timeout)

        def report(record: Run) -> dict[str, Any]:
            result = summarize(record, reference)
            runs.append(result)
            log(
                f"  run {record.number} ({record.kind}): exit {result['returncode']}, "
                f"{result['wall_s']:.1f} s, {result['lines']} lines, {len(result['lost'])} "
                f"lost, {len(record.kills)} kill(s), parent {result['parent_peak_rss_mb']:.0f} "
                f"MB, worker {result['worker_peak_rss_mb']:.0f} MB"
                + (", finished in process" if record.in_process else "")
            )
            if not result["ok"] and record.kind != "poison":
                for line in result["stderr_tail"][-5:]:
                    log(f"    stderr: {line}")
            return result

        log("run 0: baseline, no faults...")
        baseline = runner.run(0, "baseline")
        report(baseline)
        served = [w.served_at for w in baseline.workers.values() if w.served_at is not None]
        if served:
            runner.serving_window = max(0.5, 0.7 * (baseline.wall_s - min(served)))
        number = 0
        landed = 0
        while landed < args.kills and number < 3 * args.kills:
            number += 1
            plan = plan_run(rng, args.kills - landed)
            log(f"run {number}: kills {plan}...")
            record = runner.run(number, "kills", plan)
            landed += len(record.kills)
            report(record)
        log(f"run {number + 1}: hung worker ({HANG_FAULT}, --deadline {HANG_DEADLINE:g})...")
        hang = report(
            runner.run(
                number + 1, "hang", fault=HANG_FAULT, extra=["--deadline", f"{HANG_DEADLINE:g}"]
            )
        )
        fault = f"cpu:kill-on:{token}"
        log(f"run {number + 2}: poisoned batch ({fault}: chunk {poisoned}, line {poisoned + 1})...")
        poison = report(runner.run(number + 2, "poison", fault=fault))
    total = time.monotonic() - began

    kill_runs = [run for run in runs if run["kind"] == "kills"]
    kills = [kill for run in kill_runs for kill in run["kills"]]
    by_category = Counter(kill["category"] for kill in kills)
    stages = Counter((kill["category"], kill["stage_seen"]) for kill in kills)
    chaos = [run for run in runs if run["kind"] in ("baseline", "kills")]
    lost = sum(len(run["lost"]) for run in chaos)
    failed = [run["run"] for run in chaos if not run["ok"]]
    poison_lost = [item["chunk"] for item in poison["lost"]]
    poison_ok = poison_lost == [poisoned] and poison["lost"][0]["why"] == "null"
    worker_peak = max((run["worker_peak_rss_mb"] for run in runs), default=0.0)
    lean = [run["parent_peak_rss_mb"] for run in runs if not run["finished_in_process"]]
    heavy = [run["parent_peak_rss_mb"] for run in runs if run["finished_in_process"]]
    parent_peak = max(lean, default=0.0)
    # Wall time of the kill runs that stayed on the lane, by kills landed: the cost of
    # recovering (restart, backoff, suspects embedded alone).
    wall_by_kills = {
        str(count): statistics.median(
            run["wall_s"]
            for run in kill_runs
            if len(run["kills"]) == count and not run["finished_in_process"]
        )
        for count in sorted(
            {len(run["kills"]) for run in kill_runs if not run["finished_in_process"]}
        )
    }
    today = datetime.date.today().isoformat()
    record = {
        "script": "bench/lane_chaos.py",
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "date": today,
        "machine": machine(),
        "python": platform.python_version(),
        "source": {"before": source_before, "after": source_state()},
        "settings": {
            "kills": args.kills,
            "chunks": args.chunks,
            "seed": args.seed,
            "min_cosine": MIN_COSINE,
            "mid_batch_gap_ms": MID_BATCH_GAP * 1000,
            "serving_window_s": round(runner.serving_window, 2),
            "reference": f"Embedder(runtime='numpy').encode, fp32 ({reference_path})",
        },
        "calibration": calibration,
        "summary": {
            "runs": len(runs),
            "kill_runs": len(kill_runs),
            "kills": len(kills),
            "kills_by_category": dict(by_category),
            "kills_by_category_and_stage_seen": {f"{c} / {s}": n for (c, s), n in stages.items()},
            "chunks_lost": lost,
            "runs_failed": failed,
            "kill_runs_finished_in_process": sum(run["finished_in_process"] for run in kill_runs),
            "hang": {key: hang[key] for key in ("ok", "returncode", "wall_s", "lines")}
            | {"lost": len(hang["lost"]), "finished_in_process": hang["finished_in_process"]},
            "poison": {
                "token_id": token,
                "chunk": poisoned,
                "candidates": candidates,
                "returncode": poison["returncode"],
                "lines": poison["lines"],
                "lost": poison["lost"][:10],
                "as_expected": poison_ok,
            },
            "peak_rss_mb": {
                "worker": worker_peak,
                "worker_target": WORKER_TARGET_MB,
                "worker_met": worker_peak <= WORKER_TARGET_MB,
                "parent": parent_peak,
                "parent_target": PARENT_TARGET_MB,
                "parent_met": parent_peak <= PARENT_TARGET_MB,
                "parent_runs_finished_in_process": max(heavy, default=None),
            },
            "baseline_wall_s": runs[0]["wall_s"],
            "kill_run_wall_s": wall_by_kills,
            "wall_s": round(total, 1),
        },
        "runs": runs,
    }
    output = args.json or RESULTS / f"lane_chaos-{today}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(redacted(record), indent=2) + "\n")

    def met(value: bool) -> str:
        return "met" if value else "**not met**"

    print(f"# Lane chaos, {today}\n")
    print(f"{machine()}, Python {platform.python_version()}; `{record['command']}`\n")
    after = record["source"]["after"]
    print(
        f"anekit from {after['anekit']}"
        + (f", commit {after['commit'][:12]}" if after.get("commit") else "")
        + (
            " (**src edited during or before the run**)"
            if source_before.get("src_changed") or after.get("src_changed")
            else ""
        )
        + "\n"
    )
    print(
        f"{args.chunks} code chunks, default lanes (the CPU lane), seed {args.seed}; "
        f"every line checked against the fp32 reference at cosine >= {MIN_COSINE}.\n"
    )
    print("| what | result |")
    print("|---|---|")
    print(f"| runs | {len(runs)}: 1 baseline, {len(kill_runs)} with kills, 1 hung, 1 poisoned |")
    listed = ", ".join(f"{category} {by_category.get(category, 0)}" for category in CATEGORIES)
    print(f"| kills | {len(kills)}: {listed} |")
    seen = ", ".join(f"{c} seen {s}: {n}" for (c, s), n in sorted(stages.items()))
    print(f"| kill moments (aimed, stage the worker's writes show) | {seen} |")
    print(f"| chunks lost (baseline and kill runs) | {lost} |")
    print(
        f"| runs failed (baseline and kill runs) | {len(failed)}"
        f"{': ' + str(failed) if failed else ''} |"
    )
    in_process = record["summary"]["kill_runs_finished_in_process"]
    print(f"| kill runs finished in the parent process | {in_process} |")
    print(
        f"| hung worker (`{HANG_FAULT}`, `--deadline {HANG_DEADLINE:g}`) | "
        f"{'complete' if hang['ok'] else '**failed**'}: exit {hang['returncode']}, "
        f"{hang['wall_s']:.1f} s, {len(hang['lost'])} lost"
        f"{', finished in process' if hang['finished_in_process'] else ''} |"
    )
    print(
        f"| poisoned batch (`{fault}`, chunk {poisoned}) | exit {poison['returncode']}, "
        f"{poison['lines']} lines, lost {poison_lost[:10]}: "
        f"{'as expected (its line null, the rest there)' if poison_ok else '**not as expected**'} |"
    )
    print(
        f"| peak RSS, worker | {worker_peak:.0f} MB (target {WORKER_TARGET_MB:.0f}: "
        f"{met(worker_peak <= WORKER_TARGET_MB)}) |"
    )
    heavy_text = f"; runs finished in process: {max(heavy):.0f} MB" if heavy else ""
    print(
        f"| peak RSS, parent | {parent_peak:.0f} MB (target {PARENT_TARGET_MB:.0f}: "
        f"{met(parent_peak <= PARENT_TARGET_MB)}){heavy_text} |"
    )
    print(f"| baseline run (no faults) | {runs[0]['wall_s']:.1f} s |")
    walls = ", ".join(f"{count} kill(s) {wall:.1f} s" for count, wall in wall_by_kills.items())
    print(f"| kill runs that stayed on the lane, median wall | {walls or 'none'} |")
    print(f"| total wall time | {total:.0f} s |")
    print(f"\nJSON record: {output}")


if __name__ == "__main__":
    main()
