"""Code search at scale: indexing throughput and peak memory with the CPU lane, warm query
latency at 10k and 100k chunks, and the re-index of an unchanged repository, in one run.

1. Indexing, on the dev corpora (attrs, httpx, rich: ``retrieval_corpora.py``; or any
   folders given to ``--corpora``). An ``index`` run is a fresh process doing
   ``Index(corpus, store=<new folder>, lanes=["cpu"], cache=False).update()``: no machine
   cache, an empty store, so every chunk is embedded. Throughput = ``summary.embedded`` /
   the update's wall time (walk, read, chunk, tokenize, start the lane, embed, write the
   store). A ``raw`` run is a fresh process that first cuts the same model texts as the
   indexer (walk, read_file, chunk_file, model_text; untimed), then times
   ``Embedder(lanes=["cpu"])`` and ``scheduler.start()`` (the lane start), ``tokenize`` and
   ``embed_ids``. Raw rates: *cold* = chunks / (start + tokenize + embed), like for like
   with the update (which also starts its lane and tokenizes): the judged ratio is index /
   raw cold; *warm* = chunks / (tokenize + embed), the lane already up: index / raw warm is
   shown as the strict ratio; *pre-tokenized* = chunks / embed. Both runs use the defaults
   the indexer uses (threads, max length). Peak memory: a thread in the run's process
   samples ``/proc`` every 0.2 s for its descendants (the lane worker(s), found through
   ``/proc/<pid>/task/*/children``) and once more just before the lane is closed; reported
   are the process's VmHWM, the workers' VmHWM (the largest sum over workers alive at one
   sample), their sum (an upper bound of the joint peak: the two peaks need not coincide)
   and the largest sampled VmRSS of process + workers together (a lower bound of it); also
   the CPU seconds of the process (timed part) and of its workers, which a busy machine
   inflates less than the wall times. Passes alternate index and raw for each corpus, the
   order flipping from pass to pass; medians and ranges over the passes, and a "total" row
   (all corpora's chunks over all their seconds, per pass).

2. Query latency, on stores of about ``--sizes`` chunks made from this Python's standard
   library. A *base* (``copy0/``: the library's ``.py`` files in path order, up to
   ``--base-chunks`` chunks, default the smallest size at most 10,000) is indexed through
   the CPU lane with real embeddings (machine cache on, so a rerun takes the vectors from
   it). A store of size S indexes a root holding copies ``copy0/ copy1/ ...`` of the base
   files (hard links), the last one partial, until S chunks. The copies' model texts differ
   from the base's by their path only, so each has its own cache key: their vectors are
   *reused*, not embedded: copy i's chunk gets the base chunk's real vector, written under
   copy i's key into a private vector cache (a file in the work folder) from which the
   indexer (``Index(tree, store, cache=<private cache>).update()``) fills every chunk, with
   no lane started. So the store is written by the indexer itself (files, chunks, FTS rows,
   vectors), with S rows of real vectors of which each distinct one appears about S / base
   times. Queries run in a fresh process holding one ``Index``: 30 fixed queries (20 from
   ``retrieval_questions.json``, questions and identifiers, and 10 standard-library
   identifiers), ``k=10``, in each mode; the first query (cold: store opened, vector matrix
   read or built, query model loaded) is reported apart, then one warm-up query per mode,
   then ``--repeats`` passes (at least 3) over all queries in every mode (the mode order
   rotating). Latency is ``Index.search`` end to end (the query embedding included); the
   embedding alone (``Index._query_vector``) is timed too. p50/p95/max over all the warm
   queries of the passes, and the range of the passes' p50s.

3. Re-index of an unchanged repository: a tree of ``--reindex-files`` files (copies of the
   base files, as above), indexed once (from the private cache), then indexed again in a
   fresh process (``--repeats`` passes, at least 3): ``Index(tree, store,
   lanes=["cpu"]).update()`` timed inside the process (imports and start excluded) and the
   whole process timed from outside (included), alternating with the command ``anekit index
   TREE --store STORE --lane cpu --json`` (what a user runs, timed from outside). Each pass
   checks that no file was indexed, nothing embedded and no lane started (``Index._pool
   is None``); before it, the store's chunker version is checked against the source's (a
   source edit that moves it mid-run would otherwise re-embed everything). The files are in
   the OS page cache (warm).

    .venv/bin/python bench/search_scale.py [--quick] [--sizes 10000,100000] [--repeats 3]
        [--corpora attrs,httpx,rich] [--skip-index] [--skip-query] [--skip-reindex]
        [--reindex-files 1000] [--base-chunks N] [--workdir DIR] [--json PATH]

``--quick`` (a check that the script works, about 2 minutes on a quiet machine): ``--sizes
2000 --corpora httpx --repeats 1`` (queries and re-index still take 3 passes). Writes
Markdown tables and the targets met or missed to stdout and a JSON record (date, command,
machine, versions, source state, every pass) to ``--json`` (default
``bench/results/search_scale-<date>.json``). A full run (the defaults) takes about 15
minutes on a quiet 2-core machine, 2 more the first time (the 10k-chunk base is embedded;
later runs find it in the machine cache); run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmachine import machine, peak_memory_mb, redacted, source_state

RESULTS = Path(__file__).resolve().parent / "results"
QUESTIONS = Path(__file__).resolve().parent / "retrieval_questions.json"
MODES = ("hybrid", "vector", "keyword")
K = 10
LANES = ["cpu"]
SAMPLE_SECONDS = 0.2
MAX_BASE_CHUNKS = 10_000
#: Questions taken from retrieval_questions.json (evenly spaced), then these identifiers.
QUESTION_COUNT = 20
IDENTIFIERS = (
    "ArgumentParser.add_argument", "run_until_complete", "b64encode", "namedtuple",
    "ThreadPoolExecutor", "ConfigParser.read", "contextmanager", "deepcopy",
    "SequenceMatcher.get_opcodes", "_make_iterencode",
)  # fmt: skip
#: The issue's targets.
QUERY_P50_MS = 10.0
QUERY_P95_MS = 30.0
TARGET_SIZE = 100_000
PEAK_RSS_MB = 400.0
THROUGHPUT_RATIO = 0.90
REINDEX_SECONDS = 2.0


# --- memory, from /proc ---------------------------------------------------------------------


def _status_kb(pid: int) -> dict[str, int]:
    """VmHWM and VmRSS (kB) of a process; empty when it is gone."""
    values: dict[str, int] = {}
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return values
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            values[key] = int(rest.split()[0])
    return values


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process (``/proc/<pid>/stat``); None when gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    """A process's children: ``/proc/<pid>/task/*/children``, else a scan of ``/proc``."""
    if Path(f"/proc/{pid}/task/{pid}/children").exists():
        found: list[int] = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                found += [int(item) for item in (task / "children").read_text().split()]
            except OSError:
                continue
        return found
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                children.append(int(entry.name))
    return children


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    stack = [pid]
    while stack:
        for child in _children(stack.pop()):
            found.append(child)
            stack.append(child)
    return found


