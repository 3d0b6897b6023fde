"""A static first tier for the vector half of hybrid search, measured on semble's dev split.

The question (the open issue): would a static embedding model distilled from the default
model (all-MiniLM-L6-v2) with model2vec, fast enough to embed a whole repository before the
transformer has embedded a fraction of it, raise quality *before* the transformer finishes
without lowering it *after*? Four rankings of every dev query, k=10, each made by
:meth:`anekit.search.index.Index.rank` (the same candidates, ``run`` callback, root name and
visibility check as every search), differing only in the vector lists it is given:

* ``keyword``: no vector list, what a user gets before any vector exists;
* ``static``: the vector list from the static model (exact cosine top-``wanted`` over every
  chunk's static vector, ``wanted`` as ``Index._search`` computes it);
* ``minilm``: the store's own MiniLM vectors, what ``Index.search(q, k=10,
  mode="hybrid")`` gives (checked: every query's hits are compared with that call's);
* ``minilm+static``: the static list fused in as a third reciprocal-rank list (weight
  ``--static-weight``, by default that of the MiniLM list) beside the other two
  (``Index.rank``'s ``more``).

While src is being edited, measure a clean clone with ``--source`` (the record names its
commit).

Each is scored with semble's code as ``semble_bench.py`` scores it (chunk-scored and
file-scored NDCG@10; a repository's figure the mean over its queries, a language's the
mean over its repositories, the overall one the mean over repositories). The held-out
repositories are refused. The stores are read, never written: ``<stores>/<name>-<rev12>``
(made by ``semble_bench.py --store``), the trees under ``$ANEKIT_HOME/semble-bench``.

The static model is distilled once (``model2vec.distill.distill`` of the local MiniLM folder,
offline; PCA to 256 dimensions, SIF 1e-4, float16, mean pooling: model2vec's defaults)
into ``$ANEKIT_HOME/static/`` with a ``distill.json`` that records the settings and the time
taken. Every chunk is embedded with it as the lanes embed it (``chunk.model_text``: the path
and symbol header, then the text, at most ``--max-length`` tokens), ``--repeats`` times:
chunks/s median and range. For a same-machine MiniLM figure, the CPU lane's engine
(``Embedder(runtime="onnx", variant="int8", threads=2)``) and the static model embed the
same ``--sample`` chunks drawn from every repository, ``--repeats`` times each.

model2vec is a bench-only dependency (not in pyproject.toml)::

    .venv/bin/pip install "model2vec[distill]==0.8.0" -c constraints.txt

(0.8.1 and later pin ``transformers<5.4`` for their distill extra.) Then::

    ANEKIT_HOME=... .venv/bin/python bench/static_tier.py --stores DIR [--repos NAME ...]
        [--static DIR] [--distill-runs N] [--redistill] [--max-length 256]
        [--static-weight 1.0] [--repeats 3] [--sample 500] [--source CHECKOUT] [--json PATH]

Writes Markdown tables to stdout and a JSON record (command, machine, date, versions,
distill settings, timings, per-repository and per-query figures) to ``--json`` (default
``bench/results/static_tier-<date>.json``).
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
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from semble_bench import (
    HELDOUT,
    K,
    Located,
    RepoSpec,
    Task,
    chunk_scored,
    file_scored,
    load_specs,
    load_tasks,
    mean,
    table,
    use_source,
)

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
MODEL2VEC_PIN = "model2vec[distill]==0.8.0"
INSTALL = f'.venv/bin/pip install "{MODEL2VEC_PIN}" -c constraints.txt'
STATIC_NAME = "all-MiniLM-L6-v2-m2v-pca256"
#: model2vec.distill.distill's arguments (its defaults, written out).
DISTILL_SETTINGS: dict[str, Any] = {
    "vocabulary": None,
    "pca_dims": 256,
    "sif_coefficient": 1e-4,
    "token_remove_pattern": r"\[unused\d+\]",
    "quantize_to": "float16",
    "pooling": "mean",
}
LABELS = ("keyword", "static", "minilm", "minilm+static")
VIEWS = ("chunk", "file")
#: The throughput of the CPU lane (MiniLM int8, ONNX Runtime) known from earlier runs here.
KNOWN_MINILM_CHUNKS_S = 81.0


def require_model2vec() -> str:
    """model2vec's version; a clear exit when it is not installed."""
    try:
        import model2vec
        from model2vec.distill import distill  # noqa: F401  (the distill extra)
    except ImportError as error:
        raise SystemExit(
            f"bench/static_tier.py needs model2vec with its distill extra ({error}); it is a "
            f"bench-only dependency, not in pyproject.toml: {INSTALL}"
        ) from None
    return str(model2vec.__version__)


