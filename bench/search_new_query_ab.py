"""Hybrid queries never asked before, one process, two sides in alternating blocks: the
keyword half counting each query word's matches only up to its budget and, in a store of
200k vectors or more, the query embedded while the keyword half runs (``after``), against
whole counts and the halves in turn (``before``, the same code with both turned off:
``store_keyword._COUNT_CAP`` and ``searcher.OVERLAP_MIN_VECTORS`` set out of reach).

A reader keeps each word's match count per store generation, so a repeated query skips
counting; here the counts are dropped before every query (the store's chunk count kept),
as for a query never asked. The 30 queries of ``search_scale.queries()``, k=10, one
unmeasured pass per side first, then ``--blocks`` passes per side, the order alternating;
p50/p95 over all queries and the range of the passes' medians. Both sides return the
same hits (checked on the first pass).

    .venv/bin/python bench/search_new_query_ab.py TREE STORE [--blocks 6] [--json PATH]

TREE and STORE: a tree and store made by bench/search_million.py (or search_scale.py).
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

from benchmachine import emit, machine, source_state
from search_million import summarize_latency
from search_scale import queries

K = 10


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("store", type=Path)
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    from anekit.search import searcher, store_keyword
    from anekit.search.index import Index

    sides = {
        "after": (searcher.OVERLAP_MIN_VECTORS, store_keyword._COUNT_CAP),
        "before": (sys.maxsize, sys.maxsize),
    }
    index = Index(args.tree, store=args.store, lanes=["cpu"], cache=False)
    asked = queries()

    def run(side: str) -> tuple[list[float], list[list[tuple[str, int]]]]:
        searcher.OVERLAP_MIN_VECTORS, store_keyword._COUNT_CAP = sides[side]
        times, answers = [], []
        for query in asked:
            total = index.store._counts.get(())
            index.store._counts.clear()
            if total is not None:
                index.store._counts[()] = total
            start = time.perf_counter()
            hits = index.search(query, k=K, mode="hybrid")
            times.append((time.perf_counter() - start) * 1000)
            answers.append([(hit.path, hit.start_line) for hit in hits])
        return times, answers

    first = {side: run(side)[1] for side in sides}  # warm-up, unmeasured
    samples: dict[str, list[list[float]]] = {side: [] for side in sides}
    for block in range(args.blocks):
        for side in sides if block % 2 == 0 else reversed(list(sides)):
            samples[side].append(run(side)[0])
    summary = summarize_latency(samples)
    record = {
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "source": source_state(),
        "store": {"chunks": index.store.chunk_count(), "path": "<store>"},
        "same_hits": first["after"] == first["before"],
        "summary_ms": summary,
        "samples_ms": samples,
        "command": "bench/search_new_query_ab.py TREE STORE --blocks " + str(args.blocks),
    }
    index.close()
    emit(record, args.json)
    for side, row in summary.items():
        print(
            f"{side}: hybrid p50 {row['p50']:.1f} ms, p95 {row['p95']:.1f} ms, pass p50s "
            f"{row['pass_p50_min']:.1f}-{row['pass_p50_max']:.1f} (n={row['count']})",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
