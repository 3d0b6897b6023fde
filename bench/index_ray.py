"""``anekit index --ray`` against the single-process CPU lane, like with like, and a
simulated multi-node Ray cluster (issue 19).

The corpus: this checkout's ``src`` and ``docs`` folders, copied once (a real code base,
deterministic). Every run indexes a fresh copy into a fresh store with no machine cache,
so every chunk is embedded.

- ``local-cpu``: ``Index(root, lanes=["cpu"])``, the CPU lane as ``anekit index`` runs it:
  one ONNX Runtime int8 worker process, its threads ONNX Runtime's default (every core).
- ``ray-2x1``: ``Index(root, lanes=["cpu"], ray=...)`` on a local Ray instance of this
  machine's cores, sized by the cluster: one actor a core, one thread each. The instance
  is started once, before timing (as a cluster is, before anyone indexes against it).

Method: one warm-up run of each side (it builds the ONNX model and starts Ray), then
``--passes`` passes, each running both sides in turn, the first side alternating. Per
run: the whole update's wall time and the embedding phase's rate (chunks from the first
vector to the last), the peak resident memory of the process tree (the driver, the lane
worker or the Ray processes, sampled every 0.1 s from /proc), and the store's contents:
the two sides must hold the same files and chunks, and their vectors' cosines are
reported (int8 batch noise). Reported: medians and ranges over the passes, and the ratio
of medians (Ray over local: below 1 means Ray is slower).

Then the simulated multi-node run (``ray.cluster_utils.Cluster``): a head and worker
"nodes" on this machine, each a raylet with ``--cpus-per-node`` CPUs (default 1), and the
index run with 1, then 2 nodes: per-node rates and the total. With two cores here,
scaling stops at two actors; that is the limit of this machine, not of the design.

    .venv/bin/python bench/index_ray.py [--passes 3] [--save bench/results/index-ray-DATE.json]
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmachine import emit, machine, source_state

CHECKOUT = Path(__file__).resolve().parent.parent


def tree_rss_mb(root_pid: int) -> float:
    """The resident memory of ``root_pid`` and every process under it, in MB (/proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        pid, ppid = int(entry.name), int(fields.get("PPid", "0").strip())
        children.setdefault(ppid, []).append(pid)
        rss[pid] = int(fields.get("VmRSS", "0 kB").split()[0])
    total, stack = 0, [root_pid]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack += children.get(pid, [])
    return total / 1024


class PeakSampler:
    """The largest :func:`tree_rss_mb` of this process's tree while it runs."""

    def __init__(self, interval: float = 0.1) -> None:
        self.interval, self.peak = interval, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss_mb(os.getpid()))
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def corpus(where: Path) -> Path:
    root = where / "corpus"
    for name in ("src", "docs"):
        shutil.copytree(CHECKOUT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def store_vectors(root: Path) -> dict[tuple[str, int, int], np.ndarray]:
    import sqlite3

    db = sqlite3.connect(root / ".anekit" / "store.db")
    try:
        rows = db.execute(
            "SELECT f.relpath, c.start_line, c.end_line, v.vector FROM chunks c "
            "JOIN files f ON f.id = c.file_id JOIN vectors v ON v.chunk_id = c.id"
        ).fetchall()
    finally:
        db.close()
    return {(p, s, e): np.frombuffer(blob, "<f2").astype(np.float32) for p, s, e, blob in rows}


def one_run(source: Path, work: Path, ray: str | None) -> dict[str, Any]:
    """Index a fresh copy of ``source``; the run's figures and its vectors."""
    from anekit.search.index import Index, Progress

    root = work / f"run-{time.monotonic_ns()}"
    shutil.copytree(source, root)
    times: list[float] = []

    def progress(step: Progress) -> None:
        times.append(time.perf_counter())

    with PeakSampler() as sampler:
        started = time.perf_counter()
        with Index(root, lanes=["cpu"], cache=False, ray=ray) as index:
            summary = index.update(progress=progress)
        seconds = time.perf_counter() - started
    assert not summary.failed, summary.failed
    embedding = (times[-1] - times[0]) if len(times) > 1 else seconds
    vectors = store_vectors(root)
    shutil.rmtree(root)
    return {
        "chunks": summary.embedded,
        "files": summary.indexed,
        "seconds": seconds,
        "chunks_per_s": summary.embedded / seconds,
        "embedding_chunks_per_s": (len(times) - 1) / embedding if len(times) > 1 else None,
        "peak_mb": sampler.peak,
        "nodes": summary.nodes,
        "lane": summary.lane,
        "vectors": vectors,
    }


def cosines(a: dict[Any, np.ndarray], b: dict[Any, np.ndarray]) -> dict[str, float]:
    assert a.keys() == b.keys(), "the two sides stored different chunks"
    keys = sorted(a)
    x = np.stack([a[k] for k in keys])
    y = np.stack([b[k] for k in keys])
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    c = (x * y).sum(1)
    return {"min": float(c.min()), "mean": float(c.mean())}


def summarize(runs: list[dict[str, Any]], key: str) -> dict[str, float]:
    values = [run[key] for run in runs if run[key] is not None]
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def compare(source: Path, work: Path, passes: int, say: Callable[[str], None]) -> dict[str, Any]:
    import ray

    ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False,
             object_store_memory=256 * 1024**2)  # fmt: skip
    sides: dict[str, str | None] = {"local-cpu": None, "ray": "local"}
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    try:
        for side, address in sides.items():
            say(f"warm-up: {side}")
            one_run(source, work, address)
        for index in range(passes):
            order = list(sides) if index % 2 == 0 else list(reversed(sides))
            for side in order:
                say(f"pass {index + 1}/{passes}: {side}")
                runs[side].append(one_run(source, work, sides[side]))
        resources = ray.cluster_resources()
    finally:
        ray.shutdown()
    fidelity = cosines(runs["local-cpu"][-1]["vectors"], runs["ray"][-1]["vectors"])
    table = {
        side: {
            "chunks": items[0]["chunks"],
            "files": items[0]["files"],
            "chunks_per_s": summarize(items, "chunks_per_s"),
            "embedding_chunks_per_s": summarize(items, "embedding_chunks_per_s"),
            "seconds": summarize(items, "seconds"),
            "peak_mb": summarize(items, "peak_mb"),
            "lane": items[-1]["lane"],
            "nodes": items[-1]["nodes"],
        }
        for side, items in runs.items()
    }
    ratio = table["ray"]["chunks_per_s"]["median"] / table["local-cpu"]["chunks_per_s"]["median"]
    embedding_ratio = (
        table["ray"]["embedding_chunks_per_s"]["median"]
        / table["local-cpu"]["embedding_chunks_per_s"]["median"]
    )
    return {
        "sides": table,
        "ray_resources": {key: value for key, value in resources.items() if key == "CPU"},
        "ratio_whole_update": ratio,
        "ratio_embedding_phase": embedding_ratio,
        "ratios_mean": "Ray's median chunks/s over the local CPU lane's (1.0 = equal; "
        "below 1 = Ray slower): whole update (startup and admission included), and the "
        "embedding phase alone (first vector to last)",
        "vectors_ray_vs_local_cosine": fidelity,
    }