def sha256_of(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def spread(values: Sequence[float]) -> dict[str, Any]:
    """Median and range of repeated timings."""
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "runs": [round(value, 4) for value in values],
    }


# --- the static model ----------------------------------------------------------------------


def distill_static(source: Path, target: Path, runs: int, version: str) -> dict[str, Any]:
    """Distil the static model from ``source`` into ``target`` ``runs`` times (the last one
    kept) and write ``target/distill.json``: the settings, the seconds of each run."""
    from model2vec.distill import distill

    seconds: list[float] = []
    model: Any = None
    for run in range(runs):
        print(f"distilling {source.name} ({run + 1}/{runs})...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        model = distill(str(source), **DISTILL_SETTINGS)
        seconds.append(time.perf_counter() - start)
    assert model is not None
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(target))
    record = {
        "model2vec": version,
        "function": "model2vec.distill.distill",
        "source": str(source),
        "source_safetensors_sha256": sha256_of(source / "model.safetensors"),
        "settings": DISTILL_SETTINGS,
        "seconds": spread(seconds),
        "shape": list(model.embedding.shape),
        "dtype": str(model.embedding.dtype),
        "normalize": bool(model.normalize),
        "date": datetime.date.today().isoformat(),
        "machine": _machine(),
        "load_average": os.getloadavg(),
    }
    (target / "distill.json").write_text(json.dumps(record, indent=1) + "\n")
    return record


def _machine() -> str:
    from benchmachine import machine

    return machine()