class MemorySampler:
    """Samples this process's descendants (the lane workers) every :data:`SAMPLE_SECONDS`:
    each worker's VmHWM and CPU time, the largest sum of the workers' VmHWM at one sample,
    and the largest VmRSS of this process and its workers together. CPU seconds count from
    :meth:`start` (this process) or the worker's start."""

    def __init__(self) -> None:
        self.worker_hwm_kb: dict[int, int] = {}
        self.worker_cpu_s: dict[int, float] = {}
        self._cpu_start = 0.0
        self.workers_peak_kb = 0
        self.joint_rss_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> MemorySampler:
        times = os.times()
        self._cpu_start = times.user + times.system
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            self.sample()

    def sample(self) -> None:
        own = _status_kb(os.getpid()).get("VmRSS", 0)
        hwm = rss = 0
        for pid in _descendants(os.getpid()):
            status = _status_kb(pid)
            if not status:
                continue
            self.worker_hwm_kb[pid] = max(self.worker_hwm_kb.get(pid, 0), status["VmHWM"])
            cpu = _cpu_seconds(pid)
            if cpu is not None:
                self.worker_cpu_s[pid] = max(self.worker_cpu_s.get(pid, 0.0), cpu)
            hwm += status["VmHWM"]
            rss += status["VmRSS"]
        self.workers_peak_kb = max(self.workers_peak_kb, hwm)
        self.joint_rss_kb = max(self.joint_rss_kb, own + rss)

    def finish(self) -> dict[str, Any]:
        """One last sample (call it while the workers are alive); the peaks in MB."""
        self._stop.set()
        self._thread.join()
        self.sample()
        process = peak_memory_mb()
        workers = self.workers_peak_kb / 1024
        times = os.times()
        return {
            "cpu_process_s": times.user + times.system - self._cpu_start,
            "cpu_workers_s": sum(self.worker_cpu_s.values()),
            "process_mb": process,
            "workers_mb": workers,
            "sum_of_peaks_mb": process + workers,
            "joint_rss_sampled_mb": self.joint_rss_kb / 1024,
            "worker_pids": len(self.worker_hwm_kb),
        }


# --- the runs, each in a fresh process ------------------------------------------------------


def indexer_chunks(root: Path) -> list[tuple[str, list[Any]]]:
    """(relpath, chunks) of every file the indexer would read under ``root``."""
    from anekit.search.chunk import chunk_file
    from anekit.search.walk import Skipped, read_file, walk

    files = []
    for entry in walk(root).files:
        read = read_file(entry)
        if not isinstance(read, Skipped):
            files.append((entry.relpath, chunk_file(entry.relpath, read.text)))
    return files


def _child_index(spec: dict[str, Any]) -> dict[str, Any]:
    from anekit.search.index import Index

    sampler = MemorySampler().start()
    index = Index(spec["root"], store=spec["store"], lanes=LANES, cache=False)
    start = time.perf_counter()
    summary = index.update()
    seconds = time.perf_counter() - start
    memory = sampler.finish()
    lane_started = index._pool is not None
    with index.store.read():  # one embedding per distinct model text
        (distinct,) = index.store._conn.execute(
            "SELECT COUNT(DISTINCT text_hash) FROM chunks"
        ).fetchone()
    index.close()
    return {
        "seconds": seconds,
        "embedded": summary.embedded,
        "distinct": distinct,
        "cached": summary.cached,
        "chunks": summary.chunks,
        "files": summary.files,
        "failed": len(summary.failed),
        "lane": summary.lane,
        "lane_started": lane_started,
        "memory": memory,
    }


