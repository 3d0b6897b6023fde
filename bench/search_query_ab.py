"""Warm hybrid query latency on one store, this checkout against an older one (a git
worktree of the commit before a change), like for like: each round runs one fresh process
per side, in alternating order; each process opens the store, searches the 30 queries of
``search_scale.queries()`` twice to warm up, then times them ``--passes`` times (k=10,
hybrid). Both sides must read the store as it is (no schema change between them).

    .venv/bin/python bench/search_query_ab.py ROOT STORE OLD_WORKTREE [--rounds 4]
        [--passes 4] [--save FILE.json]

Prints and saves each side's p50 and p95 over all its timings and each process's p50.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmachine import emit, machine, source_state

CHECKOUT = Path(__file__).resolve().parent.parent
_CHILD = """
import json, sys, time
sys.path.insert(0, {bench!r})
from search_scale import queries
from anekit.search.index import Index
index = Index({root!r}, store={store!r}, lanes=["cpu"], cache=False)
asked = queries()
for query in asked * 2:
    index.search(query, k=10, mode="hybrid")
times = []
for _ in range({passes}):
    for query in asked:
        start = time.perf_counter()
        index.search(query, k=10, mode="hybrid")
        times.append((time.perf_counter() - start) * 1000)
index.close()
print(json.dumps(times))
"""


def one_process(tree: Path, root: Path, store: Path, passes: int) -> list[float]:
    """The timings (ms) of one process of the checkout at ``tree``."""
    code = _CHILD.format(bench=str(CHECKOUT / "bench"), root=str(root), store=str(store),
                         passes=passes)  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(tree / "src")},
        check=True,
        capture_output=True,
        text=True,
    )
    times: list[float] = json.loads(done.stdout.strip().splitlines()[-1])
    return times


def summary(runs: list[list[float]]) -> dict[str, Any]:
    flat = sorted(value for run in runs for value in run)
    return {
        "p50_ms": round(statistics.median(flat), 2),
        "p95_ms": round(flat[int(0.95 * len(flat))], 2),
        "process_p50s_ms": [round(statistics.median(run), 2) for run in runs],
        "searches": len(flat),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("store", type=Path)
    parser.add_argument("old", type=Path, help="a worktree of the older commit")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--passes", type=int, default=4)
    parser.add_argument("--save", type=Path, default=None)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    sides = {"this": CHECKOUT, "old": args.old.resolve()}
    runs: dict[str, list[list[float]]] = {side: [] for side in sides}
    for number in range(args.rounds):
        order = list(sides) if number % 2 == 0 else list(sides)[::-1]
        for side in order:
            runs[side].append(one_process(sides[side], args.root, args.store, args.passes))
    old_commit = subprocess.run(["git", "-C", str(args.old), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()  # fmt: skip
    record = {
        # the folders by their names only: no path of this machine in the record
        "command": (
            f"python bench/search_query_ab.py ROOT STORE OLD_WORKTREE --rounds {args.rounds} "
            f"--passes {args.passes}"
        ),
        "root": args.root.name,
        "store": args.store.name,
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "source": source_state(),
        "old_commit": old_commit,
        "sides": {side: summary(found) for side, found in runs.items()},
    }
    emit(record, args.save)


if __name__ == "__main__":
    main()