def multi_node(source: Path, work: Path, cpus: int, say: Callable[[str], None]) -> dict[str, Any]:
    """1 node, then 2 nodes of ``cpus`` CPUs each, on this machine (ray.cluster_utils)."""
    import ray
    from ray.cluster_utils import Cluster

    results = []
    for nodes in (1, 2):
        say(f"simulated cluster: {nodes} node(s) x {cpus} CPU(s)")
        simulated = Cluster(
            initialize_head=True,
            head_node_args={"num_cpus": cpus, "include_dashboard": False,
                            "object_store_memory": 128 * 1024**2},
        )  # fmt: skip
        for _ in range(nodes - 1):
            simulated.add_node(num_cpus=cpus, object_store_memory=128 * 1024**2)
        ray.init(address=simulated.address, log_to_driver=False, configure_logging=False)
        try:
            one_run(source, work, simulated.address)  # warm-up: actors start, models load
            run = one_run(source, work, simulated.address)
        finally:
            ray.shutdown()
            simulated.shutdown()
        run.pop("vectors")
        results.append({"nodes": nodes, "cpus_per_node": cpus, **run})
    return {
        "runs": results,
        "scaling_whole_update": results[1]["chunks_per_s"] / results[0]["chunks_per_s"],
        "limits": f"{os.cpu_count()} cores on this machine: every simulated node shares them",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--cpus-per-node", type=int, default=1)
    parser.add_argument("--save", type=Path, default=None)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="anekit-index-ray-") as scratch:
        work = Path(scratch)
        os.environ["ANEKIT_HOME"] = str(work / "home")  # fresh caches, no machine cache
        source = corpus(work)
        record = {
            "benchmark": "index-ray",
            "command": "python " + " ".join(sys.argv),
            "date": datetime.date.today().isoformat(),
            "machine": machine(),
            "source": source_state(),
            "corpus": "this checkout's src and docs",
            "passes": args.passes,
            "local_vs_ray": compare(source, work, args.passes, say),
            "simulated_multi_node": multi_node(source, work, args.cpus_per_node, say),
        }
    emit(record, args.save)


if __name__ == "__main__":
    main()
