"""A one-shot ``anekit search`` from a cold process: whole-process wall time, this
checkout against another, alternated in one run.

Each run is ``python -m anekit search QUERY --store STORE -k K`` in a fresh process, its
output a pipe, timed from outside (imports, the store, the query model's session, the
search and the printing). The sides are this checkout's ``src`` and ``--source``'s (an
older commit's checkout, say), each put first on ``PYTHONPATH``; after ``--warmups`` runs
of each (the page cache, the weights digest), ``--runs`` runs of each alternate, the order
flipping from run to run, with a short pause between. Reported: median and range per side,
and the ratio of medians.

    .venv/bin/python bench/oneshot_search.py --store STORE --cwd TREE [--query Q] [-k 5]
        [--source OTHER_CHECKOUT] [--runs 10] [--warmups 2] [--json PATH]

Writes a JSON record (date, command, machine, every run) to ``--json`` (default
``bench/results/oneshot_search-<date>.json``).
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
import time
from pathlib import Path
from typing import Any

from benchmachine import machine, redacted, source_state

HERE = Path(__file__).resolve().parent
THIS = HERE.parent


def run_once(command: list[str], cwd: Path, src: Path) -> float:
    environment = {**os.environ, "PYTHONPATH": str(src), "HF_HUB_OFFLINE": "1"}
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=environment, capture_output=True, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--store", type=Path, required=True, help="the store folder")
    parser.add_argument("--cwd", type=Path, required=True, help="the indexed tree")
    parser.add_argument("--query", default="how is a table rendered")
    parser.add_argument("-k", type=int, default=5)
    parser.add_argument("--source", type=Path, help="another checkout, the other side")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--warmups", type=int, default=2)
    parser.add_argument("--pause", type=float, default=0.2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    command = [sys.executable, "-m", "anekit", "search", args.query]
    command += ["--store", str(args.store.resolve()), "-k", str(args.k)]
    sides = {"this": THIS / "src"}
    if args.source is not None:
        sides["other"] = args.source.resolve() / "src"
    for _ in range(args.warmups):
        for src in sides.values():
            run_once(command, args.cwd, src)
    times: dict[str, list[float]] = {side: [] for side in sides}
    names = list(sides)
    for number in range(args.runs):
        for side in names if number % 2 == 0 else names[::-1]:
            times[side].append(run_once(command, args.cwd, sides[side]))
            time.sleep(args.pause)
    summary = {
        side: {
            "median_s": statistics.median(values),
            "min_s": min(values),
            "max_s": max(values),
        }
        for side, values in times.items()
    }
    for side, figures in summary.items():
        print(
            f"{side} ({sides[side]}): median {figures['median_s']:.3f} s, "
            f"range {figures['min_s']:.3f}-{figures['max_s']:.3f} s, {args.runs} runs"
        )
    if "other" in summary:
        ratio = summary["other"]["median_s"] / summary["this"]["median_s"]
        print(f"other / this: {ratio:.2f}x (how many times longer the other side takes)")
    today = datetime.date.today().isoformat()
    record: dict[str, Any] = {
        "script": "bench/oneshot_search.py",
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "date": today,
        "machine": machine(),
        "source": source_state(),
        "other": str(args.source) if args.source else None,
        "settings": {"query": args.query, "k": args.k, "runs": args.runs},
        "summary": summary,
        "runs_s": times,
    }
    output = args.json or HERE / "results" / f"oneshot_search-{today}.json"
    output.write_text(json.dumps(redacted(record), indent=1) + "\n")
    print(f"JSON: {output}")


if __name__ == "__main__":
    main()
