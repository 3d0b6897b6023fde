"""Code search at a million chunks (issue 37): one store of ``--chunks`` chunks of real code,
its approximate vector index, and what a daemon over it costs and answers.

The store. A *base* of real code (this Python's standard library ``.py`` files in path
order, up to ``--base-chunks`` chunks, ``copy0/``) is indexed through the CPU lane with real
all-MiniLM-L6-v2 embeddings (machine cache on: a rerun takes them from it). The tree holds
copies ``copy0/ copy1/ ...`` of the base files (hard links, distinct paths) until
``--chunks`` chunks. Embedding a million chunks on a 2-core CPU takes hours, so the copies'
vectors are *made*, not embedded: copy i > 0 of a chunk gets the base chunk's unit vector
plus Gaussian noise of expected norm ``--noise`` (default 0.25: cosine to the base vector
about 0.97), seeded by copy and file, made unit again (``search_scale.perturbed``); no two
chunks share a vector. They go into a private vector cache from which the indexer itself
(``Index(tree, store, cache=...).update()``) writes the store: files, chunks, FTS rows,
vectors, as for any root. The queries' answers are therefore real code, and the vector
neighbourhoods are those of real embeddings thickened by noise: a harder case for an
approximate index than distinct real chunks (each base chunk has about chunks / base
near-twins that exact search must order by noise).

Stages (``--stages``, default all, in this order):

* ``build``: the base, the tree and the store (timed; skipped when ``--workdir`` already
  holds a store of that size built by this script: its record is kept in the workdir).
* ``ann``: the approximate index built from the store in a fresh process, timed, its size on
  disk and the process's peak memory (``anekit.search.ann``).
* ``query``: a fresh process opens the store as a daemon does (``Index``; one warm search in
  every mode after the first); RSS right after open and after the first query (idle), then
  during ``--repeats`` passes of the 30 queries of ``search_scale.queries()`` in each mode
  (k=10, rotating mode order), p50/p95 per mode, the first query after start apart; and
  each pass once more in hybrid mode as *new* queries (``hybrid (new query)``): a reader
  keeps each query word's match count per store generation, so a repeated query skips
  counting them; here they are dropped before each query, as for a query never asked.
* ``recall``: recall@10 of the approximate vector search against exact cosine search over
  every stored vector (NumPy, float32), for the 30 queries plus ``--recall-queries`` more
  (vectors of stored chunks, perturbed as above, so their neighbourhoods are dense).
* ``save``: save-to-searchable: a reader holding the store open; a file of the tree is
  rewritten with a new function, ``Index.update(paths=[file])`` (what the watcher runs,
  through the CPU lane), then the reader searches until a hit names the new function; the
  time from the write to that hit, ``--repeats`` times.
* ``unchanged``: ``anekit index TREE --store STORE --lane cpu --json`` on the unchanged
  tree, timed from outside, ``--repeats`` times.

    .venv/bin/python bench/search_million.py --chunks 1000000 --workdir /big/disk/scale \\
        [--base-chunks 50000] [--noise 0.25] [--stages build,ann,query,recall,save,unchanged]

Writes a JSON record (``--json``, default ``bench/results/search_million-<date>.json``) and
Markdown tables to stdout.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmachine import machine, peak_memory_mb, redacted, source_state
from search_scale import (
    LANES,
    MODES,
    Trees,
    _percentiles,
    _say,
    _versions,
    make_base,
    queries,
)

RESULTS = Path(__file__).resolve().parent / "results"
K = 10
#: The latency row of hybrid queries timed as never asked before (see _child_query).
NEW_QUERY = "hybrid (new query)"
STAGES = ("build", "ann", "query", "recall", "save", "unchanged")
#: The issue's targets at a million chunks.
TARGETS = {
    "hybrid_p50_ms": 15.0,
    "hybrid_p95_ms": 40.0,
    "hybrid_new_query_p50_ms": 15.0,
    "hybrid_new_query_p95_ms": 40.0,
    "recall_at_10": 0.98,
    "idle_rss_mb": 600.0,
    "first_query_s": 1.0,
    "save_to_searchable_s": 1.5,
    "unchanged_s": 10.0,
}


def rss_mb(pid: int | None = None) -> dict[str, float]:
    """VmRSS and VmHWM of a process (this one by default), in MB."""
    found: dict[str, float] = {}
    status = Path(f"/proc/{pid or os.getpid()}/status").read_text()
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            found[key] = int(value.split()[0]) / 1024
    return found


# --- children: each measurement in a fresh process --------------------------------------------


def _child_ann(spec: dict[str, Any]) -> dict[str, Any]:
    """The graph built anew by the writer's own call (``ann.maintain``), timed."""
    from anekit.search import ann
    from anekit.search.lock import WriterLock
    from anekit.search.store import Store

    store_dir = Path(spec["store"])
    (store_dir / ann.ANN_STAMP).unlink(missing_ok=True)
    with WriterLock(store_dir) as lock, Store(store_dir, create=False) as store:
        lock.acquire(None)
        chunks = store.chunk_count()
        start = time.perf_counter()
        done = ann.maintain(store, chunks)
        seconds = time.perf_counter() - start
        stamp = ann.AnnStamp.read(store_dir)
    if stamp is None or done is None:
        raise SystemExit(f"no graph was built: {done}")
    return {
        "seconds": seconds,
        "done": done,
        "count": stamp.count,
        "bytes": stamp.size,
        "settings": {
            "dtype": ann.DTYPE,
            "connectivity": ann.CONNECTIVITY,
            "expansion_add": ann.EXPANSION_ADD,
            "expansion_search": ann.EXPANSION_SEARCH,
            "threads": os.cpu_count(),
        },
        "process_peak_mb": peak_memory_mb(),
    }