def static_encoder(model: Any, max_length: int) -> Callable[[Sequence[str]], np.ndarray]:
    """The static model's encode as this script uses it: one process (no joblib pool),
    truncation at ``max_length`` tokens, unit vectors in float32."""

    def encode(texts: Sequence[str]) -> np.ndarray:
        raw = model.encode(
            list(texts), max_length=max_length, batch_size=1024, use_multiprocessing=False
        )
        vectors: np.ndarray = np.asarray(raw, np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        unit: np.ndarray = vectors / np.where(norms == 0, 1.0, norms)  # no tokens: zero
        return unit

    return encode


# --- the static half --------------------------------------------------------


def top_ids(matrix: np.ndarray, ids: np.ndarray, query: np.ndarray, count: int) -> list[int]:
    """Exact cosine top ``count`` (unit rows, unit query), ties by id."""
    scores = matrix @ query
    order = np.lexsort((ids, -scores))[:count]
    return [int(i) for i in ids[order]]


# --- one repository ------------------------------------------------------------------------


def score(hits: Sequence[Any], root: Path, task: Task) -> dict[str, Any]:
    located = [Located(str(root / Path(h.path)), int(h.start_line), int(h.end_line)) for h in hits]
    chunk_ndcg, chunk_ranks = chunk_scored(located, task)
    file_ndcg, file_ranks = file_scored(located, task)
    return {
        "ndcg10": {"chunk": chunk_ndcg, "file": file_ndcg},
        "ranks": {"chunk": chunk_ranks, "file": file_ranks},
        "hits": [f"{h.path}:{h.start_line}-{h.end_line}" for h in hits],
    }


def measure_repo(
    spec: RepoSpec,
    tasks: Sequence[Task],
    cache: Path,
    stores: Path,
    encode: Callable[[Sequence[str]], np.ndarray],
    args: argparse.Namespace,
    sample_at: set[int],
) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    """(figures, per-query rows, the sampled chunks' model texts) of one repository."""
    from anekit.search import Index
    from anekit.search.chunk import Chunk, model_text
    from anekit.search.index import CANDIDATES_PER_HIT, MIN_CANDIDATES
    from anekit.search.limits import SEARCH_BUDGET_S

    root = spec.benchmark_dir(cache)
    wanted = max(MIN_CANDIDATES, CANDIDATES_PER_HIT * K)
    rows: list[dict[str, Any]] = []
    with Index(root, store=stores / spec.folder, cache=None) as index:
        store = index.store
        if store.identity is None:
            raise SystemExit(f"{stores / spec.folder}: an empty store")
        embedded, _ = store.vector_matrix()
        all_ids = sorted({int(i) for i in embedded} | {c.id for c, _ in store.unembedded()})
        chunks = store.chunks(all_ids)
        texts = [
            model_text(c.relpath, Chunk(c.start_line, c.end_line, c.text, c.symbol, c.kind))
            for c in chunks
        ]
        ids = np.asarray([c.id for c in chunks], np.int64)
        sample = [texts[i] for i in sorted(sample_at) if i < len(texts)]
        seconds: list[float] = []
        matrix = np.zeros((0, 0), np.float32)
        for _ in range(args.repeats):
            start = time.perf_counter()
            matrix = encode(texts)
            seconds.append(time.perf_counter() - start)
        allowed = store.filter_ids()
        mismatched: list[str] = []
        query_seconds: list[float] = []
        for task in tasks:
            query = task.query
            if not query.strip():
                raise SystemExit(f"{spec.name}: an empty query")
            reference = index.search(query, k=K, mode="hybrid")
            with store.budget(SEARCH_BUDGET_S):
                keyword = [i for i, _ in store.keyword_search(query, wanted, allowed)]
                minilm = index._vector_ids(query, wanted, allowed)
                start = time.perf_counter()
                query_vector = encode([query])[0]
                static = top_ids(matrix, ids, query_vector, wanted) if query_vector.any() else []
                query_seconds.append(time.perf_counter() - start)
                third = [(static, args.static_weight)]
                results = {
                    "keyword": index.rank(store, query, K, [], keyword),
                    "static": index.rank(store, query, K, static, keyword),
                    "minilm": index.rank(store, query, K, minilm, keyword),
                    "minilm+static": index.rank(store, query, K, minilm, keyword, third),
                }
            spans = [(h.path, h.start_line, h.end_line) for h in reference]
            if spans != [(h.path, h.start_line, h.end_line) for h in results["minilm"]]:
                mismatched.append(query)
            rows.append(
                {
                    "query": query,
                    "category": task.category,
                    "targets": [target.as_text() for target in task.all_relevant],
                    **{label: score(results[label], root, task) for label in LABELS},
                }
            )
    figures: dict[str, Any] = {
        "language": spec.language,
        "revision": spec.revision,
        "queries": len(rows),
        "chunks": len(texts),
        "static_embed_seconds": spread(seconds),
        "static_chunks_per_second": len(texts) / statistics.median(seconds),
        "static_query_seconds_median": statistics.median(query_seconds),
        "minilm_matches_index_search": len(rows) - len(mismatched),
        "minilm_mismatched_queries": mismatched,
    }
    for label in LABELS:
        figures[label] = {}
        for view in VIEWS:
            categories: dict[str, list[float]] = defaultdict(list)
            for row in rows:
                categories[row["category"]].append(row[label]["ndcg10"][view])
            figures[label][view] = {
                "ndcg10": mean(row[label]["ndcg10"][view] for row in rows),
                "by_category": {name: mean(v) for name, v in sorted(categories.items())},
            }
    return figures, rows, sample


def minilm_throughput(sample: Sequence[str], repeats: int) -> dict[str, Any]:
    """The CPU lane's engine (ONNX Runtime int8, two threads) on ``sample``."""
    from anekit.embedder import Embedder

    embedder = Embedder(runtime="onnx", variant="int8", threads=2)
    try:
        embedder.encode(list(sample[:8]))  # the session loaded, the kernels warm
        seconds = []
        for _ in range(repeats):
            start = time.perf_counter()
            embedder.encode(list(sample))
            seconds.append(time.perf_counter() - start)
    finally:
        embedder.close()
    return {
        "engine": 'Embedder(runtime="onnx", variant="int8", threads=2)',
        "chunks": len(sample),
        "seconds": spread(seconds),
        "chunks_per_second": spread([len(sample) / s for s in seconds]),
    }


def static_throughput(
    sample: Sequence[str], encode: Callable[[Sequence[str]], np.ndarray], repeats: int
) -> dict[str, Any]:
    encode(list(sample[:8]))
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        encode(list(sample))
        seconds.append(time.perf_counter() - start)
    return {
        "chunks": len(sample),
        "seconds": spread(seconds),
        "chunks_per_second": spread([len(sample) / s for s in seconds]),
    }


# --- summaries -----------------------------------------------------------------------------


def summarise(
    per_repo: dict[str, dict[str, Any]], specs: dict[str, RepoSpec], label: str, view: str
) -> dict[str, Any]:
    """Overall (mean over repositories), per language and per category, as semble's do."""
    languages: dict[str, list[float]] = defaultdict(list)
    categories: dict[str, list[float]] = defaultdict(list)
    for name, figures in per_repo.items():
        languages[specs[name].language].append(figures[label][view]["ndcg10"])
        for category, value in figures[label][view]["by_category"].items():
            categories[category].append(value)
    return {
        "ndcg10": mean(figures[label][view]["ndcg10"] for figures in per_repo.values()),
        "by_language": {name: mean(v) for name, v in sorted(languages.items())},
        "by_category": {name: mean(v) for name, v in sorted(categories.items())},
    }


def wins(per_repo: dict[str, dict[str, Any]], better: str, worse: str, view: str) -> str:
    """Repositories where ``better`` is above, equal to, below ``worse``."""
    up = same = down = 0
    for figures in per_repo.values():
        delta = figures[better][view]["ndcg10"] - figures[worse][view]["ndcg10"]
        up += delta > 1e-9
        down += delta < -1e-9
        same += abs(delta) <= 1e-9
    return f"{up}/{same}/{down}"


def report(record: dict[str, Any], specs: dict[str, RepoSpec]) -> None:
    per_repo: dict[str, dict[str, Any]] = record["per_repo"]
    overall = record["summary"]
    print("\nper repository (chunk-scored NDCG@10; static embedding: median s over the runs)\n")
    print(
        "\n".join(
            table(
                ["repo", "language", "queries", "chunks", "static s", *LABELS],
                (
                    [
                        name,
                        figures["language"],
                        str(figures["queries"]),
                        str(figures["chunks"]),
                        f"{figures['static_embed_seconds']['median']:.2f}",
                        *(figures[label]["chunk"]["ndcg10"] for label in LABELS),
                    ]
                    for name, figures in per_repo.items()
                ),
                numeric_from=2,
            )
        )
    )
    print("\nper language (chunk-scored, mean over its repositories)\n")
    languages = sorted({figures["language"] for figures in per_repo.values()})
    rows: list[list[Any]] = [
        [
            language,
            str(sum(f["language"] == language for f in per_repo.values())),
            *(overall[label]["chunk"]["by_language"][language] for label in LABELS),
        ]
        for language in languages
    ]
    for view in VIEWS:
        rows.append(
            [
                f"**overall, {view}-scored**",
                str(len(per_repo)),
                *(overall[label][view]["ndcg10"] for label in LABELS),
            ]
        )
    print("\n".join(table(["language", "repos", *LABELS], rows)))
    print("\nper category (chunk-scored, mean over the repositories that have it)\n")
    categories = sorted(overall["keyword"]["chunk"]["by_category"])
    print(
        "\n".join(
            table(
                ["category", *LABELS],
                (
                    [
                        category,
                        *(overall[label]["chunk"]["by_category"][category] for label in LABELS),
                    ]
                    for category in categories
                ),
            )
        )
    )
    print("\nrepositories up/equal/down (chunk-scored; file-scored)\n")
    for better, worse in (("static", "keyword"), ("minilm+static", "minilm"), ("static", "minilm")):
        print(
            f"- {better} vs {worse}: {wins(per_repo, better, worse, 'chunk')}; "
            f"{wins(per_repo, better, worse, 'file')}"
        )
    timing = record["timing"]
    static_all = timing["static_all_chunks"]
    print(
        f"\nstatic model, all {static_all['chunks']} chunks: "
        f"{static_all['chunks_per_second']['median']:.0f} chunks/s median "
        f"({static_all['chunks_per_second']['min']:.0f}-"
        f"{static_all['chunks_per_second']['max']:.0f} over {len(static_all['seconds']['runs'])} "
        "runs)"
    )
    for name in ("static_sample", "minilm_sample"):
        item = timing[name]
        cps = item["chunks_per_second"]
        print(
            f"{name.replace('_', ' ')} ({item['chunks']} chunks): {cps['median']:.1f} chunks/s "
            f"median ({cps['min']:.1f}-{cps['max']:.1f})"
        )
    print(
        f"static query embedding + exact scan: median of repository medians "
        f"{timing['static_query_ms_median']:.2f} ms"
    )
    checks = record["checks"]
    print(
        f"\nchecks: minilm == Index.search on {checks['minilm_matches_index_search']}/"
        f"{record['queries']} queries"
    )


# --- main ----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--stores", type=Path, required=True, help="semble_bench.py's stores")
    parser.add_argument("--cache", type=Path, help="default $ANEKIT_HOME/semble-bench")
    parser.add_argument("--repos", nargs="+", metavar="NAME", help="only these (dev) repositories")
    parser.add_argument("--static", type=Path, help=f"default $ANEKIT_HOME/static/{STATIC_NAME}")
    parser.add_argument("--redistill", action="store_true", help="distil even if it exists")
    parser.add_argument("--distill-runs", type=int, default=1, help="timed distillations")
    parser.add_argument("--max-length", type=int, default=256, help="static tokens per chunk")
    parser.add_argument("--static-weight", type=float, default=1.0, help="third list's weight")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each timing")
    parser.add_argument("--sample", type=int, default=500, help="chunks for the MiniLM timing")
    parser.add_argument("--source", type=Path, help="import anekit from CHECKOUT/src")
    parser.add_argument("--json", type=Path, help="where to write the JSON record")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here may reach the Hub
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    version = require_model2vec()
    if args.source:
        use_source(args.source)

    from benchmachine import redacted, source_state

    import anekit
    from anekit.config import home
    from anekit.models.registry import resolve
    from anekit.search.store import Store

    specs = load_specs()
    if args.repos:
        refused = sorted(set(args.repos) & HELDOUT)
        if refused:
            raise SystemExit(f"held-out repositories are never measured here: {', '.join(refused)}")
        unknown = sorted(set(args.repos) - set(specs))
        if unknown:
            raise SystemExit(f"unknown repositories: {', '.join(unknown)}")
    stores = args.stores.expanduser().resolve()
    cache = (args.cache or home() / "semble-bench").expanduser().resolve()
    names = [
        name
        for name in specs
        if name not in HELDOUT
        and (not args.repos or name in args.repos)
        and (stores / specs[name].folder / "store.db").is_file()
        and specs[name].benchmark_dir(cache).is_dir()
    ]
    if not names:
        raise SystemExit(f"no dev repository with a store under {stores} and a tree under {cache}")
    by_repo: dict[str, list[Task]] = defaultdict(list)
    for task in load_tasks(specs):
        by_repo[task.repo].append(task)
    names = [name for name in names if by_repo.get(name)]
    source_before = source_state()
    started = time.perf_counter()
    load_before = os.getloadavg()

    _, minilm_folder = resolve(None)
    target = (args.static or home() / "static" / STATIC_NAME).expanduser().resolve()
    if args.redistill or not (target / "distill.json").is_file():
        distilled = distill_static(minilm_folder, target, max(1, args.distill_runs), version)
        distilled_now = True
    else:
        distilled = json.loads((target / "distill.json").read_text())
        distilled_now = False
    from model2vec import StaticModel

    start = time.perf_counter()
    model = StaticModel.from_pretrained(str(target))
    load_seconds = time.perf_counter() - start
    encode = static_encoder(model, args.max_length)

    # The MiniLM timing's sample: chunk positions drawn over every repository's chunks.
    counts = {}
    for name in names:
        with Store(stores / specs[name].folder, create=False) as store:
            counts[name] = store.chunk_count()
    total = sum(counts.values())
    drawn = sorted(random.Random(0).sample(range(total), min(args.sample, total)))
    offsets, offset = {}, 0
    for name in names:
        offsets[name] = offset
        offset += counts[name]

    per_repo: dict[str, dict[str, Any]] = {}
    runs: dict[str, list[dict[str, Any]]] = {}
    sample: list[str] = []
    for number, name in enumerate(names, 1):
        spec = specs[name]
        low, high = offsets[name], offsets[name] + counts[name]
        at = {position - low for position in drawn if low <= position < high}
        print(f"[{number}/{len(names)}] {name} ({spec.language})...", file=sys.stderr, flush=True)
        figures, rows, texts = measure_repo(spec, by_repo[name], cache, stores, encode, args, at)
        per_repo[name], runs[name] = figures, rows
        sample.extend(texts)
        print(
            f"  {figures['chunks']} chunks, static {figures['static_chunks_per_second']:.0f}/s; "
            + ", ".join(f"{label} {figures[label]['chunk']['ndcg10']:.3f}" for label in LABELS),
            file=sys.stderr,
            flush=True,
        )

    print(f"timing MiniLM on {len(sample)} chunks...", file=sys.stderr, flush=True)
    repeats = [per_repo[name]["static_embed_seconds"]["runs"] for name in names]
    all_seconds = [sum(run[i] for run in repeats) for i in range(args.repeats)]
    timing = {
        "static_load_seconds": load_seconds,
        "static_all_chunks": {
            "chunks": total,
            "seconds": spread(all_seconds),
            "chunks_per_second": spread([total / s for s in all_seconds]),
        },
        "static_sample": static_throughput(sample, encode, args.repeats),
        "minilm_sample": minilm_throughput(sample, args.repeats),
        "minilm_known_lane_chunks_per_second": KNOWN_MINILM_CHUNKS_S,
        "static_query_ms_median": 1000
        * statistics.median(per_repo[name]["static_query_seconds_median"] for name in names),
        "load_average": {"before": load_before, "after": os.getloadavg()},
    }
    source = source_state()
    commit = (source_before.get("commit") or "unknown")[:7]
    commit += "-edited" if source_before.get("src_changed") else ""
    today = datetime.date.today().isoformat()
    queries = sum(len(rows) for rows in runs.values())
    summary = {
        label: {view: summarise(per_repo, specs, label, view) for view in VIEWS} for label in LABELS
    }
    record: dict[str, Any] = {
        "script": "bench/static_tier.py",
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "date": today,
        "machine": _machine(),
        "versions": {
            "anekit": anekit.__version__,
            "anekit_commit": commit,
            "model2vec": version,
            "python": platform.python_version(),
            "numpy": np.__version__,
        },
        "install": INSTALL,
        "source": {"before": source_before, "after": source, "moved": source != source_before},
        "settings": {
            "k": K,
            "static_max_length": args.max_length,
            "static_weight": args.static_weight,
            "repeats": args.repeats,
            "sample": args.sample,
            "static_model": str(target),
            "minilm_folder": str(minilm_folder),
            "stores": str(stores),
        },
        "distill": {**distilled, "distilled_in_this_run": distilled_now},
        "repos_run": names,
        "queries": queries,
        "seconds": round(time.perf_counter() - started, 1),
        "summary": summary,
        "query_means": {
            label: {
                view: mean(row[label]["ndcg10"][view] for rows in runs.values() for row in rows)
                for view in VIEWS
            }
            for label in LABELS
        },
        "timing": timing,
        "checks": {
            "minilm_matches_index_search": sum(
                f["minilm_matches_index_search"] for f in per_repo.values()
            ),
        },
        "per_repo": per_repo,
        "runs": runs,
    }
    output = args.json or RESULTS / f"static_tier-{today}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(redacted(record), indent=1) + "\n")

    print(f"{today}; machine: {record['machine']}")
    print(f"command: {record['command']}")
    print(
        f"anekit {anekit.__version__} at {commit}"
        + (" (the checkout changed during the run)" if record["source"]["moved"] else "")
        + f"; model2vec {version}; static model {target.name} "
        f"(distilled in {distilled['seconds']['median']:.1f} s median); {len(names)} "
        f"repositories, {queries} queries, {record['seconds']:.0f} s"
    )
    report(record, specs)
    print(f"\nJSON: {output}")


if __name__ == "__main__":
    main()
