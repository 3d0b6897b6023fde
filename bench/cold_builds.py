"""Two cold builds of one tree: do they give the same vectors and the same top-10?

Each build is ``Index(root, store=<new folder>, lanes=[LANE], cache=False).update()`` in
this process (no machine cache, an empty store: every chunk embedded by the lane), then
every query is asked (hybrid, ``k=10``). The record compares the builds: vectors per text
hash (how many differ at all, the smallest cosine between the two builds' vectors of one
text) and top-10s (how many queries got the same hits, paths and lines, in the same order).
The issue's target: the same top-10 for at least 99 % of the queries.

    .venv/bin/python bench/cold_builds.py ROOT --semble NAME [--lane cpu] [--json PATH]
    .venv/bin/python bench/cold_builds.py ROOT --queries QUERIES.json

``--semble NAME`` asks the queries of semble's benchmark for that repository
(``bench/semble/annotations/NAME.json``); ``--queries`` a JSON list of strings.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from benchmachine import machine, source_state

from anekit.search.index import Index
from anekit.search.store import Store

HERE = Path(__file__).resolve().parent
K = 10


def build(root: Path, store: Path, lane: str, queries: list[str]) -> dict[str, Any]:
    """One cold build: its vectors by text hash and each query's top-10."""
    start = time.perf_counter()
    with Index(root, store=store, lanes=[lane], cache=False) as index:
        summary = index.update()
        seconds = time.perf_counter() - start
        tops = [
            [(hit.path, hit.start_line, hit.end_line) for hit in index.search(query, k=K)]
            for query in queries
        ]
    with Store(store, create=False) as opened:
        ids, vectors = opened.vector_matrix()
        hashes = dict(opened._conn.execute("SELECT id, text_hash FROM chunks"))
    by_hash = {hashes[int(i)]: np.asarray(v, np.float32) for i, v in zip(ids, vectors, strict=True)}
    return {"seconds": seconds, "chunks": summary.chunks, "vectors": by_hash, "tops": tops}


def compare(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    common = sorted(set(first["vectors"]) & set(second["vectors"]))
    differ = [h for h in common if not np.array_equal(first["vectors"][h], second["vectors"][h])]
    cosines = [
        float(
            np.dot(first["vectors"][h], second["vectors"][h])
            / (np.linalg.norm(first["vectors"][h]) * np.linalg.norm(second["vectors"][h]))
        )
        for h in differ
    ]
    same = sum(1 for a, b in zip(first["tops"], second["tops"], strict=True) if a == b)
    return {
        "vectors": len(common),
        "vectors_differ": len(differ),
        "min_cosine": min(cosines, default=1.0),
        "queries": len(first["tops"]),
        "same_top10": same,
        "same_top10_share": same / max(len(first["tops"]), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("root", type=Path, help="the tree to index twice")
    asked = parser.add_mutually_exclusive_group(required=True)
    asked.add_argument("--semble", metavar="NAME", help="semble's queries for repository NAME")
    asked.add_argument("--queries", type=Path, help="a JSON list of query strings")
    parser.add_argument("--lane", default="cpu")
    parser.add_argument("--json", type=Path, help="where to write the JSON record")
    args = parser.parse_args()
    if args.semble:
        annotations = HERE / "semble" / "annotations" / f"{args.semble}.json"
        queries = [item["query"] for item in json.loads(annotations.read_text())]
    else:
        queries = [str(query) for query in json.loads(args.queries.read_text())]
    builds = []
    with tempfile.TemporaryDirectory(prefix="anekit-cold-") as work:
        for name in ("first", "second"):
            builds.append(build(args.root, Path(work) / name, args.lane, queries))
            print(f"{name} build: {builds[-1]['chunks']} chunks in "
                  f"{builds[-1]['seconds']:.1f} s", file=sys.stderr)  # fmt: skip
    figures = compare(*builds)
    record = {
        "script": "bench/cold_builds.py",
        "command": "python " + shlex.join(["bench/cold_builds.py", *sys.argv[1:]]),
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "source": source_state(),
        "root": args.root.name,
        "lane": args.lane,
        "build_seconds": [round(b["seconds"], 1) for b in builds],
        **figures,
    }
    print(json.dumps(figures, indent=1))
    if args.json is not None:
        args.json.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