def _child_query(spec: dict[str, Any]) -> dict[str, Any]:
    from anekit.search.index import Index

    asked = queries()
    before = rss_mb()
    start = time.perf_counter()
    index = Index(spec["root"], store=spec["store"], lanes=LANES, cache=False)
    index.store.identity  # noqa: B018 - opens the store
    opened_s = time.perf_counter() - start
    after_open = rss_mb()
    start = time.perf_counter()
    index.search(asked[0], k=K, mode="hybrid")
    first_s = time.perf_counter() - start
    after_first = rss_mb()
    for mode in MODES:  # one warm-up search per mode
        index.search(asked[1], k=K, mode=mode)
    idle = rss_mb()
    samples: dict[str, list[list[float]]] = {mode: [] for mode in MODES}
    for number in range(spec["repeats"]):
        order = MODES[number % len(MODES) :] + MODES[: number % len(MODES)]
        for mode in order:
            times = []
            for query in asked:
                start = time.perf_counter()
                index.search(query, k=K, mode=mode)
                times.append((time.perf_counter() - start) * 1000)
            samples[mode].append(times)
        # A query never asked before: the reader's per-word match counts (kept per
        # store generation, so a repeated query skips them) are dropped first.
        times = []
        for query in asked:
            index.store._counts.clear()
            start = time.perf_counter()
            index.search(query, k=K, mode="hybrid")
            times.append((time.perf_counter() - start) * 1000)
        samples.setdefault(NEW_QUERY, []).append(times)
    during = rss_mb()
    index.close()
    return {
        "open_s": opened_s,
        "first_query_s": first_s,
        "rss_mb": {
            "start": before,
            "after_open": after_open,
            "after_first_query": after_first,
            "idle_after_warm_up": idle,
            "after_queries": during,
        },
        "samples_ms": samples,
        "process_peak_mb": peak_memory_mb(),
    }