def _child_raw(spec: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    from anekit.embedder import Embedder
    from anekit.lanes.scheduler import Scheduler
    from anekit.search.chunk import model_text

    texts = [
        model_text(relpath, chunk)
        for relpath, chunks in indexer_chunks(Path(spec["root"]))
        for chunk in chunks
    ]
    sampler = MemorySampler().start()
    start = time.perf_counter()
    embedder = Embedder(lanes=LANES)
    pool = embedder.pool
    assert isinstance(pool, Scheduler)  # lanes on this machine
    pool.start()
    started = time.perf_counter()
    token_ids = embedder.tokenize(texts)
    tokenized = time.perf_counter()
    vectors = embedder.embed_ids(token_ids)
    done = time.perf_counter()
    memory = sampler.finish()
    fallback = pool.summary.fallback
    embedder.close()
    return {
        "chunks": len(texts),
        "finite": int(np.isfinite(vectors).all(axis=1).sum()),
        "start_s": started - start,
        "tokenize_s": tokenized - started,
        "embed_s": done - tokenized,
        "fallback": fallback,
        "memory": memory,
    }


def queries() -> list[str]:
    """The fixed query list: questions and identifiers of the retrieval set, evenly
    spaced, then standard-library identifiers."""
    items = json.loads(QUESTIONS.read_text(encoding="utf-8"))
    step = max(len(items) // QUESTION_COUNT, 1)
    return [item["question"] for item in items[::step][:QUESTION_COUNT]] + list(IDENTIFIERS)


def _child_query(spec: dict[str, Any]) -> dict[str, Any]:
    from anekit.search.index import Index

    asked = queries()
    index = Index(spec["root"], store=spec["store"], lanes=LANES, cache=False)
    start = time.perf_counter()
    index.search(asked[0], k=K, mode="hybrid")
    first_ms = (time.perf_counter() - start) * 1000
    # The warm-up: one unmeasured pass of every query per mode (a process's first pass
    # also fills its caches of the store's paths and pages: reported as warm_up_ms).
    warm_up: dict[str, list[float]] = {}
    for mode in MODES:
        for query in asked:
            start = time.perf_counter()
            index.search(query, k=K, mode=mode)
            warm_up.setdefault(mode, []).append((time.perf_counter() - start) * 1000)
    samples: dict[str, list[list[float]]] = {mode: [] for mode in (*MODES, "embedding")}
    hits: dict[str, int] = dict.fromkeys(MODES, 0)
    for number in range(spec["repeats"]):
        order = MODES[number % len(MODES) :] + MODES[: number % len(MODES)]
        for mode in order:
            times = []
            for query in asked:
                start = time.perf_counter()
                found = index.search(query, k=K, mode=mode)
                times.append((time.perf_counter() - start) * 1000)
                hits[mode] += len(found)
            samples[mode].append(times)
        times = []
        for query in asked:
            start = time.perf_counter()
            index._query_vector(query)
            times.append((time.perf_counter() - start) * 1000)
        samples["embedding"].append(times)
    stats = index.store.stats()
    index.close()
    return {
        "first_query_ms": first_ms,
        "warm_up_ms": warm_up,
        "samples_ms": samples,
        "hits": hits,
        "store": {key: stats[key] for key in ("files", "chunks") if key in stats},
        "process_peak_mb": peak_memory_mb(),
    }


def _child_reindex(spec: dict[str, Any]) -> dict[str, Any]:
    start = time.perf_counter()
    from anekit.search.index import Index

    imported = time.perf_counter()
    from anekit.search.chunk import CHUNKER_VERSION  # loaded with the index already
    from anekit.search.store import Store

    with Store(Path(spec["store"]), create=False) as store:
        stored = store.identity
    if stored is None or stored.chunker != CHUNKER_VERSION:  # all would be embedded again
        raise SystemExit(f"the store's chunker is not {CHUNKER_VERSION}: source edited?")
    begun = time.perf_counter()
    index = Index(spec["root"], store=spec["store"], lanes=LANES)
    summary = index.update()
    done = time.perf_counter()
    lane_started = index._pool is not None
    index.close()
    return {
        "imports_s": imported - start,
        "update_s": done - begun,
        "lane_started": lane_started,
        "files": summary.files,
        "unchanged": summary.unchanged,
        "indexed": summary.indexed,
        "embedded": summary.embedded,
    }


CHILDREN = {
    "index": _child_index,
    "raw": _child_raw,
    "query": _child_query,
    "reindex": _child_reindex,
}


def run_child(kind: str, **spec: Any) -> dict[str, Any]:
    """Run one measurement in a fresh process; its JSON answer, with ``process_s`` (the
    process's wall time seen from here)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = Path(handle.name)
    try:
        command = [sys.executable, __file__, "--child", kind, "--spec", json.dumps(spec)]
        command += ["--output", str(out)]
        start = time.perf_counter()
        done = subprocess.run(command, stdout=sys.stderr, check=False)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"the {kind} run exited with {done.returncode}")
        answer: dict[str, Any] = json.loads(out.read_text())
    finally:
        out.unlink(missing_ok=True)
    answer["process_s"] = wall
    return answer


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- 1. indexing throughput -------------------------------------------------------------------


def _spread(values: Sequence[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def bench_indexing(corpora: list[str], repeats: int, work: Path) -> dict[str, Any]:
    from retrieval_corpora import corpus_root

    roots = {
        name: Path(name).resolve() if Path(name).is_dir() else corpus_root(name) for name in corpora
    }
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        name: {"index": [], "raw": []} for name in corpora
    }
    for number in range(repeats):
        for name in corpora:
            order = ("index", "raw") if number % 2 == 0 else ("raw", "index")
            for kind in order:
                time.sleep(1.0)
                store = work / "index-stores" / f"{name}-{number}"
                shutil.rmtree(store, ignore_errors=True)
                answer = run_child(kind, root=str(roots[name]), store=str(store))
                shutil.rmtree(store, ignore_errors=True)
                runs[name][kind].append(answer)
                seconds = answer.get("seconds") or sum(
                    answer[key] for key in ("start_s", "tokenize_s", "embed_s")
                )
                _say(f"pass {number + 1}: {name} {kind} {seconds:.1f} s")
    rows: dict[str, dict[str, Any]] = {}
    for name in corpora:
        index, raw = runs[name]["index"], runs[name]["raw"]
        rows[name] = _index_row(index, raw)
        if any(item["embedded"] != item["distinct"] or item["failed"] for item in index):
            rows[name]["warning"] = "some texts were not embedded, or the store held others"
        if any(item["finite"] != item["chunks"] or item["fallback"] for item in raw):
            rows[name]["warning"] = "the raw lane left rows unembedded or fell back in process"
        if any(item["lane"] != "cpu" for item in index):
            rows[name]["warning"] = "the index did not embed with the CPU lane alone"
        if any(item["chunks"] != raw[0]["chunks"] for item in index + raw):
            rows[name]["warning"] = "the index and raw runs saw different chunk counts"
    totals = [
        {
            "seconds": sum(runs[name]["index"][number]["seconds"] for name in corpora),
            "embedded": sum(runs[name]["index"][number]["embedded"] for name in corpora),
            "memory": {},
        }
        for number in range(repeats)
    ]
    raw_totals = [
        {
            "chunks": sum(runs[name]["raw"][number]["chunks"] for name in corpora),
            **{
                key: sum(runs[name]["raw"][number][key] for name in corpora)
                for key in ("start_s", "tokenize_s", "embed_s")
            },
            "memory": {},
        }
        for number in range(repeats)
    ]
    rows["total"] = _index_row(totals, raw_totals)
    return {"roots": {name: str(root) for name, root in roots.items()}, "rows": rows, "runs": runs}


def _index_row(index: list[dict[str, Any]], raw: list[dict[str, Any]]) -> dict[str, Any]:
    """Rates (medians over the passes), their ratios and the peaks of one corpus."""
    index_rates = [item["embedded"] / item["seconds"] for item in index]
    cold = [
        item["chunks"] / (item["start_s"] + item["tokenize_s"] + item["embed_s"]) for item in raw
    ]
    warm = [item["chunks"] / (item["tokenize_s"] + item["embed_s"]) for item in raw]
    pretokenized = [item["chunks"] / item["embed_s"] for item in raw]
    row: dict[str, Any] = {
        "chunks": index[0]["embedded"],
        "index_chunks_per_s": _spread(index_rates),
        "raw_cold_chunks_per_s": _spread(cold),
        "raw_warm_chunks_per_s": _spread(warm),
        "raw_pretokenized_chunks_per_s": _spread(pretokenized),
        "lane_start_s": _spread([item["start_s"] for item in raw]),
        "ratio_cold": statistics.median(index_rates) / statistics.median(cold),
        "ratio_warm": statistics.median(index_rates) / statistics.median(warm),
    }
    if index[0]["memory"]:
        for run, items in (("index", index), ("raw", raw)):
            row[f"{run}_memory_mb"] = {
                key: max(item["memory"][key] for item in items)
                for key in ("process_mb", "workers_mb", "sum_of_peaks_mb", "joint_rss_sampled_mb")
            }
            row[f"{run}_cpu_s"] = {
                key: statistics.median(item["memory"][f"cpu_{key}_s"] for item in items)
                for key in ("process", "workers")
            }
        row["lanes"] = sorted({item["lane"] for item in index})
        row["raw_fallback"] = sorted({str(item["fallback"]) for item in raw if item["fallback"]})
    return row


# --- 2. and 3.: stores from the standard library ----------------------------------------------


@dataclass
class Base:
    """The base copy: its files (relpath under ``copy0/``, chunks) and real vectors."""

    root: Path
    files: list[tuple[str, list[Any]]] = field(default_factory=list)
    vectors: list[Any] = field(default_factory=list)  # per file: (chunks, dim) fp16
    summary: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def make_base(work: Path, chunk_limit: int) -> Base:
    """Copy the standard library's ``.py`` files (path order) until ``chunk_limit``
    chunks into ``base/copy0/`` and index them with the CPU lane (machine cache on)."""
    import numpy as np

    from anekit.search.chunk import model_text
    from anekit.search.index import Index
    from anekit.search.walk import walk

    library = Path(sysconfig.get_paths()["stdlib"])
    base = Base(work / "base")
    target = base.root / "copy0"
    shutil.rmtree(target, ignore_errors=True)  # copy2 keeps mtimes: a kept store stays valid
    count = 0
    for entry in sorted(walk(library).files, key=lambda item: item.relpath):
        if count >= chunk_limit:
            break
        if not entry.relpath.endswith(".py") or "site-packages" in entry.relpath:
            continue
        destination = target / entry.relpath
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(entry.path, destination)
        for _, chunks in indexer_chunks_of(base.root, f"copy0/{entry.relpath}"):
            count += len(chunks)
    files = indexer_chunks(base.root)
    _say(f"base: {len(files)} files, {sum(len(c) for _, c in files)} chunks; indexing...")
    with Index(base.root, store=work / "store-base", lanes=LANES, cache=True) as index:
        start = time.perf_counter()
        summary = index.update()
        base.seconds = time.perf_counter() - start
        base.summary = {
            key: value
            for key, value in summary.as_dict().items()
            if key in ("files", "indexed", "embedded", "cached", "chunks", "failed", "lane")
        }
        for relpath, chunks in files:
            if relpath in summary.failed:
                continue
            hashes = [_hash(model_text(relpath, chunk)) for chunk in chunks]
            known = index.store.known_vectors(hashes)
            if hashes and all(item in known for item in hashes):  # an empty file: no chunks
                base.files.append((relpath, chunks))
                base.vectors.append(np.stack([known[item] for item in hashes]))
    _say(f"base indexed in {base.seconds:.1f} s: {base.summary}")
    return base


def indexer_chunks_of(root: Path, relpath: str) -> list[tuple[str, list[Any]]]:
    """(relpath, chunks) of one file, as the indexer cuts it (none if it skips it)."""
    from anekit.search.chunk import chunk_file
    from anekit.search.walk import FileEntry, Skipped, read_file

    path = root / relpath
    stat = path.stat()
    read = read_file(FileEntry(path, relpath, stat.st_size, stat.st_mtime_ns))
    return [] if isinstance(read, Skipped) else [(relpath, chunk_file(relpath, read.text))]


def perturbed(vectors: Any, copy: int, number: int, noise: float) -> Any:
    """Copy ``copy``'s vectors of base file ``number``: each unit base vector plus Gaussian
    noise of expected norm ``noise`` (seeded by copy and file), made unit again, as fp16.
    Copy 0 and a ``noise`` of 0 keep the base vectors."""
    import numpy as np

    if copy == 0 or noise == 0:
        return vectors
    rows = vectors.astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    rng = np.random.default_rng([copy, number])
    rows += rng.standard_normal(rows.shape, dtype=np.float32) * (noise / rows.shape[1] ** 0.5)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows.astype(np.float16)


class Trees:
    """Roots of copies of the base (hard links) and the private cache holding their
    vectors: copy i's chunk gets the base chunk's vector under copy i's cache key
    (:func:`perturbed` by ``noise``, when given: then no two copies share a vector)."""

    def __init__(self, base: Base, work: Path, noise: float = 0.0) -> None:
        from anekit.search.cache import VectorCache
        from anekit.search.index import Index

        self.base = base
        self.work = work
        self.cache = VectorCache(work / "private-cache.db", max_bytes=1 << 40)
        self.namespace = Index(base.root, store=work / "store-base", lanes=LANES).identity().key()
        self.cached: set[tuple[int, int]] = set()
        self.noise = noise

    def make(self, label: str, chunks: int | None = None, files: int | None = None) -> Path:
        """A root of base copies holding at least ``chunks`` chunks or ``files`` files."""
        from anekit.search.cache import cache_key
        from anekit.search.chunk import model_text

        root = self.work / f"tree-{label}"
        shutil.rmtree(root, ignore_errors=True)
        have_chunks = have_files = 0
        items: list[tuple[bytes, Any]] = []
        copy = 0
        while True:
            for number, (relpath, pieces) in enumerate(self.base.files):
                if (chunks is not None and have_chunks >= chunks) or (
                    files is not None and have_files >= files
                ):
                    self.cache.put(items)
                    return root
                rest = relpath.removeprefix("copy0/")
                destination = root / f"copy{copy}" / rest
                destination.parent.mkdir(parents=True, exist_ok=True)
                source = self.base.root / relpath
                try:
                    os.link(source, destination)
                except OSError:
                    shutil.copy2(source, destination)
                if (copy, number) not in self.cached:
                    self.cached.add((copy, number))
                    vectors = perturbed(self.base.vectors[number], copy, number, self.noise)
                    for chunk, vector in zip(pieces, vectors, strict=True):
                        text = model_text(f"copy{copy}/{rest}", chunk)
                        items.append((cache_key(self.namespace, _hash(text)), vector))
                    if len(items) >= 20_000:
                        self.cache.put(items)
                        items = []
                have_chunks += len(pieces)
                have_files += 1
            copy += 1

    def index(self, root: Path, store: Path) -> dict[str, Any]:
        """Index ``root`` into a new ``store`` from the private cache (no lane)."""
        from anekit.search.index import Index

        shutil.rmtree(store, ignore_errors=True)
        with Index(root, store=store, lanes=LANES, cache=self.cache) as index:
            start = time.perf_counter()
            summary = index.update()
            seconds = time.perf_counter() - start
            if summary.embedded or index._pool is not None or summary.failed:
                raise SystemExit(f"{root}: the build embedded chunks: {summary.as_dict()}")
        return {"seconds": seconds, "files": summary.files, "chunks": summary.chunks}


def _percentiles(values: Sequence[float]) -> dict[str, float]:
    import numpy as np

    array = np.asarray(values)
    return {
        "p50": float(np.percentile(array, 50)),
        "p95": float(np.percentile(array, 95)),
        "max": float(array.max()),
    }


def bench_queries(trees: Trees, sizes: list[int], repeats: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for size in sizes:
        _say(f"building the {size}-chunk store...")
        root = trees.make(str(size), chunks=size)
        store = trees.work / f"store-{size}"
        build = trees.index(root, store)
        _say(
            f"  built in {build['seconds']:.1f} s: {build['files']} files, {build['chunks']} chunks"
        )
        answer = run_child("query", root=str(root), store=str(store), repeats=repeats)
        _say(f"  queries done; first query {answer['first_query_ms']:.0f} ms")
        latency: dict[str, Any] = {}
        for mode, passes in answer["samples_ms"].items():
            flat = [value for one in passes for value in one]
            latency[mode] = {
                **_percentiles(flat),
                "pass_p50_min": min(statistics.median(one) for one in passes),
                "pass_p50_max": max(statistics.median(one) for one in passes),
                "count": len(flat),
            }
        results[str(size)] = {
            "build": build,
            "store": answer["store"],
            "first_query_ms": answer["first_query_ms"],
            "warm_up_p50_ms": {
                mode: statistics.median(values) for mode, values in answer["warm_up_ms"].items()
            },
            "latency_ms": latency,
            "hits": answer["hits"],
            "process_peak_mb": answer["process_peak_mb"],
            "samples_ms": answer["samples_ms"],
        }
        shutil.rmtree(store, ignore_errors=True)
    return results


def bench_reindex(trees: Trees, files: int, repeats: int) -> dict[str, Any]:
    _say(f"building the {files}-file tree...")
    root = trees.make(f"reindex-{files}", files=files)
    store = trees.work / "store-reindex"
    build = trees.index(root, store)
    _say(f"  built in {build['seconds']:.1f} s: {build['files']} files, {build['chunks']} chunks")
    anekit = Path(sys.executable).with_name("anekit")
    cli = [str(anekit)] if anekit.exists() else [sys.executable, "-m", "anekit"]
    cli += ["index", str(root), "--store", str(store), "--lane", "cpu", "--json"]
    passes: list[dict[str, Any]] = []
    for number in range(repeats):
        order = ("process", "cli") if number % 2 == 0 else ("cli", "process")
        one: dict[str, Any] = {}
        for kind in order:
            time.sleep(0.5)
            if kind == "process":
                one["process"] = run_child("reindex", root=str(root), store=str(store))
            else:
                start = time.perf_counter()
                done = subprocess.run(cli, capture_output=True, text=True, check=False)
                seconds = time.perf_counter() - start
                if done.returncode != 0:
                    raise SystemExit(f"{shlex.join(cli)}: exit {done.returncode}: {done.stderr}")
                summary = json.loads(done.stdout)
                one["cli"] = {
                    "process_s": seconds,
                    **{key: summary[key] for key in ("files", "unchanged", "indexed", "embedded")},
                }
        passes.append(one)
        _say(
            f"pass {number + 1}: update {one['process']['update_s']:.2f} s, process "
            f"{one['process']['process_s']:.2f} s, CLI {one['cli']['process_s']:.2f} s"
        )
    checks = [item for one in passes for item in (one["process"], one["cli"])]
    unchanged = all(
        item["indexed"] == 0 and item["embedded"] == 0 and item["unchanged"] == item["files"]
        for item in checks
    )
    shutil.rmtree(store, ignore_errors=True)
    return {
        "build": build,
        "files": build["files"],
        "chunks": build["chunks"],
        "update_s": _spread([one["process"]["update_s"] for one in passes]),
        "imports_s": _spread([one["process"]["imports_s"] for one in passes]),
        "process_s": _spread([one["process"]["process_s"] for one in passes]),
        "cli_s": _spread([one["cli"]["process_s"] for one in passes]),
        "lane_started": any(one["process"]["lane_started"] for one in passes),
        "all_unchanged": unchanged,
        "cli": shlex.join(cli),
        "passes": passes,
    }


# --- report -----------------------------------------------------------------------------------


def targets(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target: what, the measured value, met or not (None: not measured)."""
    found: list[dict[str, Any]] = []
    queries_at = record.get("queries", {})
    large = [size for size in queries_at if int(size) >= TARGET_SIZE]
    for mode in MODES:
        if large:
            latency = queries_at[large[-1]]["latency_ms"][mode]
            found.append(
                {
                    "target": f"{mode} query p50 <= {QUERY_P50_MS:g} ms, p95 <= {QUERY_P95_MS:g} "
                    f"ms, warm, at {int(large[-1]):,} chunks",
                    "value": f"p50 {latency['p50']:.1f} ms, p95 {latency['p95']:.1f} ms",
                    "met": latency["p50"] <= QUERY_P50_MS and latency["p95"] <= QUERY_P95_MS,
                }
            )
        else:
            found.append(
                {
                    "target": f"{mode} query latency at {TARGET_SIZE:,} chunks",
                    "value": "not measured (no size >= 100,000)",
                    "met": None,
                }
            )
    rows = record.get("indexing", {}).get("rows", {})
    corpora = [row for name, row in rows.items() if name != "total"]
    if corpora:
        peak = max(row["index_memory_mb"]["sum_of_peaks_mb"] for row in corpora)
        found.append(
            {
                "target": f"peak RSS while indexing (process + workers) <= {PEAK_RSS_MB:g} MB",
                "value": f"{peak:.0f} MB (sum of peaks, the largest run)",
                "met": peak <= PEAK_RSS_MB,
            }
        )
        total = rows["total"]
        found.append(
            {
                "target": f"indexing >= {THROUGHPUT_RATIO:.0%} of the raw CPU lane (like for "
                "like: both start the lane and tokenize)",
                "value": f"{total['ratio_cold']:.1%} (all corpora; "
                + ", ".join(
                    f"{name} {row['ratio_cold']:.1%}"
                    for name, row in rows.items()
                    if name != "total"
                )
                + ")",
                "met": total["ratio_cold"] >= THROUGHPUT_RATIO,
            }
        )
        found.append(
            {
                "target": f"indexing >= {THROUGHPUT_RATIO:.0%} of the raw CPU lane, strict "
                "(the raw lane already started)",
                "value": f"{total['ratio_warm']:.1%} (all corpora)",
                "met": total["ratio_warm"] >= THROUGHPUT_RATIO,
            }
        )
    reindex = record.get("reindex")
    if reindex:
        ok = not reindex["lane_started"] and reindex["all_unchanged"]
        found.append(
            {
                "target": f"re-index of an unchanged {reindex['files']:,}-file repository <= "
                f"{REINDEX_SECONDS:g} s, no lane started",
                "value": f"update() {reindex['update_s']['median']:.3f} s, lane "
                + ("started" if reindex["lane_started"] else "not started"),
                "met": ok and reindex["update_s"]["median"] <= REINDEX_SECONDS,
            }
        )
        found.append(
            {
                "target": f"the same, process start and imports included (`anekit index`) <= "
                f"{REINDEX_SECONDS:g} s",
                "value": f"{reindex['cli_s']['median']:.2f} s",
                "met": ok and reindex["cli_s"]["median"] <= REINDEX_SECONDS,
            }
        )
    return found


def _rate(spread: dict[str, float], digits: int = 1) -> str:
    low, middle, high = (f"{spread[key]:.{digits}f}" for key in ("min", "median", "max"))
    return f"{middle} ({low}–{high})"


def print_report(record: dict[str, Any]) -> None:
    settings = record["settings"]
    print(f"{record['date']}; machine: {record['machine']}")
    print(f"command: {record['command']}")
    print("versions: " + ", ".join(f"{name} {value}" for name, value in record["versions"].items()))
    indexing = record.get("indexing")
    if indexing:
        print()
        print(
            f"## Indexing with the CPU lane ({settings['repeats']} passes; medians, range in "
            "brackets; fresh store, cache off, a fresh process per run)"
        )
        print()
        print(
            "| corpus | chunks | index chunks/s | raw cold | raw warm | raw pre-tokenized "
            "| index / raw cold | index / raw warm | lane start (s) |"
        )
        print("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
        for name, row in indexing["rows"].items():
            print(
                f"| {name} | {row['chunks']} | {_rate(row['index_chunks_per_s'])} "
                f"| {_rate(row['raw_cold_chunks_per_s'])} | {_rate(row['raw_warm_chunks_per_s'])} "
                f"| {_rate(row['raw_pretokenized_chunks_per_s'])} | {row['ratio_cold']:.1%} "
                f"| {row['ratio_warm']:.1%} | {row['lane_start_s']['median']:.1f} |"
            )
        print()
        print(
            "Peak memory (MB, the largest over the passes): process VmHWM, workers' VmHWM, "
            "their sum (an upper bound of the joint peak), sampled joint VmRSS (a lower "
            "bound); CPU seconds of the timed part (a busy machine shows in wall time, less "
            "in these)"
        )
        print()
        print(
            "| corpus | run | process | workers | sum of peaks | joint RSS sampled "
            "| CPU s, process / workers (medians) |"
        )
        print("|---|---|--:|--:|--:|--:|--:|")
        for name, row in indexing["rows"].items():
            for run in ("index", "raw"):
                memory = row.get(f"{run}_memory_mb")
                if memory:
                    print(
                        f"| {name} | {run} | {memory['process_mb']:.0f} "
                        f"| {memory['workers_mb']:.0f} | {memory['sum_of_peaks_mb']:.0f} "
                        f"| {memory['joint_rss_sampled_mb']:.0f} "
                        f"| {row[f'{run}_cpu_s']['process']:.1f} / "
                        f"{row[f'{run}_cpu_s']['workers']:.1f} |"
                    )
        for name, row in indexing["rows"].items():
            if "warning" in row:
                print(f"\nWARNING {name}: {row['warning']}")
    if record.get("queries"):
        base = record["base"]
        print()
        print(
            f"## Query latency (k={K}, {len(queries())} queries x "
            f"{max(settings['repeats'], 3)} passes per mode after a warm-up pass, one "
            "process; ms)"
        )
        print()
        print(
            f"Stores: copies of a base of {base['chunks']} standard-library chunks with real "
            "CPU-lane vectors, reused for the copies (see the docstring)."
        )
        print()
        print(
            "| chunks | mode | p50 | p95 | max | pass p50 range | warm-up pass p50 "
            "| first query (cold) | process peak MB |"
        )
        print("|--:|---|--:|--:|--:|--:|--:|--:|--:|")
        for result in record["queries"].values():
            chunks = result["store"].get("chunks", result["build"]["chunks"])
            for mode, latency in result["latency_ms"].items():
                first = f"{result['first_query_ms']:.0f}" if mode == "hybrid" else ""
                peak = f"{result['process_peak_mb']:.0f}" if mode == "hybrid" else ""
                label = "query embedding alone" if mode == "embedding" else mode
                warm = result.get("warm_up_p50_ms", {}).get(mode)
                print(
                    f"| {chunks:,} | {label} "
                    f"| {latency['p50']:.1f} | {latency['p95']:.1f} | {latency['max']:.1f} "
                    f"| {latency['pass_p50_min']:.1f}–{latency['pass_p50_max']:.1f} "
                    f"| {'' if warm is None else f'{warm:.1f}'} | {first} | {peak} |"
                )
    reindex = record.get("reindex")
    if reindex:
        print()
        print(
            f"## Re-index of an unchanged repository ({reindex['files']:,} files, "
            f"{reindex['chunks']:,} chunks; {len(reindex['passes'])} passes; seconds)"
        )
        print()
        print("| update() in process | imports | whole process | `anekit index` | lane started |")
        print("|--:|--:|--:|--:|---|")
        print(
            f"| {_rate(reindex['update_s'], 3)} | {_rate(reindex['imports_s'], 2)} "
            f"| {_rate(reindex['process_s'], 2)} | {_rate(reindex['cli_s'], 2)} "
            f"| {'yes' if reindex['lane_started'] else 'no'} |"
        )
    print()
    print("## Targets")
    print()
    for item in record["targets"]:
        verdict = {True: "met", False: "MISSED", None: "not measured"}[item["met"]]
        print(f"- {verdict}: {item['target']}: {item['value']}")


def _versions() -> dict[str, str]:
    import sqlite3
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version(), "sqlite": sqlite3.sqlite_version}
    for name in ("anekit", "onnxruntime", "numpy", "tree-sitter", "tokenizers"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, to check the script")
    parser.add_argument("--sizes", help="store sizes in chunks (default 10000,100000)")
    parser.add_argument(
        "--corpora", help="indexing corpora: names or folders (default attrs,httpx,rich)"
    )
    parser.add_argument("--repeats", type=int, help="passes (default 3)")
    parser.add_argument("--base-chunks", type=int, help="chunks embedded for the base copy")
    parser.add_argument("--reindex-files", type=int, default=1000)
    parser.add_argument("--skip-index", action="store_true", help="no indexing throughput")
    parser.add_argument("--skip-query", action="store_true", help="no query latency")
    parser.add_argument("--skip-reindex", action="store_true", help="no re-index timing")
    parser.add_argument("--workdir", type=Path, help="keep the trees and stores here")
    parser.add_argument("--json", type=Path, help="where to write the JSON record")
    parser.add_argument("--child", choices=list(CHILDREN), help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--output", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if args.child:
        answer = CHILDREN[args.child](json.loads(args.spec))
        args.output.write_text(json.dumps(answer))
        return
    source_before = source_state()
    sizes_text = args.sizes or ("2000" if args.quick else "10000,100000")
    sizes = sorted({int(item) for item in sizes_text.split(",") if item.strip()})
    corpora = [
        item.strip()
        for item in (args.corpora or ("httpx" if args.quick else "attrs,httpx,rich")).split(",")
        if item.strip()
    ]
    repeats = args.repeats or (1 if args.quick else 3)
    if repeats < 1 or not sizes or min(sizes) < 1:
        parser.error("--repeats and --sizes must be positive")
    base_chunks = args.base_chunks or min(min(sizes), MAX_BASE_CHUNKS)

    today = datetime.date.today().isoformat()
    record: dict[str, Any] = {
        "script": "bench/search_scale.py",
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "date": today,
        "started": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": machine(),
        "versions": _versions(),
        "settings": {
            "sizes": sizes,
            "corpora": corpora,
            "repeats": repeats,
            "base_chunks": base_chunks,
            "reindex_files": args.reindex_files,
            "k": K,
            "lanes": LANES,
            "queries": queries(),
            "sample_s": SAMPLE_SECONDS,
            "raw_rates": "cold: chunks / (lane start + tokenize + embed_ids); warm: chunks / "
            "(tokenize + embed_ids); pre-tokenized: chunks / embed_ids",
        },
    }
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="search_scale-") as scratch:
        work = args.workdir.resolve() if args.workdir else Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        if not args.skip_index:
            record["indexing"] = bench_indexing(corpora, repeats, work)
        if not (args.skip_query and args.skip_reindex):
            base = make_base(work, base_chunks)
            record["base"] = {
                "files": len(base.files),
                "chunks": sum(len(chunks) for _, chunks in base.files),
                "seconds": base.seconds,
                "summary": base.summary,
                "library": sysconfig.get_paths()["stdlib"],
            }
            trees = Trees(base, work)
            if not args.skip_query:
                record["queries"] = bench_queries(trees, sizes, max(repeats, 3))
            if not args.skip_reindex:
                record["reindex"] = bench_reindex(trees, args.reindex_files, max(repeats, 3))
            trees.cache.close()
    record["seconds"] = time.perf_counter() - started
    record["source"] = {"before": source_before, "after": source_state()}
    record["targets"] = targets(record)
    output = args.json or RESULTS / f"search_scale-{today}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(redacted(record), indent=2) + "\n")
    print_report(record)
    print(f"\nwall time {record['seconds'] / 60:.1f} min; JSON: {output}")


if __name__ == "__main__":
    main()
