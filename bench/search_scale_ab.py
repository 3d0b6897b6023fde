"""Query latency at 100k chunks, this checkout against an older one (a git worktree of the
commit before a change), on one store: the older side reads a copy taken back to store
schema 2 (no vector log). Each pass runs search_scale.py's query child of each side in a
fresh process (30 queries x 3 passes per mode), the order alternating; medians and ranges
over the passes. The store (search_scale's copies of a 10k-chunk standard-library base) is
made in WORKDIR the first time.

    .venv/bin/python bench/search_scale_ab.py WORKDIR OLD_WORKTREE [PASSES]
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import search_scale as ss

CHECKOUT = Path(__file__).resolve().parent.parent
MEASURES = ("hybrid", "vector", "keyword", "embedding")


def schema_two_copy(store: Path, copy: Path) -> None:
    """``store`` copied to ``copy`` without the vector log (schema 2, as before issue 37)."""
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(store, copy)
    (copy / "vectors.f16").unlink(missing_ok=True)
    conn = sqlite3.connect(copy / "store.db")
    for trigger in ("insert", "update", "delete"):
        conn.execute(f"DROP TRIGGER IF EXISTS vectors_log_{trigger}")
    conn.execute("DROP TABLE IF EXISTS vector_log")
    conn.execute("PRAGMA user_version = 2")
    conn.commit()
    conn.close()


def one_pass(tree: Path, root: Path, store: Path) -> dict[str, float]:
    """Medians of one query child of the checkout at ``tree``."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = Path(handle.name)
    spec = json.dumps({"root": str(root), "store": str(store), "repeats": 3})
    command = [sys.executable, str(tree / "bench" / "search_scale.py"), "--child", "query"]
    subprocess.run(
        [*command, "--spec", spec, "--output", str(out)],
        env={**os.environ, "PYTHONPATH": str(tree / "src")},
        check=True,
        stdout=subprocess.DEVNULL,
    )
    answer = json.loads(out.read_text())
    out.unlink()
    row = {
        mode: statistics.median(value for one in answer["samples_ms"][mode] for value in one)
        for mode in MEASURES
    }
    row["first_ms"] = answer["first_query_ms"]
    row["peak_mb"] = answer["process_peak_mb"]
    return row


def main() -> None:
    work, old_tree = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    passes = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    root, store = work / "tree-100000", work / "store-100000"
    if not (store / "store.db").exists():
        trees = ss.Trees(ss.make_base(work, 10_000), work)
        root = trees.make("100000", chunks=100_000)
        print(trees.index(root, store), flush=True)
        trees.cache.close()
    schema_two_copy(store, work / "store-100000-old")
    sides = {"new": (CHECKOUT, store), "old": (old_tree, work / "store-100000-old")}
    results: dict[str, list[dict[str, float]]] = {"new": [], "old": []}
    for number in range(passes):
        for side in ("new", "old") if number % 2 == 0 else ("old", "new"):
            row = one_pass(sides[side][0], root, sides[side][1])
            results[side].append(row)
            print(side, {key: round(value, 2) for key, value in row.items()}, flush=True)
    summary: dict[str, Any] = {
        side: {
            key: {
                "median": statistics.median(row[key] for row in rows),
                "min": min(row[key] for row in rows),
                "max": max(row[key] for row in rows),
            }
            for key in rows[0]
        }
        for side, rows in results.items()
    }
    print(json.dumps(summary, indent=1))
    record = {"passes": results, "summary": summary, "machine": ss.machine()}
    text = json.dumps(ss.redacted(record), indent=1).replace(str(work), "<workdir>")
    (work / "search_scale_ab.json").write_text(text + "\n")


if __name__ == "__main__":
    main()