def _child_recall(spec: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    from anekit.search.ann import AnnIndex
    from anekit.search.index import Index
    from anekit.search.store import Store

    with Index(spec["root"], store=spec["store"], lanes=LANES, cache=False) as index:
        asked = [index._query_vector(query) for query in queries()]
    texts = len(asked)
    store = Store(Path(spec["store"]), create=False)
    ids, matrix = store.vector_matrix()
    ann = AnnIndex.open(store)
    rng = np.random.default_rng(37)
    picked = rng.choice(len(ids), size=spec["extra"], replace=False)
    for row in picked:
        vector = matrix[row].astype(np.float32)
        vector += rng.standard_normal(vector.shape, dtype=np.float32) * (0.25 / vector.size**0.5)
        asked.append(vector)
    unit = matrix.astype(np.float32)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    recalls: list[float] = []
    for vector in asked:
        q = np.asarray(vector, np.float32) / np.linalg.norm(vector)
        scores = unit @ q
        exact = set(ids[np.argpartition(-scores, K)[:K]].tolist())
        found = {chunk_id for chunk_id, _ in ann.search(q, K, store=store)}
        recalls.append(len(exact & found) / K)
    ann.close()
    store.close()
    return {
        "queries": len(asked),
        "recall_at_10": statistics.mean(recalls),
        "min": min(recalls),
        "perfect": sum(value == 1.0 for value in recalls),
        "text_queries": {"count": texts, "recall_at_10": statistics.mean(recalls[:texts])},
        "near_stored": {
            "count": len(recalls) - texts,
            "recall_at_10": statistics.mean(recalls[texts:]),
        },
    }


def _child_save(spec: dict[str, Any]) -> dict[str, Any]:
    from anekit.search.index import Index

    root = Path(spec["root"])
    target = root / spec["file"]
    original = target.read_bytes()
    reader = Index(root, store=spec["store"], lanes=LANES, cache=False)
    writer = Index(root, store=spec["store"], lanes=LANES, cache=False)
    reader.search("warm up", k=K, mode="hybrid")
    writer.update(paths=[target])  # starts the lane, untimed
    seconds: list[float] = []
    try:
        for number in range(spec["repeats"]):
            name = f"million_probe_{number}_{os.getpid()}"
            body = f"\n\ndef {name}(values):\n    return sorted(values)[::-1]\n"
            start = time.perf_counter()
            target.write_bytes(original + body.encode())
            writer.update(paths=[target])
            while True:
                hits = reader.search(name, k=K, mode="keyword")
                if any(hit.symbol == name for hit in hits):
                    break
                if time.perf_counter() - start > 60:
                    raise SystemExit(f"{name} not searchable after 60 s")
            seconds.append(time.perf_counter() - start)
    finally:
        target.write_bytes(original)
        writer.update(paths=[target])
        writer.close()
        reader.close()
    return {"seconds": seconds}


CHILDREN = {"ann": _child_ann, "query": _child_query, "recall": _child_recall, "save": _child_save}


def run_child(kind: str, **spec: Any) -> dict[str, Any]:
    """One measurement in a fresh process; its answer with ``process_s``."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = Path(handle.name)
    try:
        command = [sys.executable, __file__, "--child", kind, "--spec", json.dumps(spec)]
        start = time.perf_counter()
        done = subprocess.run([*command, "--output", str(out)], stdout=sys.stderr, check=False)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"the {kind} run exited with {done.returncode}")
        answer: dict[str, Any] = json.loads(out.read_text())
    finally:
        out.unlink(missing_ok=True)
    answer["process_s"] = wall
    return answer


# --- stages -----------------------------------------------------------------------------------


def stage_build(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The base, the tree and the store, or the record of those already in ``work``."""
    kept = work / f"build-{args.chunks}.json"
    if kept.exists() and (work / f"store-{args.chunks}" / "store.db").exists():
        _say(f"reusing the store in {work} ({kept.name})")
        answer: dict[str, Any] = json.loads(kept.read_text())
        return answer
    base = make_base(work, args.base_chunks)
    trees = Trees(base, work, noise=args.noise)
    start = time.perf_counter()
    root = trees.make(str(args.chunks), chunks=args.chunks)
    tree_s = time.perf_counter() - start
    _say(f"tree made in {tree_s:.0f} s; indexing it from the private cache...")
    build = trees.index(root, work / f"store-{args.chunks}")
    trees.cache.close()
    answer = {
        "base": {
            "files": len(base.files),
            "chunks": sum(len(chunks) for _, chunks in base.files),
            "seconds": base.seconds,
        },
        "noise": args.noise,
        "tree_s": tree_s,
        "store_build": build,
        "base_file": base.files[0][0],
    }
    kept.write_text(json.dumps(answer, indent=2))
    return answer


def disk_sizes(store: Path) -> dict[str, int]:
    """Bytes of each file in the store directory."""
    return {item.name: item.stat().st_size for item in sorted(store.iterdir()) if item.is_file()}


def summarize_latency(samples: dict[str, list[list[float]]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for mode, passes in samples.items():
        flat = [value for one in passes for value in one]
        found[mode] = {
            **_percentiles(flat),
            "pass_p50_min": min(statistics.median(one) for one in passes),
            "pass_p50_max": max(statistics.median(one) for one in passes),
            "count": len(flat),
        }
    return found


def stage_unchanged(root: Path, store: Path, repeats: int) -> dict[str, Any]:
    anekit = Path(sys.executable).with_name("anekit")
    cli = [str(anekit)] if anekit.exists() else [sys.executable, "-m", "anekit"]
    cli += ["index", str(root), "--store", str(store), "--lane", "cpu", "--json"]
    seconds: list[float] = []
    summary: dict[str, Any] = {}
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run(cli, capture_output=True, text=True, check=False)
        seconds.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(f"{shlex.join(cli)}: exit {done.returncode}: {done.stderr}")
        summary = json.loads(done.stdout)
        if summary.get("indexed") or summary.get("embedded"):
            raise SystemExit(f"the unchanged tree was indexed again: {summary}")
    return {
        "seconds": seconds,
        "median_s": statistics.median(seconds),
        "files": summary.get("files"),
        "unchanged": summary.get("unchanged"),
        "command": "anekit index TREE --store STORE --lane cpu --json",
    }


def targets(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target with the measured value and whether it was met (None: not measured)."""
    query = record.get("query", {})
    measured = {
        "hybrid_p50_ms": query.get("latency_ms", {}).get("hybrid", {}).get("p50"),
        "hybrid_p95_ms": query.get("latency_ms", {}).get("hybrid", {}).get("p95"),
        "hybrid_new_query_p50_ms": query.get("latency_ms", {}).get(NEW_QUERY, {}).get("p50"),
        "hybrid_new_query_p95_ms": query.get("latency_ms", {}).get(NEW_QUERY, {}).get("p95"),
        "recall_at_10": record.get("recall", {}).get("recall_at_10"),
        "idle_rss_mb": query.get("rss_mb", {}).get("idle_after_warm_up", {}).get("VmRSS"),
        "first_query_s": query.get("first_query_s"),
        "save_to_searchable_s": record.get("save", {}).get("median_s"),
        "unchanged_s": record.get("unchanged", {}).get("median_s"),
    }
    rows = []
    for name, limit in TARGETS.items():
        value = measured[name]
        met = (
            None
            if value is None
            else (value >= limit if name == "recall_at_10" else value <= limit)
        )
        rows.append({"target": name, "limit": limit, "measured": value, "met": met})
    return rows


def print_report(record: dict[str, Any]) -> None:
    build = record.get("build", {})
    print(f"## Code search at {record['settings']['chunks']:,} chunks ({record['date']})\n")
    if build:
        print(
            f"store: {build['store_build']['chunks']:,} chunks in {build['store_build']['files']:,}"
            f" files, built by the indexer in {build['store_build']['seconds']:.0f} s from a "
            f"base of {build['base']['chunks']:,} real chunks (noise {build['noise']})"
        )
    if "disk" in record:
        sizes = ", ".join(f"{name} {size / 1e6:,.0f} MB" for name, size in record["disk"].items())
        print(f"on disk: {sizes}")
    if "ann" in record:
        ann = record["ann"]
        print(
            f"approximate index: built in {ann['seconds']:.0f} s, {ann['bytes'] / 1e6:.0f} MB, "
            f"peak {ann['process_peak_mb']:.0f} MB"
        )
    if "query" in record:
        query = record["query"]
        print(f"\nfirst query after start: {query['first_query_s'] * 1000:.0f} ms")
        rss = query["rss_mb"]
        print(
            "RSS (MB): " + ", ".join(f"{name} {value['VmRSS']:.0f}" for name, value in rss.items())
        )
        print("\n| mode | p50 ms | p95 ms | max ms | pass p50s |\n|---|---|---|---|---|")
        for mode, row in query["latency_ms"].items():
            print(
                f"| {mode} | {row['p50']:.1f} | {row['p95']:.1f} | {row['max']:.1f} | "
                f"{row['pass_p50_min']:.1f}-{row['pass_p50_max']:.1f} |"
            )
    if "recall" in record:
        recall = record["recall"]
        print(
            f"\nrecall@10 against exact: {recall['recall_at_10']:.4f} over {recall['queries']} "
            f"queries (min {recall['min']:.1f}, {recall['perfect']} perfect)"
        )
    if "save" in record:
        save = record["save"]
        print(f"save-to-searchable: median {save['median_s']:.2f} s ({save['seconds']})")
    if "unchanged" in record:
        print(f"unchanged tree: median {record['unchanged']['median_s']:.1f} s")
    print("\n| target | limit | measured | met |\n|---|---|---|---|")
    for row in record["targets"]:
        value = "-" if row["measured"] is None else f"{row['measured']:.3f}"
        met = "-" if row["met"] is None else ("yes" if row["met"] else "no")
        print(f"| {row['target']} | {row['limit']} | {value} | {met} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--base-chunks", type=int, default=50_000)
    parser.add_argument("--noise", type=float, default=0.25)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--recall-queries", type=int, default=200)
    parser.add_argument("--stages", default=",".join(STAGES))
    parser.add_argument("--workdir", type=Path, required=False)
    parser.add_argument("--json", type=Path)
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
    stages = [item.strip() for item in args.stages.split(",") if item.strip()]
    unknown = sorted(set(stages) - set(STAGES))
    if unknown or args.repeats < 1 or args.chunks < 1:
        parser.error(f"unknown stage(s) {unknown}; --repeats and --chunks must be positive")
    if args.workdir is None:
        parser.error("--workdir is needed: the store of a million chunks takes about 3 GB")
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    today = datetime.date.today().isoformat()
    record: dict[str, Any] = {
        "script": "bench/search_million.py",
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "date": today,
        "started": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": machine(),
        "versions": _versions(),
        "source": {"before": source_state()},
        "settings": {
            "chunks": args.chunks,
            "base_chunks": args.base_chunks,
            "noise": args.noise,
            "repeats": args.repeats,
            "recall_queries": args.recall_queries,
            "stages": stages,
            "k": K,
        },
    }
    started = time.perf_counter()
    root, store = work / f"tree-{args.chunks}", work / f"store-{args.chunks}"
    if "build" in stages:
        record["build"] = stage_build(args, work)
    elif (work / f"build-{args.chunks}.json").exists():
        record["build"] = json.loads((work / f"build-{args.chunks}.json").read_text())
    if "ann" in stages:
        _say("building the approximate index...")
        record["ann"] = run_child("ann", store=str(store))
    if "query" in stages:
        _say("queries...")
        answer = run_child("query", root=str(root), store=str(store), repeats=args.repeats)
        answer["latency_ms"] = summarize_latency(answer["samples_ms"])
        record["query"] = answer
    if "recall" in stages:
        _say("recall...")
        record["recall"] = run_child(
            "recall", root=str(root), store=str(store), extra=args.recall_queries
        )
    if "save" in stages:
        _say("save-to-searchable...")
        answer = run_child(
            "save",
            root=str(root),
            store=str(store),
            file=record["build"]["base_file"],
            repeats=args.repeats,
        )
        answer["median_s"] = statistics.median(answer["seconds"])
        record["save"] = answer
    if "unchanged" in stages:
        _say("unchanged tree...")
        record["unchanged"] = stage_unchanged(root, store, args.repeats)
    if store.exists():
        record["disk"] = disk_sizes(store)
    record["seconds"] = time.perf_counter() - started
    record["source"]["after"] = source_state()
    record["targets"] = targets(record)
    output = args.json or RESULTS / f"search_million-{today}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(redacted(record), indent=2).replace(str(work), "<workdir>")
    output.write_text(text + "\n")
    print_report(record)
    print(f"\nwall time {record['seconds'] / 60:.1f} min; JSON: {output}")


if __name__ == "__main__":
    main()
